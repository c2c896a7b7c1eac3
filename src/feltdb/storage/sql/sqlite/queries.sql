-- Every statement the SQLite backend runs. feltdb.storage.sql.load_queries("sqlite") reads
-- this file once into {name: text}; runtime code picks statements by name and never builds
-- SQL. Each block: "-- name: <name>", "-- description: <one line>", then the statement.
-- Rows are always selected as (collection, key, version, revision, document).
--
-- A commit writes its rows first and its log entry last (see feltdb/storage/writes.py), so
-- a row's revision is the next one to be logged, (SELECT MAX(commit_revision) + 1): the
-- write lock of BEGIN IMMEDIATE keeps it the commit's own until the entry is logged.
-- :position (a commit's place within a batch) is PostgreSQL's; revisions here are dense.

-- name: begin_immediate
-- description: start a write transaction, taking the write lock now rather than at the first write
BEGIN IMMEDIATE;

-- name: commit
-- description: commit the current transaction
COMMIT;

-- name: rollback
-- description: abandon the current transaction
ROLLBACK;

-- name: savepoint
-- description: commit_many: mark where a plan of several guards starts, to undo it alone if it loses one
SAVEPOINT plan;

-- name: rollback_to_savepoint
-- description: commit_many: undo what the plan wrote since its savepoint (the savepoint stays, to be released)
ROLLBACK TO SAVEPOINT plan;

-- name: release_savepoint
-- description: commit_many: forget the plan's savepoint, keeping what it wrote (if anything) in the transaction
RELEASE SAVEPOINT plan;

-- name: joined_file
-- description: a caller's connection (storage/joined.py): the file of its main database, to check it is the store's
SELECT file FROM pragma_database_list WHERE name = 'main';

-- name: joined_position
-- description: a caller's transaction: the position its next commit takes (PostgreSQL's; revisions here are dense)
SELECT 0;

-- name: joined_savepoint
-- description: a caller's transaction: mark where feltdb's write starts, to undo it alone if it fails
SAVEPOINT feltdb_joined;

-- name: joined_rollback
-- description: a caller's transaction: undo feltdb's failed write (the savepoint stays, to be released)
ROLLBACK TO SAVEPOINT feltdb_joined;

-- name: joined_release
-- description: a caller's transaction: forget feltdb's savepoint, keeping what it wrote in the transaction
RELEASE SAVEPOINT feltdb_joined;

-- name: journal_mode
-- description: the file's journal mode (wal once any opener has switched it)
PRAGMA journal_mode;

-- name: journal_mode_wal
-- description: write-ahead log, so that readers never block the writer nor the writer readers
PRAGMA journal_mode = WAL;

-- name: synchronous_full
-- description: sync the log on every commit, so a commit that returned survives power loss
PRAGMA synchronous = FULL;

-- name: foreign_keys_on
-- description: enforce foreign keys
PRAGMA foreign_keys = ON;

-- name: auto_vacuum_incremental
-- description: a new file keeps a map of its pages, so that free ones can be returned to the file system a few at a time
PRAGMA auto_vacuum = INCREMENTAL;

-- name: space_reclaimable
-- description: whether the file returns free pages (auto_vacuum INCREMENTAL), how many are free, its pages and their size
SELECT
    (SELECT auto_vacuum FROM pragma_auto_vacuum()) = 2,
    (SELECT freelist_count FROM pragma_freelist_count()),
    (SELECT page_count FROM pragma_page_count()),
    (SELECT page_size FROM pragma_page_size());

-- name: reclaim_page
-- description: move the file's last used page into a free one and cut the file by a page (one step: one page)
PRAGMA incremental_vacuum(1);

-- name: store_header
-- description: application id, schema version and schema object count, read in one snapshot
SELECT
    (SELECT application_id FROM pragma_application_id()),
    (SELECT user_version FROM pragma_user_version()),
    (SELECT count(*) FROM sqlite_schema);

-- name: get_row
-- description: one row by key
SELECT collection, key, version, revision, document
FROM rows
WHERE collection = :collection AND key = :key;

