-- Schema 4 to schema 5: claim partitions. Run by feltdb.storage.sqlite when it opens a file
-- of schema 4, inside one BEGIN IMMEDIATE transaction.
--
-- A row the caller marks claimable carries a claim group (feltdb/storage/partitions.py),
-- and rows_ready holds only those rows, one index range per (definition, group): a claim
-- walks the groups and reads only the ranges it may take, so ready work it can never take
-- is never paged through. Normally the caller computes the group
-- (feltdb.work.scheduling.row_index); the rows already ready get one group that says only
-- "written before groups" (the work layer reads such a range and checks each row), and
-- the right one at their next write.
--
-- As with schema 2, stop the processes of an older release before opening the file with
-- this one: their writes know no claim group, so work they admit would not be claimable by
-- the new ones until it is written again (WorkloadStore.rebuild_indexes repairs that).

ALTER TABLE rows ADD COLUMN claim_group TEXT;

UPDATE rows
SET claim_group = 'unsorted'
WHERE collection = 'system_durable_work'
  AND json_extract(document, '$.state') = 'READY';

CREATE INDEX rows_ready ON rows (
    collection, tenant_id, application_id, definition_id, claim_group,
    priority DESC, created_at, key, eligible_at
) WHERE claim_group IS NOT NULL;

PRAGMA user_version = 5;
