-- Every statement the PostgreSQL backend runs. feltdb.storage.sql.load_queries("postgres")
-- reads this file once into {name: text}; runtime code picks statements by name and never
-- builds SQL. Each block: "-- name: <name>", "-- description: <one line>", then the
-- statement. Parameters are psycopg's %(name)s placeholders.
-- Rows are always selected as (collection, key, version, revision, document).
--
-- Integer parameters are cast to bigint explicitly: psycopg sends a Python int that does not
-- fit 64 bits as numeric, and the cast turns it into an error ("bigint out of range", which
-- the backend reports as WORKLOAD_INVALID) instead of a numeric comparison that would both
-- succeed silently and keep the planner off the indexes.
--
-- A commit's revision is its transaction's id, pg_current_xact_id(), times 1024, plus
-- %(position)s, its place among the transaction's committed plans (0 but in commit_many);
-- a reader sees only log entries below its snapshot's xmin times 1024: see
-- feltdb/storage/postgres.py. A commit writes its rows first, its log entry last (see
-- feltdb/storage/writes.py); each statement computes the revision itself.
--
-- The statements that select by state or claim group order by "..., key, eligible_at": key
-- is unique in a collection, so eligible_at never changes the order, but it makes
-- rows_by_state and rows_ready (which end with it) the only indexes that give that order
-- without a sort. Without it, rows_by_application (which gives "..., key") ties with them
-- whenever the statistics were taken while most rows were ready (a new backlog, analyzed
-- once), and the planner took it, filtering out every row already done: measured behind
-- 1,600 completions, 1.2 ms and 1,531 buffers a claim against 0.05 ms and 89 buffers.

-- name: migration_lock
-- description: serialize schema migrations between openers, until the transaction ends
SELECT pg_advisory_xact_lock(%(key)s::bigint);

-- name: migrations_table_exists
-- description: whether the migration record exists (NULL: not yet), without failing if not
SELECT to_regclass('feltdb_schema_migrations') IS NOT NULL;

-- name: create_migrations_table
-- description: the record of applied migrations, created by the first opener
CREATE TABLE IF NOT EXISTS feltdb_schema_migrations (
    version    integer     NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT feltdb_schema_migrations_pkey PRIMARY KEY (version)
);

-- name: schema_version
-- description: the latest applied migration, 0 before any
SELECT COALESCE(MAX(version), 0) FROM feltdb_schema_migrations;

-- name: record_migration
-- description: record one migration as applied
INSERT INTO feltdb_schema_migrations (version) VALUES (%(version)s);

-- name: savepoint
-- description: commit_many: mark where a plan of several guards starts, to undo it alone if it loses one
SAVEPOINT plan;

-- name: rollback_to_savepoint
-- description: commit_many: undo what the plan wrote since its savepoint (the savepoint stays, to be released)
ROLLBACK TO SAVEPOINT plan;

-- name: release_savepoint
-- description: commit_many: forget the plan's savepoint, keeping what it wrote (if anything) in the transaction
RELEASE SAVEPOINT plan;

-- name: joined_database
-- description: what a connection reaches (storage/joined.py): its database, its server's start, and the tables rows and transactions as its search_path resolves them; a caller's connection must reach the store's
SELECT current_database()::text, pg_postmaster_start_time()::text,
       to_regclass('rows')::oid::bigint, to_regclass('transactions')::oid::bigint;

-- name: joined_position
-- description: a caller's transaction: the position its next commit takes, after the commits it holds already (transactions_pkey, one range of at most 1024)
SELECT COALESCE(MAX(commit_revision) + 1 - pg_current_xact_id()::text::bigint * 1024, 0)
FROM transactions
WHERE commit_revision >= pg_current_xact_id()::text::bigint * 1024
  AND commit_revision < pg_current_xact_id()::text::bigint * 1024 + 1024;

-- name: joined_savepoint
-- description: a caller's transaction: mark where feltdb's write starts, to undo it alone if it fails
SAVEPOINT feltdb_joined;

-- name: joined_rollback
-- description: a caller's transaction: undo feltdb's failed write (the savepoint stays, to be released)
ROLLBACK TO SAVEPOINT feltdb_joined;

-- name: joined_release
-- description: a caller's transaction: forget feltdb's savepoint, keeping what it wrote in the transaction
RELEASE SAVEPOINT feltdb_joined;

-- name: get_row
-- description: one row by key (rows_pkey)
SELECT collection, key, version, revision, document
FROM rows
WHERE collection = %(collection)s AND key = %(key)s;

-- name: get_row_held
-- description: one row by key, locked until the transaction ends (rows_pkey): a writer holding it is waited for, and a writer coming after waits for this one
SELECT collection, key, version, revision, document
FROM rows
WHERE collection = %(collection)s AND key = %(key)s
FOR UPDATE;

-- name: get_rows
-- description: the rows at the keys of an array (rows_pkey)
SELECT collection, key, version, revision, document
FROM rows
WHERE collection = %(collection)s AND key = ANY(%(keys)s::text[]);

-- name: row_version
-- description: the committed version of one row, to report a lost guard (no row: no result)
SELECT version
FROM rows
WHERE collection = %(collection)s AND key = %(key)s;

