-- Schema 3: a revision is the committing transaction's id times 1024 plus the commit's place
-- among that transaction's commits (commit_many commits several plans in one transaction;
-- see feltdb/storage/postgres.py). Run by feltdb.storage.postgres inside the migrating
-- transaction (under the migration advisory lock), which then records version 3.
--
-- Nothing is renumbered: every revision logged so far is an id of a transaction older than
-- this one, so it is below every revision logged from now on, and the log keeps its order.
--
-- The fence: a process of an older release, opened before this migration, would go on
-- logging at its bare transaction id, far below the new revisions, where log readers that
-- have passed it would never look. So every entry logged from now on must be at least this
-- transaction's id times 1024; the rows logged before are exempt (NOT VALID), and such an
-- older process's commits now fail instead of going missing.
DO $fence$
BEGIN
    EXECUTE format(
        'ALTER TABLE transactions ADD CONSTRAINT transactions_revision_scheme_check '
        'CHECK (commit_revision >= %s) NOT VALID',
        pg_current_xact_id()::text::bigint * 1024
    );
END
$fence$;
