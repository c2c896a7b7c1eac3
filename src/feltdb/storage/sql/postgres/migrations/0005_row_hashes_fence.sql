-- Schema 5: the fence of the audit chain. Run by feltdb.storage.postgres inside the
-- migrating transaction, which then records version 5.
--
-- A process of a release older than schema 4, opened before this database was migrated,
-- would go on logging entries without row hashes (it knows no such column), so the rows
-- they write would escape verification without a word. From now on every entry must
-- carry them: the entries logged before are exempt (NOT VALID), and such a process's
-- commits now fail instead.
ALTER TABLE transactions ADD CONSTRAINT transactions_row_hashes_check
    CHECK (row_hashes IS NOT NULL) NOT VALID;
