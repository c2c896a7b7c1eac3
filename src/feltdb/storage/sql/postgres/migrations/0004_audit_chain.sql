-- Schema 4: the audit chain (feltdb/storage/audit_chain.py). Each log entry records the
-- hash of every row it wrote (row_hashes, "" for a delete), and audit_chain holds one link
-- per sealed entry, in revision order. Only entries below every open transaction's id are
-- sealed (their set is final there), so concurrent commits never reorder the chain. Run by
-- feltdb.storage.postgres inside the migrating transaction, which then records version 4.
--
-- Entries logged before it, or by an older release still running, have no row hashes: the
-- chain covers their logged fields, not the rows they wrote.
ALTER TABLE transactions ADD COLUMN row_hashes text[];

CREATE TABLE audit_chain (
    commit_revision   bigint NOT NULL,
    previous_revision bigint NOT NULL,
    digest            text   NOT NULL,
    link              text   NOT NULL,
    CONSTRAINT audit_chain_pkey PRIMARY KEY (commit_revision),
    CONSTRAINT audit_chain_previous_revision_check CHECK (previous_revision < commit_revision)
);