-- name: get_row_held
-- description: one row by key, read inside a write transaction to be held until it ends (rows_pkey; BEGIN IMMEDIATE holds the one writer's lock already)
SELECT collection, key, version, revision, document
FROM rows
WHERE collection = :collection AND key = :key;

-- name: get_rows
-- description: the rows at the keys of a JSON array (one primary key seek each)
SELECT collection, key, version, revision, document
FROM rows
WHERE collection = :collection AND key IN (SELECT value FROM json_each(:keys));

-- name: row_version
-- description: the version of one row, to report a lost guard (no row: no result)
SELECT version
FROM rows
WHERE collection = :collection AND key = :key;

-- name: row_version_held
-- description: the version of a row a commit read and does not write (the write transaction holds every other writer off until it ends; no row: no result)
SELECT version
FROM rows
WHERE collection = :collection AND key = :key;

-- name: list_rows
-- description: rows of a collection, each filter optional (NULL: any); sorted, not index-ordered
SELECT collection, key, version, revision, document
FROM rows
WHERE collection = :collection
  AND (:tenant_id IS NULL OR tenant_id = :tenant_id)
  AND (:application_id IS NULL OR application_id = :application_id)
  AND (:state IS NULL OR state = :state)
ORDER BY priority DESC, created_at, key
LIMIT :limit;

-- name: list_rows_by_application
-- description: rows of one tenant's application, in index order (rows_by_application)
SELECT collection, key, version, revision, document
FROM rows
WHERE collection = :collection
  AND tenant_id = :tenant_id
  AND application_id = :application_id
ORDER BY priority DESC, created_at, key
LIMIT :limit;

-- name: list_rows_by_state
-- description: rows of one tenant's application in one state, in index order (rows_by_state)
SELECT collection, key, version, revision, document
FROM rows
WHERE collection = :collection
  AND tenant_id = :tenant_id
  AND application_id = :application_id
  AND state = :state
ORDER BY priority DESC, created_at, key
LIMIT :limit;

-- name: page_rows_by_state_same_priority
-- description: page_rows: the rest of the cursor's priority after (created_at, key) in one state (rows_by_state)
SELECT collection, key, version, revision, document
FROM rows
WHERE collection = :collection
  AND tenant_id = :tenant_id
  AND application_id = :application_id
  AND state = :state
  AND priority = :priority
  AND (created_at, key) > (:created_at, :key)
ORDER BY priority DESC, created_at, key
LIMIT :limit;

-- name: page_rows_by_state_lower_priority
-- description: page_rows: rows of one state below the cursor's priority, in index order (rows_by_state)
SELECT collection, key, version, revision, document
FROM rows
WHERE collection = :collection
  AND tenant_id = :tenant_id
  AND application_id = :application_id
  AND state = :state
  AND priority < :priority
ORDER BY priority DESC, created_at, key
LIMIT :limit;

-- name: page_rows_by_application_same_priority
-- description: page_rows: the rest of the cursor's priority after (created_at, key) (rows_by_application)
SELECT collection, key, version, revision, document
FROM rows
WHERE collection = :collection
  AND tenant_id = :tenant_id
  AND application_id = :application_id
  AND priority = :priority
  AND (created_at, key) > (:created_at, :key)
ORDER BY priority DESC, created_at, key
LIMIT :limit;

-- name: page_rows_by_application_lower_priority
-- description: page_rows: rows below the cursor's priority, in index order (rows_by_application)
SELECT collection, key, version, revision, document
FROM rows
WHERE collection = :collection
  AND tenant_id = :tenant_id
  AND application_id = :application_id
  AND priority < :priority
ORDER BY priority DESC, created_at, key
LIMIT :limit;

-- name: claimable_rows
-- description: commit_selected: rows in a state that are eligible at :now, in index order (rows_by_state), under the write lock of its transaction
SELECT collection, key, version, revision, document
FROM rows
WHERE collection = :collection
  AND tenant_id = :tenant_id
  AND application_id = :application_id
  AND state = :state
  AND waits_on IS NULL
  AND (eligible_at IS NULL OR eligible_at <= :now)
ORDER BY priority DESC, created_at, key
LIMIT :limit OFFSET :offset;

-- name: next_claim_definition
-- description: commit_selected with partitions: the first definition after :definition that has claimable rows in one tenant's application; one seek of rows_ready
SELECT definition_id
FROM rows
WHERE collection = :collection
  AND tenant_id = :tenant_id
  AND application_id = :application_id
  AND claim_group IS NOT NULL
  AND waits_on IS NULL
  AND definition_id > :definition
ORDER BY definition_id
LIMIT 1;

-- name: claim_groups_after
-- description: commit_selected with partitions: up to :limit claim groups after :claim_group of one definition's claimable rows (unordered: the walk's steps are), each with the key of its first row; one seek of rows_ready each, in one statement
WITH RECURSIVE walk (claim_group, n) AS (
    SELECT :claim_group, 0
    UNION ALL
    SELECT (
        SELECT later.claim_group
        FROM rows AS later
        WHERE later.collection = :collection
          AND later.tenant_id = :tenant_id
          AND later.application_id = :application_id
          AND later.definition_id = :definition
          AND later.claim_group > walk.claim_group
          AND later.waits_on IS NULL
        ORDER BY later.claim_group
        LIMIT 1
    ), walk.n + 1
    FROM walk
    WHERE walk.claim_group IS NOT NULL AND walk.n < :limit
)
SELECT :definition, walk.claim_group, (
    SELECT first.key
    FROM rows AS first
    WHERE first.collection = :collection
      AND first.tenant_id = :tenant_id
      AND first.application_id = :application_id
      AND first.definition_id = :definition
      AND first.claim_group = walk.claim_group
      AND first.waits_on IS NULL
    LIMIT 1
)
FROM walk
WHERE walk.n > 0 AND walk.claim_group IS NOT NULL;