-- name: row_version_held
-- description: the version of a row a commit read and does not write, locked against writers until the commit ends; a row being written is skipped, never waited for (no row, or a row being written: no result)
SELECT version
FROM rows
WHERE collection = %(collection)s AND key = %(key)s
FOR SHARE SKIP LOCKED;

-- name: list_rows
-- description: rows of a collection, each filter optional (NULL: any); sorted, not index-ordered
SELECT collection, key, version, revision, document
FROM rows
WHERE collection = %(collection)s
  AND (%(tenant_id)s::text IS NULL OR tenant_id = %(tenant_id)s::text)
  AND (%(application_id)s::text IS NULL OR application_id = %(application_id)s::text)
  AND (%(state)s::text IS NULL OR state = %(state)s::text)
ORDER BY priority DESC NULLS LAST, created_at NULLS FIRST, key
LIMIT %(limit)s::bigint;

-- name: list_rows_by_application
-- description: rows of one tenant's application, in index order (rows_by_application)
SELECT collection, key, version, revision, document
FROM rows
WHERE collection = %(collection)s
  AND tenant_id = %(tenant_id)s
  AND application_id = %(application_id)s
ORDER BY priority DESC NULLS LAST, created_at NULLS FIRST, key
LIMIT %(limit)s::bigint;

-- name: list_rows_by_state
-- description: rows of one tenant's application in one state, in index order (rows_by_state)
SELECT collection, key, version, revision, document
FROM rows
WHERE collection = %(collection)s
  AND tenant_id = %(tenant_id)s
  AND application_id = %(application_id)s
  AND state = %(state)s
ORDER BY priority DESC NULLS LAST, created_at NULLS FIRST, key, eligible_at
LIMIT %(limit)s::bigint;

-- name: page_rows_by_state_same_priority
-- description: page_rows: the rest of the cursor's priority after (created_at, key) in one state (rows_by_state)
SELECT collection, key, version, revision, document
FROM rows
WHERE collection = %(collection)s
  AND tenant_id = %(tenant_id)s
  AND application_id = %(application_id)s
  AND state = %(state)s
  AND priority = %(priority)s::bigint
  AND (created_at, key) > (%(created_at)s::bigint, %(key)s::text)
ORDER BY priority DESC NULLS LAST, created_at NULLS FIRST, key, eligible_at
LIMIT %(limit)s::bigint;

-- name: page_rows_by_state_lower_priority
-- description: page_rows: rows of one state below the cursor's priority, in index order (rows_by_state)
SELECT collection, key, version, revision, document
FROM rows
WHERE collection = %(collection)s
  AND tenant_id = %(tenant_id)s
  AND application_id = %(application_id)s
  AND state = %(state)s
  AND priority < %(priority)s::bigint
ORDER BY priority DESC NULLS LAST, created_at NULLS FIRST, key, eligible_at
LIMIT %(limit)s::bigint;

-- name: page_rows_by_application_same_priority
-- description: page_rows: the rest of the cursor's priority after (created_at, key) (rows_by_application)
SELECT collection, key, version, revision, document
FROM rows
WHERE collection = %(collection)s
  AND tenant_id = %(tenant_id)s
  AND application_id = %(application_id)s
  AND priority = %(priority)s::bigint
  AND (created_at, key) > (%(created_at)s::bigint, %(key)s::text)
ORDER BY priority DESC NULLS LAST, created_at NULLS FIRST, key
LIMIT %(limit)s::bigint;

-- name: page_rows_by_application_lower_priority
-- description: page_rows: rows below the cursor's priority, in index order (rows_by_application)
SELECT collection, key, version, revision, document
FROM rows
WHERE collection = %(collection)s
  AND tenant_id = %(tenant_id)s
  AND application_id = %(application_id)s
  AND priority < %(priority)s::bigint
ORDER BY priority DESC NULLS LAST, created_at NULLS FIRST, key
LIMIT %(limit)s::bigint;

-- name: claimable_rows
-- description: commit_selected: rows in a state that are eligible at now, in index order (rows_by_state), each locked until the transaction ends; rows another transaction holds are skipped
SELECT collection, key, version, revision, document
FROM rows
WHERE collection = %(collection)s
  AND tenant_id = %(tenant_id)s
  AND application_id = %(application_id)s
  AND state = %(state)s
  AND waits_on IS NULL
  AND (eligible_at IS NULL OR eligible_at <= %(now)s::bigint)
ORDER BY priority DESC NULLS LAST, created_at NULLS FIRST, key, eligible_at
LIMIT %(limit)s::bigint OFFSET %(offset)s::bigint
FOR UPDATE SKIP LOCKED;

-- name: next_claim_definition
-- description: commit_selected with partitions: the first definition after definition that has claimable rows in one tenant's application; one seek of rows_ready
SELECT definition_id
FROM rows
WHERE collection = %(collection)s
  AND tenant_id = %(tenant_id)s
  AND application_id = %(application_id)s
  AND claim_group IS NOT NULL
  AND waits_on IS NULL
  AND definition_id > %(definition)s
ORDER BY definition_id
LIMIT 1;

