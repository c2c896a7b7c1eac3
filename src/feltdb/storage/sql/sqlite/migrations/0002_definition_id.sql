-- Schema 1 to schema 2: the definition id joins the scheduling index, so that a worker
-- serving some definitions selects their work by index range (rows_by_definition) instead of
-- filtering every other definition's ready work. Run by feltdb.storage.sqlite when it opens
-- a file of schema 1, inside one BEGIN IMMEDIATE transaction: a file is either at schema 1
-- or fully at schema 2, never between. A new store gets schema 2 from schema.sql directly.

ALTER TABLE rows ADD COLUMN definition_id TEXT;

-- The index column is normally computed by the caller (feltdb.work.scheduling.row_index);
-- for the rows already stored it is read, once, from the workload documents themselves.
UPDATE rows
SET definition_id = json_extract(document, '$.definition_id')
WHERE collection = 'system_durable_work';

CREATE INDEX rows_by_definition ON rows (
    collection, tenant_id, application_id, state, definition_id,
    priority DESC, created_at, key, eligible_at
);

PRAGMA user_version = 2;