-- name: claimable_rows_in_group
-- description: commit_selected with partitions: the rows of one (definition, claim group), whatever their state, eligible at :now, in index order (one range of rows_ready), with priority and created_at to merge several groups by
SELECT collection, key, version, revision, document, priority, created_at
FROM rows
WHERE collection = :collection
  AND tenant_id = :tenant_id
  AND application_id = :application_id
  AND definition_id = :definition
  AND claim_group = :claim_group
  AND waits_on IS NULL
  AND (eligible_at IS NULL OR eligible_at <= :now)
ORDER BY priority DESC, created_at, key
LIMIT :limit;

-- name: claimable_rows_in_group_same_priority
-- description: commit_selected with partitions, from a position on: the rows of one (definition, claim group) at the position's priority after its (created_at, key), eligible at :now (rows_ready)
SELECT collection, key, version, revision, document, priority, created_at
FROM rows
WHERE collection = :collection
  AND tenant_id = :tenant_id
  AND application_id = :application_id
  AND definition_id = :definition
  AND claim_group = :claim_group
  AND waits_on IS NULL
  AND priority = :priority
  AND (created_at, key) > (:created_at, :key)
  AND (eligible_at IS NULL OR eligible_at <= :now)
ORDER BY priority DESC, created_at, key
LIMIT :limit;

-- name: claimable_rows_in_group_lower_priority
-- description: commit_selected with partitions, from a position on: the rows of one (definition, claim group) below the position's priority, eligible at :now, in index order (rows_ready)
SELECT collection, key, version, revision, document, priority, created_at
FROM rows
WHERE collection = :collection
  AND tenant_id = :tenant_id
  AND application_id = :application_id
  AND definition_id = :definition
  AND claim_group = :claim_group
  AND waits_on IS NULL
  AND priority < :priority
  AND (eligible_at IS NULL OR eligible_at <= :now)
ORDER BY priority DESC, created_at, key
LIMIT :limit;

-- name: rows_due_lease_expires_at
-- description: rows whose lease expired at or before :now, earliest first (rows_by_lease_expiry)
SELECT collection, key, version, revision, document
FROM rows
WHERE collection = :collection
  AND lease_expires_at IS NOT NULL
  AND lease_expires_at <= :now
ORDER BY lease_expires_at, key
LIMIT :limit;