-- name: claim_groups_after
-- description: commit_selected with partitions: up to limit claim groups after claim_group of one definition's claimable rows (unordered: the walk's steps are), each with the key of its first row; one seek of rows_ready each, in one statement (one round trip)
WITH RECURSIVE walk (definition_id, claim_group, key, n) AS (
    (
        SELECT definition_id, claim_group, key, 1
        FROM rows
        WHERE collection = %(collection)s
          AND tenant_id = %(tenant_id)s
          AND application_id = %(application_id)s
          AND definition_id = %(definition)s
          AND claim_group > %(claim_group)s
          AND waits_on IS NULL
        ORDER BY claim_group
        LIMIT 1
    )
    UNION ALL
    SELECT later.definition_id, later.claim_group, later.key, walk.n + 1
    FROM walk
    CROSS JOIN LATERAL (
        SELECT definition_id, claim_group, key
        FROM rows
        WHERE collection = %(collection)s
          AND tenant_id = %(tenant_id)s
          AND application_id = %(application_id)s
          AND definition_id = %(definition)s
          AND claim_group > walk.claim_group
          AND waits_on IS NULL
        ORDER BY claim_group
        LIMIT 1
    ) AS later
    WHERE walk.n < %(limit)s
)
SELECT definition_id, claim_group, key
FROM walk;

-- name: claimable_rows_in_group
-- description: commit_selected with partitions: the rows of one (definition, claim group), whatever their state, eligible at now, in index order (one range of rows_ready), each locked until the transaction ends; rows another transaction holds are skipped
SELECT collection, key, version, revision, document, priority, created_at
FROM rows
WHERE collection = %(collection)s
  AND tenant_id = %(tenant_id)s
  AND application_id = %(application_id)s
  AND definition_id = %(definition)s
  AND claim_group = %(claim_group)s
  AND waits_on IS NULL
  AND (eligible_at IS NULL OR eligible_at <= %(now)s::bigint)
ORDER BY priority DESC NULLS LAST, created_at NULLS FIRST, key, eligible_at
LIMIT %(limit)s::bigint
FOR UPDATE SKIP LOCKED;

-- name: claimable_rows_in_group_same_priority
-- description: commit_selected with partitions, from a position on: the rows of one (definition, claim group) at the position's priority after its (created_at, key), eligible at now, each locked until the transaction ends; rows another transaction holds are skipped (rows_ready)
SELECT collection, key, version, revision, document, priority, created_at
FROM rows
WHERE collection = %(collection)s
  AND tenant_id = %(tenant_id)s
  AND application_id = %(application_id)s
  AND definition_id = %(definition)s
  AND claim_group = %(claim_group)s
  AND waits_on IS NULL
  AND priority = %(priority)s::bigint
  AND (created_at, key) > (%(created_at)s::bigint, %(key)s)
  AND (eligible_at IS NULL OR eligible_at <= %(now)s::bigint)
ORDER BY priority DESC NULLS LAST, created_at NULLS FIRST, key, eligible_at
LIMIT %(limit)s::bigint
FOR UPDATE SKIP LOCKED;

-- name: claimable_rows_in_group_lower_priority
-- description: commit_selected with partitions, from a position on: the rows of one (definition, claim group) below the position's priority, eligible at now, in index order, each locked until the transaction ends; rows another transaction holds are skipped (rows_ready)
SELECT collection, key, version, revision, document, priority, created_at
FROM rows
WHERE collection = %(collection)s
  AND tenant_id = %(tenant_id)s
  AND application_id = %(application_id)s
  AND definition_id = %(definition)s
  AND claim_group = %(claim_group)s
  AND waits_on IS NULL
  AND priority < %(priority)s::bigint
  AND (eligible_at IS NULL OR eligible_at <= %(now)s::bigint)
ORDER BY priority DESC NULLS LAST, created_at NULLS FIRST, key, eligible_at
LIMIT %(limit)s::bigint
FOR UPDATE SKIP LOCKED;

-- name: rows_due_lease_expires_at
-- description: rows whose lease expired at or before now, earliest first (rows_by_lease_expiry)
SELECT collection, key, version, revision, document
FROM rows
WHERE collection = %(collection)s
  AND lease_expires_at IS NOT NULL
  AND lease_expires_at <= %(now)s::bigint
ORDER BY lease_expires_at, key
LIMIT %(limit)s::bigint;

-- name: rows_due_deadline_at
-- description: rows whose deadline fell at or before now, earliest first (rows_by_deadline)
SELECT collection, key, version, revision, document
FROM rows
WHERE collection = %(collection)s
  AND deadline_at IS NOT NULL
  AND deadline_at <= %(now)s::bigint
ORDER BY deadline_at, key
LIMIT %(limit)s::bigint;

-- name: rows_with_result_ids
-- description: rows carrying any result id of an array, with it; one seek of rows_by_result_id per id (a LATERAL subquery kept apart by OFFSET 0, so never flattened into a join: with "result_id = ANY(...)", or joined, the planner, its statistics taken while few rows had a result id, read every entry of the index, a read that grew with every completion)
SELECT r.result_id, r.collection, r.key, r.version, r.revision, r.document
FROM unnest(%(result_ids)s::text[]) AS wanted(result_id)
CROSS JOIN LATERAL (
    SELECT rows.result_id, rows.collection, rows.key, rows.version, rows.revision,
           rows.document
    FROM rows
    WHERE rows.collection = %(collection)s
      AND rows.result_id IS NOT NULL
      AND rows.result_id = wanted.result_id
    OFFSET 0
) AS r;

