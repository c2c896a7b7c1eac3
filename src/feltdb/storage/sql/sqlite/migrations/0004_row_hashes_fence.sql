-- Schema 3 to schema 4: the fence of the audit chain. Run by feltdb.storage.sqlite when it
-- opens a file of schema 3, inside one BEGIN IMMEDIATE transaction.
--
-- A process of a release older than schema 3, which had the file open when it was
-- migrated, would go on logging entries without row hashes (it knows no such column), so
-- the rows they write would escape verification without a word. From now on every entry
-- must carry them (the entries logged before are left as they are), and such a process's
-- commits fail instead. SQLite cannot add a CHECK to a table, hence a trigger.

CREATE TRIGGER transactions_row_hashes_check BEFORE INSERT ON transactions
WHEN NEW.row_hashes IS NULL
BEGIN
    SELECT RAISE(ABORT, 'a log entry without row hashes: written by a feltdb older than this file''s schema');
END;

PRAGMA user_version = 4;