-- name: rows_due_deadline_at
-- description: rows whose deadline fell at or before :now, earliest first (rows_by_deadline)
SELECT collection, key, version, revision, document
FROM rows
WHERE collection = :collection
  AND deadline_at IS NOT NULL
  AND deadline_at <= :now
ORDER BY deadline_at, key
LIMIT :limit;

-- name: rows_with_result_ids
-- description: rows carrying any result id of a JSON array, with it (rows_by_result_id, one seek each)
-- No "result_id IS NOT NULL" (the IN implies it, so the partial index is used): with it,
-- SQLite reads the range result_id > NULL, every row with a result, for each call.
SELECT result_id, collection, key, version, revision, document
FROM rows
WHERE collection = :collection
  AND result_id IN (SELECT value FROM json_each(:result_ids));

-- name: count_by_state
-- description: how many rows of a collection are in each state, read from a covering index, rows_by_state, rows_by_definition or rows_by_environment (never the table)
SELECT state, count(*)
FROM rows
WHERE collection = :collection
  AND state IS NOT NULL
GROUP BY state
ORDER BY state;

-- name: oldest_by_definition
-- description: per definition, how many rows of a collection are in a state and the oldest created_at among them, from the index (never the table)
SELECT definition_id, count(*), MIN(created_at)
FROM rows
WHERE collection = :collection
  AND state = :state
  AND definition_id IS NOT NULL
GROUP BY definition_id
ORDER BY MIN(created_at), definition_id;

-- name: count_in_application
-- description: per state and definition, how many rows of one tenant's application there are and the oldest created_at among them, from the covering index rows_by_definition (never the table)
SELECT state, definition_id, count(*), MIN(created_at)
FROM rows
WHERE collection = :collection
  AND tenant_id = :tenant_id
  AND application_id = :application_id
  AND state IS NOT NULL
  AND definition_id IS NOT NULL
GROUP BY state, definition_id;

-- name: count_in_states_of_tenant
-- description: how many rows of one tenant (of one application, when :application_id is not null) are in one of the states of :states (a JSON array), counting at most :limit: the tenant's applications found one seek each (a recursive walk of rows_by_state), then one range of rows_by_state per application and state, from the index alone (never a document)
WITH RECURSIVE applications(application_id) AS (
    SELECT (
        SELECT min(application_id) FROM rows
        WHERE collection = :collection AND tenant_id = :tenant_id
    )
    UNION ALL
    SELECT (
        SELECT min(later.application_id) FROM rows AS later
        WHERE later.collection = :collection
          AND later.tenant_id = :tenant_id
          AND later.application_id > applications.application_id
    )
    FROM applications
    WHERE applications.application_id IS NOT NULL
)
SELECT count(*) FROM (
    SELECT 1
    FROM applications
    JOIN rows
      ON rows.collection = :collection
     AND rows.tenant_id = :tenant_id
     AND rows.application_id = applications.application_id
    WHERE (:application_id IS NULL OR applications.application_id = :application_id)
      AND rows.state IN (SELECT value FROM json_each(:states))
    LIMIT :limit
);

-- name: count_in_states_of_grant
-- description: count_in_states_of_tenant of the rows whose document's authorization_snapshot names the grant :grant_id (the documents of the tenant's rows in those states are read)
WITH RECURSIVE applications(application_id) AS (
    SELECT (
        SELECT min(application_id) FROM rows
        WHERE collection = :collection AND tenant_id = :tenant_id
    )
    UNION ALL
    SELECT (
        SELECT min(later.application_id) FROM rows AS later
        WHERE later.collection = :collection
          AND later.tenant_id = :tenant_id
          AND later.application_id > applications.application_id
    )
    FROM applications
    WHERE applications.application_id IS NOT NULL
)
SELECT count(*) FROM (
    SELECT 1
    FROM applications
    JOIN rows
      ON rows.collection = :collection
     AND rows.tenant_id = :tenant_id
     AND rows.application_id = applications.application_id
    WHERE (:application_id IS NULL OR applications.application_id = :application_id)
      AND rows.state IN (SELECT value FROM json_each(:states))
      AND json_extract(rows.document, '$.authorization_snapshot.grant.id') = :grant_id
    LIMIT :limit
);