-- name: count_by_state
-- description: how many rows of a collection are in each state, read from the covering index rows_by_state (an index-only scan when the planner prefers it to a sequential one)
SELECT state, count(*)
FROM rows
WHERE collection = %(collection)s
  AND state IS NOT NULL
GROUP BY state
ORDER BY state;

-- name: oldest_by_definition
-- description: per definition, how many rows of a collection are in a state and the oldest created_at among them
SELECT definition_id, count(*), MIN(created_at)
FROM rows
WHERE collection = %(collection)s
  AND state = %(state)s
  AND definition_id IS NOT NULL
GROUP BY definition_id
ORDER BY MIN(created_at), definition_id;

-- name: count_in_application
-- description: per state and definition, how many rows of one tenant's application there are and the oldest created_at among them (one index range of rows_by_definition)
SELECT state, definition_id, count(*), MIN(created_at)
FROM rows
WHERE collection = %(collection)s
  AND tenant_id = %(tenant_id)s
  AND application_id = %(application_id)s
  AND state IS NOT NULL
  AND definition_id IS NOT NULL
GROUP BY state, definition_id;

-- name: count_in_states_of_tenant
-- description: how many rows of one tenant (of one application, when :application_id is not null) are in one of the states of :states, counting at most :limit: the tenant's applications found one seek each (a recursive walk of rows_by_state), then one range of rows_by_state per application and state, from the index alone (never a document)
WITH RECURSIVE applications(application_id) AS (
    (
        SELECT application_id FROM rows
        WHERE collection = %(collection)s AND tenant_id = %(tenant_id)s
          AND application_id IS NOT NULL
        ORDER BY application_id
        LIMIT 1
    )
    UNION ALL
    SELECT (
        SELECT later.application_id FROM rows AS later
        WHERE later.collection = %(collection)s
          AND later.tenant_id = %(tenant_id)s
          AND later.application_id > applications.application_id
        ORDER BY later.application_id
        LIMIT 1
    )
    FROM applications
    WHERE applications.application_id IS NOT NULL
)
SELECT count(*) FROM (
    SELECT 1
    FROM applications
    -- One index range per application, read only as far as the bound (a plan made for any
    -- parameters must not join the whole table: the range is asked of each application).
    CROSS JOIN LATERAL (
        SELECT 1
        FROM rows
        WHERE rows.collection = %(collection)s
          AND rows.tenant_id = %(tenant_id)s
          AND rows.application_id = applications.application_id
          AND rows.state = ANY(%(states)s::text[])
        LIMIT %(limit)s::bigint
    ) AS hits
    WHERE applications.application_id IS NOT NULL
      AND (%(application_id)s::text IS NULL OR applications.application_id = %(application_id)s::text)
    LIMIT %(limit)s::bigint
) AS counted;

-- name: count_in_states_of_grant
-- description: count_in_states_of_tenant of the rows whose document's authorization_snapshot names the grant :grant_id (the documents of the tenant's rows in those states are read; a document holding an escaped NUL, which PostgreSQL cannot read as JSON text, is counted: a count may only be too high)
WITH RECURSIVE applications(application_id) AS (
    (
        SELECT application_id FROM rows
        WHERE collection = %(collection)s AND tenant_id = %(tenant_id)s
          AND application_id IS NOT NULL
        ORDER BY application_id
        LIMIT 1
    )
    UNION ALL
    SELECT (
        SELECT later.application_id FROM rows AS later
        WHERE later.collection = %(collection)s
          AND later.tenant_id = %(tenant_id)s
          AND later.application_id > applications.application_id
        ORDER BY later.application_id
        LIMIT 1
    )
    FROM applications
    WHERE applications.application_id IS NOT NULL
)
SELECT count(*) FROM (
    SELECT 1
    FROM applications
    CROSS JOIN LATERAL (
        SELECT 1
        FROM rows
        WHERE rows.collection = %(collection)s
          AND rows.tenant_id = %(tenant_id)s
          AND rows.application_id = applications.application_id
          AND rows.state = ANY(%(states)s::text[])
          AND CASE WHEN strpos(rows.document, E'\\u0000') = 0
                   THEN rows.document::json #>> '{authorization_snapshot,grant,id}' = %(grant_id)s
                   ELSE true END
        LIMIT %(limit)s::bigint
    ) AS hits
    WHERE applications.application_id IS NOT NULL
      AND (%(application_id)s::text IS NULL OR applications.application_id = %(application_id)s::text)
    LIMIT %(limit)s::bigint
) AS counted;

-- name: current_revision
-- description: the latest logged revision below the snapshot's xmin times 1024 (every older transaction has ended), 0 before any
SELECT COALESCE(MAX(commit_revision), 0)
FROM transactions
WHERE commit_revision < pg_snapshot_xmin(pg_current_snapshot())::text::bigint * 1024;

-- name: insert_transaction
-- description: log a commit at its transaction's id times 1024 plus its position, based on the revision readers see now (the first) or on the transaction's previous commit
INSERT INTO transactions
    (commit_revision, base_revision, transaction_id, committed_at, operation_ids, keys, audit,
     row_hashes)
