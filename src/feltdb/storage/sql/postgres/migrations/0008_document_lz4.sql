-- Schema 8: documents compressed with lz4. Run by feltdb.storage.postgres inside the
-- migrating transaction (under the migration advisory lock), which then records version 8.
--
-- A workload's document (about 2.8 KB of JSON) passes the TOAST threshold, so the server
-- compresses it on every write: with lz4 rather than pglz it spent 232-243 µs of its own
-- CPU per drained workload against 264-278 µs (feltdb's batch drain of 10,000 workloads,
-- two rounds each, alternating), for 6% more table (73 MB against 69 MB). Rows written
-- before keep their pglz values until their next write; reading either needs nothing.
--
-- A server built without lz4 (or older than PostgreSQL 14) keeps pglz: the change is
-- skipped, never an error.

DO $migration$
BEGIN
    EXECUTE 'ALTER TABLE rows ALTER COLUMN document SET COMPRESSION lz4';
EXCEPTION WHEN feature_not_supported OR syntax_error OR undefined_object THEN
    RAISE NOTICE 'feltdb: documents stay compressed with pglz (%)', SQLERRM;
END
$migration$;
