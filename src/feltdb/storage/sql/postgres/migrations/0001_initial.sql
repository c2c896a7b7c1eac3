-- The feltdb store on PostgreSQL, schema 1: the same tables and indexes as the SQLite schema
-- (sql/sqlite/schema.sql), in PostgreSQL's types. Run by feltdb.storage.postgres inside the
-- migrating transaction, which holds the migration advisory lock and then records version 1
-- in feltdb_schema_migrations. Every object is named here, constraints included, so a test
-- can compare a migrated database with exactly the objects this file declares.

-- One row per (collection, key). The text columns use the "C" collation (byte order of
-- UTF-8, which is code point order) so that ORDER BY key, and the index order, are the same
-- as SQLite's BINARY collation whatever the database's default locale is.
--
-- document is text, not jsonb: it holds the canonical JSON of the document without
-- "__version", exactly as the SQLite backend stores it. jsonb would not give the document
-- back bit for bit: it rewrites numbers (a float 1e20 comes back as the integer
-- 100000000000000000000) and refuses "\u0000" in strings, and nothing ever queries inside a
-- document (the scheduler's fields are the indexed columns below), so jsonb's operators
-- would buy nothing for that cost.
CREATE TABLE rows (
    collection       text COLLATE "C" NOT NULL,
    key              text COLLATE "C" NOT NULL,
    version          bigint NOT NULL,
    revision         bigint NOT NULL,
    document         text   NOT NULL,
    tenant_id        text COLLATE "C",
    application_id   text COLLATE "C",
    state            text COLLATE "C",
    priority         bigint,
    created_at       bigint,
    eligible_at      bigint,
    lease_expires_at bigint,
    deadline_at      bigint,
    result_id        text COLLATE "C",
    CONSTRAINT rows_pkey PRIMARY KEY (collection, key),
    CONSTRAINT rows_version_check CHECK (version >= 1)
);

-- claimable_rows and list_rows(tenant_id, application_id, state): equality on the first four
-- columns, then the index order is exactly the ORDER BY (NULLS placed as SQLite places them:
-- NULL sorts first ascending, last descending), so no sort; eligible_at is last so the
-- eligibility filter can be read from the index entry.
CREATE INDEX rows_by_state ON rows (
    collection, tenant_id, application_id, state,
    priority DESC NULLS LAST, created_at NULLS FIRST, key, eligible_at
);

-- list_rows(tenant_id, application_id) without a state: the same order without state.
CREATE INDEX rows_by_application ON rows (
    collection, tenant_id, application_id, priority DESC NULLS LAST, created_at NULLS FIRST, key
);

-- rows_due: only rows with a live lease / a deadline are indexed. key breaks ties so the
-- order is total and still needs no sort.
CREATE INDEX rows_by_lease_expiry ON rows (collection, lease_expires_at, key)
    WHERE lease_expires_at IS NOT NULL;

CREATE INDEX rows_by_deadline ON rows (collection, deadline_at, key)
    WHERE deadline_at IS NOT NULL;

-- rows_with_result_ids: only rows that carry a result id are indexed.
CREATE INDEX rows_by_result_id ON rows (collection, result_id, key)
    WHERE result_id IS NOT NULL;

-- The transaction log: one row per commit, written in the same transaction as its rows.
-- commit_revision is the id of the transaction that committed (pg_current_xact_id(), see
-- feltdb/storage/postgres.py): unique and increasing, but not dense, so unlike SQLite's log
-- there is no base_revision = commit_revision - 1 check, only base_revision < commit_revision.
-- committed_at is the server's clock, one clock for every writer machine.
CREATE TABLE transactions (
    commit_revision bigint           NOT NULL,
    base_revision   bigint           NOT NULL,
    transaction_id  text             NOT NULL,
    committed_at    double precision NOT NULL,
    operation_ids   text[]           NOT NULL,
    keys            text[]           NOT NULL,  -- "collection/key" of every row written
    audit           text,                       -- canonical JSON object (text: see rows)
    CONSTRAINT transactions_pkey PRIMARY KEY (commit_revision),
    CONSTRAINT transactions_transaction_id_key UNIQUE (transaction_id),
    CONSTRAINT transactions_base_revision_check CHECK (base_revision < commit_revision)
);
