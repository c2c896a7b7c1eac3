-- Schema 6 to schema 7: the environment joins the index columns, so that a reader
-- constrained to some environments (a grant's environments) lists their work by index
-- range (rows_by_environment) instead of reading past every other environment's rows. Run
-- by feltdb.storage.sqlite when it opens a file of schema 6, inside one BEGIN IMMEDIATE
-- transaction.

ALTER TABLE rows ADD COLUMN environment TEXT;

-- The index column is normally computed by the caller (feltdb.work.scheduling.row_index);
-- for the rows already stored it is read, once, from the workload documents themselves.
UPDATE rows
SET environment = json_extract(document, '$.environment')
WHERE collection = 'system_durable_work';

CREATE INDEX rows_by_environment ON rows (
    collection, tenant_id, application_id, environment, state, priority DESC, created_at, key
);

PRAGMA user_version = 7;