SELECT pg_current_xact_id()::text::bigint * 1024 + %(position)s::bigint,
       CASE WHEN %(position)s::bigint = 0 THEN COALESCE(MAX(commit_revision), 0)
            ELSE pg_current_xact_id()::text::bigint * 1024 + %(position)s::bigint - 1 END,
       %(transaction_id)s, EXTRACT(EPOCH FROM clock_timestamp())::double precision,
       %(operation_ids)s::text[], %(keys)s::text[], %(audit)s::text, %(row_hashes)s::text[]
FROM transactions
WHERE commit_revision < pg_snapshot_xmin(pg_current_snapshot())::text::bigint * 1024
RETURNING commit_revision;

-- name: commit_without_sync
-- description: the wake-up hint's transaction commits without waiting for its commit record to reach the disk (a hint is worth no fsync)
SET LOCAL synchronous_commit TO off;

-- name: notify_wakeup
-- description: a wake-up hint to every process listening on the database (postgres_wakeups.py), delivered when the transaction commits
SELECT pg_notify('feltdb_wakeup', %(payload)s);

-- name: listen_wakeup
-- description: the wake-up listener's subscription to the hints of the database's other processes (postgres_wakeups.py)
LISTEN feltdb_wakeup;

-- name: configure_session
-- description: run once on each new pooled connection, whatever a role or database sets: an unquoted NULL in an array literal is NULL (array_writes.py sends NULLs so), and a float is sent exactly (the audit chain hashes the log's committed_at as read)
SELECT set_config('array_nulls', 'on', false), set_config('extra_float_digits', '3', false);

-- name: insert_row_if_absent
-- description: write a new row at version 1 unless the key exists (no row changed: it exists)
INSERT INTO rows
    (collection, key, version, revision, document, /*index_columns*/)
VALUES
    (%(collection)s, %(key)s, 1, pg_current_xact_id()::text::bigint * 1024 + %(position)s::bigint,
     %(document)s, /*index_values*/)
ON CONFLICT (collection, key) DO NOTHING;

-- name: update_row_if_version
-- description: write a row at version + 1 if it is at exactly expected_version (no row changed: it is not)
UPDATE rows SET
    version = version + 1,
    revision = pg_current_xact_id()::text::bigint * 1024 + %(position)s::bigint,
    document = %(document)s,
    /*index_set*/
WHERE collection = %(collection)s AND key = %(key)s
  AND version = %(expected_version)s::bigint;

-- name: delete_row_if_version
-- description: delete a row if it is at exactly expected_version (no row changed: it is not)
DELETE FROM rows
WHERE collection = %(collection)s AND key = %(key)s
  AND version = %(expected_version)s::bigint;

-- name: upsert_row
-- description: write a row at version 1, or at its version + 1 if it exists; returns the version
INSERT INTO rows
    (collection, key, version, revision, document, /*index_columns*/)
VALUES
    (%(collection)s, %(key)s, 1, pg_current_xact_id()::text::bigint * 1024 + %(position)s::bigint,
     %(document)s, /*index_values*/)
ON CONFLICT (collection, key) DO UPDATE SET
    version = rows.version + 1,
    revision = excluded.revision,
    document = excluded.document,
    /*index_set:excluded*/
RETURNING version;

-- name: delete_row
-- description: delete one row (no row: no change)
DELETE FROM rows
WHERE collection = %(collection)s AND key = %(key)s;

-- name: transactions_after
-- description: logged commits after a revision and below the snapshot's xmin, oldest first (one snapshot)
SELECT commit_revision, base_revision, transaction_id, committed_at, operation_ids, keys, audit
FROM transactions
WHERE commit_revision > %(revision)s::bigint
  AND commit_revision < pg_snapshot_xmin(pg_current_snapshot())::text::bigint * 1024
ORDER BY commit_revision
LIMIT %(limit)s::bigint;

-- name: recent_operations
-- description: of the newest :scan log entries below the snapshot's xmin, those of one tenant's application committed at or after :since: when, and their audit record's operation, workload, state and attempt's worker (a record holding an escaped NUL, which PostgreSQL cannot read as JSON text, is passed over, not an error)
SELECT committed_at, audit::json ->> 'operation', audit::json ->> 'work_id',
       audit::json ->> 'state', audit::json ->> 'attempt_worker_id'
FROM (
    SELECT committed_at, audit
    FROM transactions
    WHERE commit_revision < pg_snapshot_xmin(pg_current_snapshot())::text::bigint * 1024
    ORDER BY commit_revision DESC
    LIMIT %(scan)s::bigint
) AS recent
WHERE committed_at >= %(since)s::double precision
  AND CASE WHEN strpos(audit, E'\\u0000') = 0 THEN audit::json ->> 'tenant' END = %(tenant_id)s
  AND CASE WHEN strpos(audit, E'\\u0000') = 0 THEN audit::json ->> 'application' END
      = %(application_id)s;

-- name: log_time_at_depth
-- description: when the log entry :depth entries below the newest (below the snapshot's xmin) was committed (no row: the log is shorter)
SELECT committed_at
FROM transactions
WHERE commit_revision < pg_snapshot_xmin(pg_current_snapshot())::text::bigint * 1024
ORDER BY commit_revision DESC
LIMIT 1 OFFSET %(depth)s::bigint;

-- name: transactions_before
-- description: logged commits before a revision and below the snapshot's xmin, newest first (one snapshot)
SELECT commit_revision, base_revision, transaction_id, committed_at, operation_ids, keys, audit
FROM transactions
WHERE commit_revision < %(revision)s::bigint
  AND commit_revision < pg_snapshot_xmin(pg_current_snapshot())::text::bigint * 1024
ORDER BY commit_revision DESC
LIMIT %(limit)s::bigint;

-- name: update_index
-- description: replace one row's index columns only; version, revision and document stay
UPDATE rows SET
    /*index_set*/
WHERE collection = %(collection)s AND key = %(key)s;

-- name: set_aside
-- description: commit_selected_many: set one selected row aside until the row it waits on (of its application) is released; only at version, and only while that row is still at the version the choice read and no transaction is writing it (FOR SHARE SKIP LOCKED: a row being written counts as released, and holding it shared makes its writer's release_waiting, which runs after, see this row)
UPDATE rows SET waits_on = %(waits_on)s, waits_for = %(waits_for)s
WHERE collection = %(collection)s AND key = %(key)s AND version = %(version)s::bigint
  AND EXISTS (
      SELECT 1
      FROM rows AS awaited
      WHERE awaited.collection = rows.collection
        AND awaited.key = %(waits_on)s
        AND awaited.tenant_id = rows.tenant_id
        AND awaited.application_id = rows.application_id
        AND awaited.version = %(waits_on_version)s::bigint
      FOR SHARE SKIP LOCKED
  );

-- name: release_waiting
-- description: commit: the rows of an application set aside waiting on one row, written in a state it rests in, are claimable again, whatever state they wait for: their wait is met, or will not be (rows_waiting)
UPDATE rows SET waits_on = NULL, waits_for = NULL
WHERE collection = %(collection)s
  AND tenant_id = %(tenant_id)s
  AND application_id = %(application_id)s
  AND waits_on = %(key)s;

-- name: release_waiting_arrays
-- description: commit_many's array path: release_waiting for each (collection, tenant, application, key) of the arrays, in one statement
UPDATE rows SET waits_on = NULL, waits_for = NULL
FROM unnest(%(collections)s::text[], %(tenant_ids)s::text[], %(application_ids)s::text[],
            %(keys)s::text[])
     AS released(collection, tenant_id, application_id, key)
WHERE rows.collection = released.collection
  AND rows.tenant_id = released.tenant_id
  AND rows.application_id = released.application_id
  AND rows.waits_on = released.key;

-- name: lock_batch_rows
-- description: commit_many's array path: the version of every existing row of the batch, each locked until the transaction ends, in key order (a row deleted meanwhile is absent); one primary key seek per key (LATERAL: never a hash join over a scan, as a cached generic plan made while the table was small would be)
SELECT r.collection, r.key, r.version
FROM (SELECT *
      FROM unnest(%(collection)s::text[], %(key)s::text[]) AS u(collection, key)
      ORDER BY u.collection COLLATE "C", u.key COLLATE "C") AS u
CROSS JOIN LATERAL (
    SELECT rows.collection, rows.key, rows.version
    FROM rows
    WHERE rows.collection = u.collection AND rows.key = u.key
    FOR UPDATE
) AS r;

-- name: insert_batch_rows_if_absent
-- description: commit_many's array path: write new rows at version 1, each at its plan's position, unless the key exists (a key not returned exists); in key order, as the rows were locked, so that two batches never wait for each other's inserts in a cycle
INSERT INTO rows
    (collection, key, version, revision, document, /*index_columns*/)
SELECT u.collection, u.key, 1, pg_current_xact_id()::text::bigint * 1024 + u.position,
       u.document, /*index_columns:u*/
FROM unnest(%(collection)s::text[], %(key)s::text[], %(position)s::bigint[],
            %(document)s::text[], /*index_arrays*/)
    AS u(collection, key, position, document, /*index_columns*/)
ORDER BY u.collection COLLATE "C", u.key COLLATE "C"
ON CONFLICT (collection, key) DO NOTHING
RETURNING collection, key, version;

-- name: update_batch_rows_if_version
-- description: commit_many's array path: write rows at version + 1, each at its plan's position, if at exactly its expected_version (a key not returned is not); each row found by a primary key seek, then by its ctid (LATERAL, as lock_batch_rows)
UPDATE rows SET
    version = rows.version + 1,
    revision = pg_current_xact_id()::text::bigint * 1024 + u.position,
    document = u.document,
    /*index_set:u*/
FROM unnest(%(collection)s::text[], %(key)s::text[], %(expected_version)s::bigint[],
            %(position)s::bigint[], %(document)s::text[], /*index_arrays*/)
    AS u(collection, key, expected_version, position, document, /*index_columns*/)
CROSS JOIN LATERAL (
    SELECT found.ctid AS row_id
    FROM rows AS found
    WHERE found.collection = u.collection AND found.key = u.key
    OFFSET 0
) AS r
WHERE rows.ctid = r.row_id
  AND rows.version = u.expected_version
RETURNING rows.collection, rows.key, rows.version;

-- name: insert_batch_transactions
-- description: commit_many's array path: log each committed plan at the transaction's id times 1024 plus its position, as insert_transaction logs one (the first based on the revision readers see now)
INSERT INTO transactions
    (commit_revision, base_revision, transaction_id, committed_at, operation_ids, keys, audit,
     row_hashes)
SELECT pg_current_xact_id()::text::bigint * 1024 + u.position,
       CASE WHEN u.position = 0 THEN seen.revision
            ELSE pg_current_xact_id()::text::bigint * 1024 + u.position - 1 END,
       u.transaction_id, EXTRACT(EPOCH FROM clock_timestamp())::double precision,
       ARRAY[u.operation_id], ARRAY[u.written_key], u.audit, ARRAY[u.row_hash]
FROM unnest(%(position)s::bigint[], %(transaction_id)s::text[], %(operation_id)s::text[],
            %(written_key)s::text[], %(audit)s::text[], %(row_hash)s::text[])
    AS u(position, transaction_id, operation_id, written_key, audit, row_hash),
    (SELECT COALESCE(MAX(commit_revision), 0) AS revision
     FROM transactions
     WHERE commit_revision < pg_snapshot_xmin(pg_current_snapshot())::text::bigint * 1024
    ) AS seen
RETURNING transaction_id, commit_revision;

-- name: renumber_batch_rows
-- description: commit_many's array path: move rows the transaction has just written to their plans' final positions, after a plan decided to win before them lost its guard
UPDATE rows SET
    revision = pg_current_xact_id()::text::bigint * 1024 + u.position
FROM unnest(%(collection)s::text[], %(key)s::text[], %(position)s::bigint[])
    AS u(collection, key, position)
CROSS JOIN LATERAL (
    SELECT found.ctid AS row_id
    FROM rows AS found
    WHERE found.collection = u.collection AND found.key = u.key
    OFFSET 0
) AS r
WHERE rows.ctid = r.row_id;

-- The audit chain (feltdb/storage/audit_chain.py). Lists of revisions and of links are
-- passed as one JSON text, as on SQLite. The chain is sealed in revision order, and only
-- below the snapshot's xmin times 1024, where no open transaction can still log an entry.

-- name: chain_entries_after
-- description: the audit chain: logged commits after a revision and below the snapshot's xmin, oldest first, with the row hashes they logged
SELECT commit_revision, base_revision, transaction_id, committed_at, operation_ids, keys, audit,
       row_hashes
FROM transactions
WHERE commit_revision > %(revision)s::bigint
  AND commit_revision < pg_snapshot_xmin(pg_current_snapshot())::text::bigint * 1024
ORDER BY commit_revision
LIMIT %(limit)s::bigint;

-- name: chain_entries_at
-- description: the audit chain: the logged commits at the revisions of a JSON array (one primary key seek each: LATERAL, never a hash join over a scan)
SELECT t.commit_revision, t.base_revision, t.transaction_id, t.committed_at, t.operation_ids,
       t.keys, t.audit, t.row_hashes
FROM (SELECT DISTINCT value::bigint AS revision
      FROM jsonb_array_elements_text(%(revisions)s::jsonb) AS r(value)) AS r
CROSS JOIN LATERAL (
    SELECT * FROM transactions WHERE transactions.commit_revision = r.revision OFFSET 0
) AS t;

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
WHERE commit_revision > %(after)s::bigint AND commit_revision <= %(through)s::bigint
ORDER BY commit_revision
LIMIT %(limit)s::bigint;

-- name: delete_log_through
-- description: pruning the log (feltdb/work/log_pruning.py): delete the oldest logged commits up to a revision, at most a number of them (one range of the primary key); their links stay in audit_chain
DELETE FROM transactions
WHERE commit_revision <= COALESCE(
    (SELECT commit_revision FROM transactions
     WHERE commit_revision <= %(through)s::bigint
     ORDER BY commit_revision
     LIMIT 1 OFFSET %(limit)s::bigint - 1),
    %(through)s::bigint
)
RETURNING commit_revision;

-- name: seal_chain
-- description: the audit chain: add the links of a JSON array of objects; a link already sealed (by a concurrent sealer, which computes the same one) stays as it is
INSERT INTO audit_chain (commit_revision, previous_revision, digest, link)
SELECT l.commit_revision, l.previous_revision, l.digest, l.link
FROM json_to_recordset(%(links)s::json)
    AS l(commit_revision bigint, previous_revision bigint, digest text, link text)
ON CONFLICT (commit_revision) DO NOTHING;

-- name: rows_after
-- description: the audit chain's check of the rows: every row after an address, in address order (rows_pkey), with its stored text
SELECT collection, key, version, revision, document
FROM rows
WHERE (collection, key) > (%(collection)s, %(key)s)
ORDER BY collection, key
LIMIT %(limit)s::bigint;

-- name: statistics_missing
-- description: storage/statistics.py: whether the planner never had statistics of rows (reltuples is -1 until the first ANALYZE or VACUUM, PostgreSQL 14 and later), and whether a row exists to gather them from
SELECT c.reltuples < 0, EXISTS (SELECT 1 FROM rows)
FROM pg_class AS c
WHERE c.oid = 'rows'::regclass;

-- name: gather_statistics
-- description: storage/statistics.py: the planner's statistics of rows, once (autovacuum keeps them after)
ANALYZE rows;

-- name: write_probe
-- description: readyz: an UPDATE that matches nothing: refused by a read-only database or a standby, before any row is read
UPDATE transactions SET commit_revision = commit_revision WHERE false;

-- The audit chain's checks of the index columns and of the log's writes against the rows
-- (feltdb/storage/chain_index.py, chain_writes.py).

-- name: rows_indexed_after
-- description: the audit chain's check of the rows: every row after an address, in address order (rows_pkey), with its stored text and its index columns
SELECT collection, key, version, revision, document, /*index_columns*/
FROM rows
WHERE (collection, key) > (%(collection)s, %(key)s)
ORDER BY collection, key
LIMIT %(limit)s::bigint;

-- name: row_revisions_at
-- description: the audit chain's check of the log's writes: the revision of each row that exists at the [collection, key] pairs of a JSON array (one primary key seek each: LATERAL, never a hash join over a scan; an absent row is not returned)
SELECT r.collection, r.key, r.revision
FROM jsonb_array_elements(%(addresses)s::jsonb) AS a(address)
CROSS JOIN LATERAL (
    SELECT rows.collection, rows.key, rows.revision
    FROM rows
    WHERE rows.collection = a.address ->> 0 AND rows.key = a.address ->> 1
    OFFSET 0
) AS r;

-- name: chain_keys_after
-- description: the audit chain's check of the log's writes: the revision and written keys of every logged commit after a revision, oldest first, final or not (not bounded by the snapshot's xmin: a row deleted by a commit above it is not missing)
SELECT commit_revision, keys
FROM transactions
WHERE commit_revision > %(revision)s::bigint
ORDER BY commit_revision
LIMIT %(limit)s::bigint;


-- name: list_rows_of_definition
-- description: list: rows of one state and one definition of an application, in index order (rows_by_definition)
SELECT collection, key, version, revision, document
FROM rows
WHERE collection = %(collection)s
  AND tenant_id = %(tenant_id)s
  AND application_id = %(application_id)s
  AND state = %(state)s
  AND definition_id = %(definition_id)s
ORDER BY priority DESC NULLS LAST, created_at NULLS FIRST, key, eligible_at
LIMIT %(limit)s::bigint;

-- name: page_rows_of_definition_same_priority
-- description: list: the rest of the cursor's priority after (created_at, key) in one state and definition (rows_by_definition)
SELECT collection, key, version, revision, document
FROM rows
WHERE collection = %(collection)s
  AND tenant_id = %(tenant_id)s
  AND application_id = %(application_id)s
  AND state = %(state)s
  AND definition_id = %(definition_id)s
  AND priority = %(priority)s::bigint
  AND (created_at, key) > (%(created_at)s::bigint, %(key)s::text)
ORDER BY priority DESC NULLS LAST, created_at NULLS FIRST, key, eligible_at
LIMIT %(limit)s::bigint;

-- name: page_rows_of_definition_lower_priority
-- description: list: rows of one state and definition below the cursor's priority, in index order (rows_by_definition)
SELECT collection, key, version, revision, document
FROM rows
WHERE collection = %(collection)s
  AND tenant_id = %(tenant_id)s
  AND application_id = %(application_id)s
  AND state = %(state)s
  AND definition_id = %(definition_id)s
  AND priority < %(priority)s::bigint
ORDER BY priority DESC NULLS LAST, created_at NULLS FIRST, key, eligible_at
LIMIT %(limit)s::bigint;

-- name: list_rows_of_environment
-- description: list: rows of one state and one environment of an application, in index order (rows_by_environment)
SELECT collection, key, version, revision, document
FROM rows
WHERE collection = %(collection)s
  AND tenant_id = %(tenant_id)s
  AND application_id = %(application_id)s
  AND state = %(state)s
  AND environment = %(environment)s
ORDER BY priority DESC NULLS LAST, created_at NULLS FIRST, key
LIMIT %(limit)s::bigint;

-- name: page_rows_of_environment_same_priority
-- description: list: the rest of the cursor's priority after (created_at, key) in one state and environment (rows_by_environment)
SELECT collection, key, version, revision, document
FROM rows
WHERE collection = %(collection)s
  AND tenant_id = %(tenant_id)s
  AND application_id = %(application_id)s
  AND state = %(state)s
  AND environment = %(environment)s
  AND priority = %(priority)s::bigint
  AND (created_at, key) > (%(created_at)s::bigint, %(key)s::text)
ORDER BY priority DESC NULLS LAST, created_at NULLS FIRST, key
LIMIT %(limit)s::bigint;

-- name: page_rows_of_environment_lower_priority
-- description: list: rows of one state and environment below the cursor's priority, in index order (rows_by_environment)
SELECT collection, key, version, revision, document
FROM rows
WHERE collection = %(collection)s
  AND tenant_id = %(tenant_id)s
  AND application_id = %(application_id)s
  AND state = %(state)s
  AND environment = %(environment)s
  AND priority < %(priority)s::bigint
ORDER BY priority DESC NULLS LAST, created_at NULLS FIRST, key
LIMIT %(limit)s::bigint;

-- name: keys_created_before
-- description: retention: the oldest keys of one state created at or before an instant, after a (created_at, key) position, read from the index rows_by_state (a top-N sort of keys)
SELECT created_at, key
FROM rows
WHERE collection = %(collection)s
  AND state = %(state)s
  AND created_at <= %(created_before)s::bigint
  AND (created_at, key) > (%(after_created_at)s::bigint, %(after_key)s::text)
ORDER BY created_at, key
LIMIT %(limit)s::bigint;