-- name: current_revision
-- description: the revision of the latest commit, 0 before any
SELECT COALESCE(MAX(commit_revision), 0) FROM transactions;

-- name: insert_transaction
-- description: log a commit at the next revision; returns that revision
INSERT INTO transactions
    (commit_revision, base_revision, transaction_id, committed_at, operation_ids, keys, audit,
     row_hashes)
SELECT latest.revision + 1, latest.revision, :transaction_id, :committed_at,
       :operation_ids, :keys, :audit, :row_hashes
FROM (SELECT COALESCE(MAX(commit_revision), 0) AS revision FROM transactions) AS latest
RETURNING commit_revision;

-- name: insert_row_if_absent
-- description: write a new row at version 1 unless the key exists (no row changed: it exists)
INSERT INTO rows
    (collection, key, version, revision, document, /*index_columns*/)
VALUES
    (:collection, :key, 1, (SELECT COALESCE(MAX(commit_revision), 0) + 1 FROM transactions),
     :document, /*index_values*/)
ON CONFLICT (collection, key) DO NOTHING;

-- name: update_row_if_version
-- description: write a row at version + 1 if it is at exactly :expected_version (no row changed: it is not)
UPDATE rows SET
    version = version + 1,
    revision = (SELECT COALESCE(MAX(commit_revision), 0) + 1 FROM transactions),
    document = :document,
    /*index_set*/
WHERE collection = :collection AND key = :key
  AND version = :expected_version;

-- name: delete_row_if_version
-- description: delete a row if it is at exactly :expected_version (no row changed: it is not)
DELETE FROM rows
WHERE collection = :collection AND key = :key
  AND version = :expected_version;

-- name: upsert_row
-- description: write a row at version 1, or at its version + 1 if it exists; returns the version
INSERT INTO rows
    (collection, key, version, revision, document, /*index_columns*/)
VALUES
    (:collection, :key, 1, (SELECT COALESCE(MAX(commit_revision), 0) + 1 FROM transactions),
     :document, /*index_values*/)
ON CONFLICT (collection, key) DO UPDATE SET
    version = rows.version + 1,
    revision = excluded.revision,
    document = excluded.document,
    /*index_set:excluded*/
RETURNING version;

-- name: delete_row
-- description: delete one row (no row: no change)
DELETE FROM rows
WHERE collection = :collection AND key = :key;

-- name: transactions_after
-- description: logged commits after a revision, oldest first
SELECT commit_revision, base_revision, transaction_id, committed_at, operation_ids, keys, audit
FROM transactions
WHERE commit_revision > :revision
ORDER BY commit_revision
LIMIT :limit;

-- name: recent_operations
-- description: of the newest :scan log entries, those of one tenant's application committed at or after :since: when, and their audit record's operation, workload, state and attempt's worker (the primary key walked backwards; no document read)
SELECT committed_at, json_extract(audit, '$.operation'), json_extract(audit, '$.work_id'),
       json_extract(audit, '$.state'), json_extract(audit, '$.attempt_worker_id')
FROM (
    SELECT committed_at, audit FROM transactions ORDER BY commit_revision DESC LIMIT :scan
)
WHERE committed_at >= :since
  AND CASE WHEN json_valid(audit) THEN json_extract(audit, '$.tenant') END = :tenant_id
  AND CASE WHEN json_valid(audit) THEN json_extract(audit, '$.application') END = :application_id;

-- name: log_time_at_depth
-- description: when the log entry :depth entries below the newest was committed (no row: the log is shorter)
SELECT committed_at FROM transactions ORDER BY commit_revision DESC LIMIT 1 OFFSET :depth;

-- name: transactions_before
-- description: logged commits before a revision, newest first
SELECT commit_revision, base_revision, transaction_id, committed_at, operation_ids, keys, audit
FROM transactions
WHERE commit_revision < :revision
ORDER BY commit_revision DESC
LIMIT :limit;

-- name: update_index
-- description: replace one row's index columns only; version, revision and document stay
UPDATE rows SET
    /*index_set*/
WHERE collection = :collection AND key = :key;

