-- Schema 6: claim partitions. Run by feltdb.storage.postgres inside the migrating
-- transaction (under the migration advisory lock), which then records version 6.
--
-- A row the caller marks claimable carries a claim group (feltdb/storage/partitions.py),
-- and rows_ready holds only those rows, one index range per (definition, group): a claim
-- walks the groups and reads only the ranges it may take, so ready work it can never take
-- is never paged through nor locked. Normally the caller computes the group
-- (feltdb.work.scheduling.row_index); the rows already ready get one group that says only
-- "written before groups" (the work layer reads such a range and checks each row), and
-- the right one at their next write. The index is partial: a row leaving the ready state
-- leaves it, and no other state's writes touch it.
--
-- As with schema 2, stop the processes of an older release before migrating: their writes
-- know no claim group, so work they admit would not be claimable by the new ones until it
-- is written again (WorkloadStore.rebuild_indexes repairs that).

ALTER TABLE rows ADD COLUMN claim_group text COLLATE "C";

-- document is text (see 0001), parsed as json: an escaped NUL ("\u0000") anywhere in it
-- cannot be converted to text and would fail the whole migration, so each is read as
-- "\u0001" (the same length, still JSON; no identifier holds either).
UPDATE rows
SET claim_group = 'unsorted'
WHERE collection = 'system_durable_work'
  AND replace(document, '\u0000', '\u0001')::json ->> 'state' = 'READY';

CREATE INDEX rows_ready ON rows (
    collection, tenant_id, application_id, definition_id, claim_group,
    priority DESC NULLS LAST, created_at NULLS FIRST, key, eligible_at
) WHERE claim_group IS NOT NULL;
