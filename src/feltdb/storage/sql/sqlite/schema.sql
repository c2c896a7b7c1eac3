-- The feltdb store, schema 7. Applied once, in one transaction, to a new or empty file (a file
-- of an older schema is upgraded in place instead, by migrations/0002 to 0007).
-- The two PRAGMAs at the end stamp the file as a feltdb store of schema 7: application_id
-- 0x66656C74 is "felt" in ASCII; user_version is feltdb.storage.sqlite.SCHEMA_VERSION.

-- One row per (collection, key). document is the canonical JSON of the row's document
-- without "__version"; version is stamped back in on read. The remaining columns are the
-- RowIndex the caller computes from the document; the backend never derives them itself.
CREATE TABLE rows (
    collection       TEXT    NOT NULL,
    key              TEXT    NOT NULL,
    version          INTEGER NOT NULL CHECK (version >= 1),
    revision         INTEGER NOT NULL,
    document         TEXT    NOT NULL,
    tenant_id        TEXT,
    application_id   TEXT,
    state            TEXT,
    priority         INTEGER,
    created_at       INTEGER,
    eligible_at      INTEGER,
    lease_expires_at INTEGER,
    deadline_at      INTEGER,
    result_id        TEXT,
    definition_id    TEXT,
    claim_group      TEXT,
    waits_on         TEXT,
    waits_for        TEXT,
    environment      TEXT,
    PRIMARY KEY (collection, key)
);

-- claimable_rows and list_rows(tenant_id, application_id, state): equality on the first four
-- columns, then the index order is exactly the ORDER BY, so no sort; eligible_at is last so
-- the eligibility filter is evaluated on the index entry before the table row is read.
CREATE INDEX rows_by_state ON rows (
    collection, tenant_id, application_id, state, priority DESC, created_at, key, eligible_at
);

-- count_in_application and oldest_by_definition: rows_by_state with the definition after
-- the state, so that the counts per state and definition are read from the index alone.
CREATE INDEX rows_by_definition ON rows (
    collection, tenant_id, application_id, state, definition_id,
    priority DESC, created_at, key, eligible_at
);

-- A list constrained to some environments: one range per (environment, state), each in
-- the list's order (feltdb.work.listing merges them).
CREATE INDEX rows_by_environment ON rows (
    collection, tenant_id, application_id, environment, state, priority DESC, created_at, key
);

-- Claim partitions (feltdb/storage/partitions.py): only rows with a claim group that are
-- not set aside, one index range per (definition, group) of an application, each in the
-- claim order. A claim walks the groups (one seek each) and reads only the ranges it may
-- take; work set aside (waiting on another row) is in no range.
CREATE INDEX rows_ready ON rows (
    collection, tenant_id, application_id, definition_id, claim_group,
    priority DESC, created_at, key, eligible_at
) WHERE claim_group IS NOT NULL AND waits_on IS NULL;

-- release_waiting: the rows set aside waiting on one row, of its application.
CREATE INDEX rows_waiting ON rows (collection, tenant_id, application_id, waits_on, waits_for)
    WHERE waits_on IS NOT NULL;

-- list_rows(tenant_id, application_id) without a state: the same order without state.
CREATE INDEX rows_by_application ON rows (
    collection, tenant_id, application_id, priority DESC, created_at, key
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
-- commit_revision is the rowid, so MAX(commit_revision) is a single b-tree seek.
CREATE TABLE transactions (
    commit_revision INTEGER PRIMARY KEY,
    base_revision   INTEGER NOT NULL,
    transaction_id  TEXT    NOT NULL UNIQUE,
    committed_at    REAL    NOT NULL,
    operation_ids   TEXT    NOT NULL,  -- JSON array of strings
    keys            TEXT    NOT NULL,  -- JSON array of "collection/key"
    audit           TEXT,              -- canonical JSON object, or NULL
    row_hashes      TEXT,              -- JSON array: each key's row hash ("" deleted)
    CHECK (base_revision = commit_revision - 1)
);

-- Every entry carries its rows' hashes: a process of an older release, open on a file
-- being migrated, would log entries without them (migrations/0004_row_hashes_fence.sql).
CREATE TRIGGER transactions_row_hashes_check BEFORE INSERT ON transactions
WHEN NEW.row_hashes IS NULL
BEGIN
    SELECT RAISE(ABORT, 'a log entry without row hashes: written by a feltdb older than this file''s schema');
END;

-- The audit chain (feltdb/storage/audit_chain.py): one link per sealed log entry, in
-- revision order. digest is the SHA-256 of the entry's content, link that of the previous
-- link, the revision and the digest; previous_revision names the entry sealed before it.
CREATE TABLE audit_chain (
    commit_revision   INTEGER PRIMARY KEY,
    previous_revision INTEGER NOT NULL,
    digest            TEXT    NOT NULL,
    link              TEXT    NOT NULL,
    CHECK (previous_revision < commit_revision)
);

PRAGMA application_id = 0x66656C74;  -- "felt"
PRAGMA user_version = 7;