-- name: set_aside
-- description: commit_selected_many: set one selected row aside until the row it waits on (of its application) is released; only at version, and only while that row is still at the version the choice read (a write since may have released already)
UPDATE rows SET waits_on = :waits_on, waits_for = :waits_for
WHERE collection = :collection AND key = :key AND version = :version
  AND EXISTS (
      SELECT 1
      FROM rows AS awaited
      WHERE awaited.collection = rows.collection
        AND awaited.key = :waits_on
        AND awaited.tenant_id = rows.tenant_id
        AND awaited.application_id = rows.application_id
        AND awaited.version = :waits_on_version
  );

-- name: release_waiting
-- description: commit: the rows of an application set aside waiting on one row, written in a state it rests in, are claimable again, whatever state they wait for: their wait is met, or will not be (rows_waiting)
UPDATE rows SET waits_on = NULL, waits_for = NULL
WHERE collection = :collection
  AND tenant_id = :tenant_id
  AND application_id = :application_id
  AND waits_on = :key;

-- The audit chain (feltdb/storage/audit_chain.py). Lists of revisions and of links are
-- passed as one JSON text, as on PostgreSQL.

-- name: chain_entries_after
-- description: the audit chain: logged commits after a revision, oldest first, with the row hashes they logged
SELECT commit_revision, base_revision, transaction_id, committed_at, operation_ids, keys, audit,
       row_hashes
FROM transactions
WHERE commit_revision > :revision
ORDER BY commit_revision
LIMIT :limit;

-- name: chain_entries_at
-- description: the audit chain: the logged commits at the revisions of a JSON array (one primary key seek each)
SELECT commit_revision, base_revision, transaction_id, committed_at, operation_ids, keys, audit,
       row_hashes
FROM transactions
WHERE commit_revision IN (SELECT value FROM json_each(:revisions));

-- name: chain_head
-- description: the audit chain: the last sealed link (none before the first seal)
SELECT commit_revision, previous_revision, digest, link
FROM audit_chain
ORDER BY commit_revision DESC
LIMIT 1;

-- name: chain_links_between
-- description: the audit chain: the sealed links after one revision up to another, in revision order, at most a number of them
SELECT commit_revision, previous_revision, digest, link
FROM audit_chain
WHERE commit_revision > :after AND commit_revision <= :through
ORDER BY commit_revision
LIMIT :limit;

-- name: delete_log_through
-- description: pruning the log (feltdb/work/log_pruning.py): delete the oldest logged commits up to a revision, at most a number of them (one range of the primary key); their links stay in audit_chain
DELETE FROM transactions
WHERE commit_revision <= COALESCE(
    (SELECT commit_revision FROM transactions
     WHERE commit_revision <= :through
     ORDER BY commit_revision
     LIMIT 1 OFFSET :limit - 1),
    :through
)
RETURNING commit_revision;

-- name: seal_chain
-- description: the audit chain: add the links of a JSON array of objects; a link already sealed (by another sealer) stays as it is
INSERT OR IGNORE INTO audit_chain (commit_revision, previous_revision, digest, link)
SELECT json_extract(value, '$.commit_revision'), json_extract(value, '$.previous_revision'),
       json_extract(value, '$.digest'), json_extract(value, '$.link')
FROM json_each(:links);

-- name: rows_after
-- description: the audit chain's check of the rows: every row after an address, in address order (rows' primary key), with its stored text
SELECT collection, key, version, revision, document
FROM rows
WHERE (collection, key) > (:collection, :key)
ORDER BY collection, key
LIMIT :limit;

-- name: statistics_missing
-- description: storage/statistics.py: none are ever missing (every statement is planned to use its index without statistics)
SELECT 0, 0;

-- name: gather_statistics
-- description: storage/statistics.py: never run on SQLite (statistics_missing answers none missing)
SELECT 0;

-- name: write_probe
-- description: readyz: an UPDATE that matches nothing, inside BEGIN IMMEDIATE (which took the write lock)
UPDATE transactions SET commit_revision = commit_revision WHERE 0;

-- The audit chain's checks of the index columns and of the log's writes against the rows
-- (feltdb/storage/chain_index.py, chain_writes.py).

