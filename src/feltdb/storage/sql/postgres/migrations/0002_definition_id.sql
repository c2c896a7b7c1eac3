-- Schema 2: the definition id joins the scheduling index, so that a worker serving some
-- definitions selects their work by index range (rows_by_definition) instead of filtering
-- every other definition's ready work. Run by feltdb.storage.postgres inside the migrating
-- transaction (under the migration advisory lock), which then records version 2.

ALTER TABLE rows ADD COLUMN definition_id text COLLATE "C";

-- The index column is normally computed by the caller (feltdb.work.scheduling.row_index);
-- for the rows already stored it is read, once, from the workload documents themselves.
-- document is text (see 0001), parsed as json: an escaped NUL ("\u0000") anywhere in it
-- cannot be converted to text and would fail the whole migration, so each is read as
-- "\u0001" (the same length, still JSON; no identifier holds either).
UPDATE rows
SET definition_id = replace(document, '\u0000', '\u0001')::json ->> 'definition_id'
WHERE collection = 'system_durable_work';

-- rows_by_state with the definition after the state: one definition's claimable work is
-- one index range, in the same order.
CREATE INDEX rows_by_definition ON rows (
    collection, tenant_id, application_id, state, definition_id,
    priority DESC NULLS LAST, created_at NULLS FIRST, key, eligible_at
);
