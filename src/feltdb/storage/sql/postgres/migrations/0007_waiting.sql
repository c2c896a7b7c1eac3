-- Schema 7: work set aside. Run by feltdb.storage.postgres inside the migrating
-- transaction (under the migration advisory lock), which then records version 7.
--
-- A claim that finds ready work waiting on another workload (a dependency not yet in its
-- required state) sets it aside: waits_on and waits_for name what it waits for, and
-- rows_ready holds only rows not set aside, so no claim reads or locks it again. The
-- commit that writes the awaited row in that state releases it (release_waiting, through
-- rows_waiting), and any write of the row itself clears both columns. Nothing is set aside
-- by this migration: the next claim that finds such work does it.
--
-- As with schema 2, stop the processes of an older release before migrating: their writes
-- know nothing of work set aside, so a commit of theirs releases nothing, and work of
-- theirs re-armed while set aside stays set aside. WorkloadStore.rebuild_indexes()
-- releases every row set aside; claims set aside again what still waits.

ALTER TABLE rows ADD COLUMN waits_on text COLLATE "C";
ALTER TABLE rows ADD COLUMN waits_for text COLLATE "C";

DROP INDEX rows_ready;

CREATE INDEX rows_ready ON rows (
    collection, tenant_id, application_id, definition_id, claim_group,
    priority DESC NULLS LAST, created_at NULLS FIRST, key, eligible_at
) WHERE claim_group IS NOT NULL AND waits_on IS NULL;

CREATE INDEX rows_waiting ON rows (collection, tenant_id, application_id, waits_on, waits_for)
    WHERE waits_on IS NOT NULL;