-- name: rows_indexed_after
-- description: the audit chain's check of the rows: every row after an address, in address order (rows' primary key), with its stored text and its index columns
SELECT collection, key, version, revision, document, /*index_columns*/
FROM rows
WHERE (collection, key) > (:collection, :key)
ORDER BY collection, key
LIMIT :limit;

-- name: row_revisions_at
-- description: the audit chain's check of the log's writes: the revision of each row that exists at the [collection, key] pairs of a JSON array (one primary key seek each; an absent row is not returned)
SELECT rows.collection, rows.key, rows.revision
FROM json_each(:addresses) AS a
CROSS JOIN rows
WHERE rows.collection = json_extract(a.value, '$[0]')
  AND rows.key = json_extract(a.value, '$[1]');

-- name: chain_keys_after
-- description: the audit chain's check of the log's writes: the revision and written keys of every logged commit after a revision, oldest first
SELECT commit_revision, keys
FROM transactions
WHERE commit_revision > :revision
ORDER BY commit_revision
LIMIT :limit;


-- name: list_rows_of_definition
-- description: list: rows of one state and one definition of an application, in index order (rows_by_definition)
SELECT collection, key, version, revision, document
FROM rows
WHERE collection = :collection
  AND tenant_id = :tenant_id
  AND application_id = :application_id
  AND state = :state
  AND definition_id = :definition_id
ORDER BY priority DESC, created_at, key
LIMIT :limit;

-- name: page_rows_of_definition_same_priority
-- description: list: the rest of the cursor's priority after (created_at, key) in one state and definition (rows_by_definition)
SELECT collection, key, version, revision, document
FROM rows
WHERE collection = :collection
  AND tenant_id = :tenant_id
  AND application_id = :application_id
  AND state = :state
  AND definition_id = :definition_id
  AND priority = :priority
  AND (created_at, key) > (:created_at, :key)
ORDER BY priority DESC, created_at, key
LIMIT :limit;

-- name: page_rows_of_definition_lower_priority
-- description: list: rows of one state and definition below the cursor's priority, in index order (rows_by_definition)
SELECT collection, key, version, revision, document
FROM rows
WHERE collection = :collection
  AND tenant_id = :tenant_id
  AND application_id = :application_id
  AND state = :state
  AND definition_id = :definition_id
  AND priority < :priority
ORDER BY priority DESC, created_at, key
LIMIT :limit;

-- name: list_rows_of_environment
-- description: list: rows of one state and one environment of an application, in index order (rows_by_environment)
SELECT collection, key, version, revision, document
FROM rows
WHERE collection = :collection
  AND tenant_id = :tenant_id
  AND application_id = :application_id
  AND state = :state
  AND environment = :environment
ORDER BY priority DESC, created_at, key
LIMIT :limit;

-- name: page_rows_of_environment_same_priority
-- description: list: the rest of the cursor's priority after (created_at, key) in one state and environment (rows_by_environment)
SELECT collection, key, version, revision, document
FROM rows
WHERE collection = :collection
  AND tenant_id = :tenant_id
  AND application_id = :application_id
  AND state = :state
  AND environment = :environment
  AND priority = :priority
  AND (created_at, key) > (:created_at, :key)
ORDER BY priority DESC, created_at, key
LIMIT :limit;

-- name: page_rows_of_environment_lower_priority
-- description: list: rows of one state and environment below the cursor's priority, in index order (rows_by_environment)
SELECT collection, key, version, revision, document
FROM rows
WHERE collection = :collection
  AND tenant_id = :tenant_id
  AND application_id = :application_id
  AND state = :state
  AND environment = :environment
  AND priority < :priority
ORDER BY priority DESC, created_at, key
LIMIT :limit;

-- name: keys_created_before
-- description: retention: the oldest keys of one state created at or before an instant, after a (created_at, key) position, read from the index rows_by_state alone (a top-N sort of keys)
SELECT created_at, key
FROM rows INDEXED BY rows_by_state
WHERE collection = :collection
  AND state = :state
  AND created_at <= :created_before
  AND (created_at, key) > (:after_created_at, :after_key)
ORDER BY created_at, key
LIMIT :limit;
