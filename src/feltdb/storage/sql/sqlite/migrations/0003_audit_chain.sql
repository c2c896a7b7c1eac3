-- Schema 2 to schema 3: the audit chain (feltdb/storage/audit_chain.py). Each log entry
-- records the hash of every row it wrote (row_hashes), and audit_chain holds one link per
-- sealed entry. Run by feltdb.storage.sqlite when it opens a file of schema 2, inside one
-- BEGIN IMMEDIATE transaction. Entries logged before it have no row hashes: the chain covers
-- their logged fields, not the rows they wrote (verify counts those rows as not covered).

ALTER TABLE transactions ADD COLUMN row_hashes TEXT;

CREATE TABLE audit_chain (
    commit_revision   INTEGER PRIMARY KEY,
    previous_revision INTEGER NOT NULL,
    digest            TEXT    NOT NULL,
    link              TEXT    NOT NULL,
    CHECK (previous_revision < commit_revision)
);

PRAGMA user_version = 3;
