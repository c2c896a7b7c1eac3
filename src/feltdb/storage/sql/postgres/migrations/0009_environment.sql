-- Schema 9: the environment joins the index columns, so that a reader constrained to some
-- environments (a grant's environments) lists their work by index range
-- (rows_by_environment) instead of reading past every other environment's rows. Run by
-- feltdb.storage.postgres inside the migrating transaction (under the migration advisory
-- lock), which then records version 9.

ALTER TABLE rows ADD COLUMN environment text COLLATE "C";

-- The index column is normally computed by the caller (feltdb.work.scheduling.row_index);
-- for the rows already stored it is read, once, from the workload documents themselves.
-- document is text (see 0001), parsed as json: an escaped NUL ("\u0000") anywhere in it
-- cannot be converted to text and would fail the whole migration, so each is read as
-- "\u0001" (the same length, still JSON; no identifier holds either).
UPDATE rows
SET environment = replace(document, '\u0000', '\u0001')::json ->> 'environment'
WHERE collection = 'system_durable_work';

CREATE INDEX rows_by_environment ON rows (
    collection, tenant_id, application_id, environment, state,
    priority DESC NULLS LAST, created_at NULLS FIRST, key
);
