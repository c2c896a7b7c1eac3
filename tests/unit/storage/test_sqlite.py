"""What only the SQLite backend does: its file, PRAGMAs, dense revisions, locking and SQL.

The storage contract both backends keep (versions, guards, atomic commits, the log, the
index queries, commit_selected, the races) is checked on each of them by
``tests/integration/storage/test_database_contract.py``.
"""

from __future__ import annotations

import json
import re
import sqlite3
import threading
from collections.abc import Iterator
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
from support.rows import put

from feltdb.errors import ErrorCode, WorkloadError
from feltdb.storage import (
    Mutation,
    PlannedCommit,
    Precondition,
    RowIndex,
    StorageConflict,
)
from feltdb.storage.partitions import ClaimPartitions
from feltdb.storage.sql import load_queries, load_schema, parse_queries
from feltdb.storage.sqlite import (
    APPLICATION_ID,
    SCHEMA_VERSION,
    WRITE_ATTEMPTS,
    SQLiteDatabase,
)
from feltdb.storage.targets import open_database, sqlite_path

QUERIES = load_queries("sqlite")
STORAGE_FAILURE = ErrorCode.WORKLOAD_STORAGE_FAILURE.value
INVALID = ErrorCode.WORKLOAD_INVALID.value


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "store.db"


@pytest.fixture
def db(path: Path) -> Iterator[SQLiteDatabase]:
    database = SQLiteDatabase(path)
    try:
        yield database
    finally:
        database.close()


def raw(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(path, isolation_level=None)


def raw_scalar(path: Path, sql: str) -> Any:
    connection = raw(path)
    try:
        return connection.execute(sql).fetchall()[0][0]
    finally:
        connection.close()


# --- opening and the schema ------------------------------------------------------------


def test_new_store_is_stamped_with_the_feltdb_application_id_and_schema(
    db: SQLiteDatabase, path: Path
) -> None:
    assert raw_scalar(path, "PRAGMA application_id") == APPLICATION_ID == 0x66656C74
    assert raw_scalar(path, "PRAGMA user_version") == SCHEMA_VERSION == 7
    assert raw_scalar(path, "PRAGMA journal_mode") == "wal"
    assert db.current_revision() == 0
    assert db.target == str(path)


def test_each_connection_is_configured(db: SQLiteDatabase) -> None:
    connection = db._dialect.connection()
    assert connection.execute("PRAGMA busy_timeout").fetchall() == [(10000,)]
    assert connection.execute("PRAGMA synchronous").fetchall() == [(2,)]  # FULL
    assert connection.execute("PRAGMA foreign_keys").fetchall() == [(1,)]
    assert connection.isolation_level is None


def test_an_empty_file_gets_the_schema(path: Path) -> None:
    path.write_bytes(b"")
    database = SQLiteDatabase(path)
    try:
        put(database, "a")
        assert database.get_row("work", "a") is not None
    finally:
        database.close()
    assert raw_scalar(path, "PRAGMA application_id") == APPLICATION_ID


def test_two_openers_of_a_new_file_create_the_schema_once(tmp_path: Path) -> None:
    for round_ in range(20):
        target = tmp_path / f"new-{round_}.db"
        barrier = threading.Barrier(2)
        opened: list[SQLiteDatabase] = []
        errors: list[BaseException] = []

        def open_store(
            target: Path = target,
            barrier: threading.Barrier = barrier,
            opened: list[SQLiteDatabase] = opened,
            errors: list[BaseException] = errors,
        ) -> None:
            barrier.wait(timeout=30)
            try:
                opened.append(SQLiteDatabase(target))
            except BaseException as error:
                errors.append(error)

        threads = [threading.Thread(target=open_store) for _ in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
        try:
            assert errors == []
            assert len(opened) == 2
            assert raw_scalar(target, "SELECT count(*) FROM sqlite_schema WHERE name = 'rows'") == 1
        finally:
            for database in opened:
                database.close()


def test_refuses_a_store_of_a_newer_schema(path: Path) -> None:
    SQLiteDatabase(path).close()
    connection = raw(path)
    connection.execute("PRAGMA user_version = 8")
    connection.close()
    with pytest.raises(WorkloadError) as raised:
        SQLiteDatabase(path)
    assert raised.value.code == STORAGE_FAILURE
    assert "newer feltdb (schema 8)" in raised.value.message
    assert "reads schema 7" in raised.value.message
    assert str(path) in raised.value.message


SCHEMA_1 = Path(__file__).with_name("sqlite_schema_1.sql").read_text(encoding="utf-8")
"""The schema the first release created: the file an older feltdb wrote is built from it."""

WORK = "system_durable_work"


def make_schema_1_store(path: Path) -> None:
    """A store as schema 1 left it: two workloads, a row of another collection, a log entry."""
    connection = raw(path)
    try:
        connection.executescript(SCHEMA_1)
        rows = [
            (WORK, "w1", {"definition_id": "send", "state": "READY"}, "READY", 5, 10),
            (
                WORK,
                "w2",
                {"definition_id": "bill", "environment": "prod", "state": "READY"},
                "READY",
                9,
                20,
            ),
            ("other", "o1", {"definition_id": "not-a-workload"}, None, None, None),
        ]
        for collection, key, document, state, priority, created_at in rows:
            connection.execute(
                "INSERT INTO rows (collection, key, version, revision, document, tenant_id, "
                "application_id, state, priority, created_at) VALUES (?, ?, 1, 1, ?, 't', "
                "'app', ?, ?, ?)",
                (collection, key, json.dumps(document), state, priority, created_at),
            )
        connection.execute(
            "INSERT INTO transactions VALUES (1, 0, 'tx_1', 1.0, '[\"op\"]', '[]', NULL)"
        )
    finally:
        connection.close()
    assert raw_scalar(path, "PRAGMA user_version") == 1


def schema_of(path: Path) -> dict[str, Any]:
    """The columns of every table, every index's columns, and every trigger's text, as
    SQLite reports them."""
    connection = raw(path)
    try:
        indexes = connection.execute(
            "SELECT name FROM sqlite_schema WHERE type = 'index' ORDER BY name"
        ).fetchall()
        return {
            "columns": {
                table: connection.execute(f"PRAGMA table_info({table})").fetchall()
                for table in ("rows", "transactions", "audit_chain")
            },
            "indexes": {
                name: connection.execute(f"PRAGMA index_xinfo({name})").fetchall()
                for (name,) in indexes
            },
            "triggers": connection.execute(
                "SELECT name, tbl_name, sql FROM sqlite_schema WHERE type = 'trigger' ORDER BY name"
            ).fetchall(),
        }
    finally:
        connection.close()


def test_a_schema_1_store_is_upgraded_in_place_when_opened(tmp_path: Path, path: Path) -> None:
    make_schema_1_store(path)
    database = SQLiteDatabase(path)
    try:
        assert raw_scalar(path, "PRAGMA user_version") == SCHEMA_VERSION == 7
        assert raw_scalar(path, "PRAGMA application_id") == APPLICATION_ID
        fresh = tmp_path / "fresh.db"
        SQLiteDatabase(fresh).close()
        assert schema_of(path) == schema_of(fresh)  # as if created at schema 7
        backfilled = raw(path).execute(
            "SELECT collection, key, definition_id, environment FROM rows ORDER BY collection, key"
        )
        assert backfilled.fetchall() == [
            ("other", "o1", None, None),  # not a workload: its document is not read
            (WORK, "w1", "send", None),
            (WORK, "w2", "bill", "prod"),
        ]
        # The rows, their versions and the log are as they were.
        assert database.current_revision() == 1
        assert database.get_row(WORK, "w1").document == {  # type: ignore[union-attr]
            "definition_id": "send",
            "state": "READY",
            "__version": 1,
        }
        seen: list[list[str]] = []

        def look(rows: Any, read: Any) -> None:
            seen.append([row.key for row in rows])

        # The ready work is in one claim group that says only that it predates groups,
        # and a selection by partitions reads it.
        for served in (["send"], ["bill", "send"]):
            database.commit_selected(
                WORK, "t", "app", "READY", 0, look, limit=5,
                partitions=ClaimPartitions(lambda *_: True, served),
            )  # fmt: skip
        assert seen == [["w1"], ["w2", "w1"]]
        groups = raw(path).execute("SELECT key, claim_group FROM rows ORDER BY key")
        assert groups.fetchall() == [("o1", None), ("w1", "unsorted"), ("w2", "unsorted")]
        offered: list[tuple[str, str]] = []

        def accepts(definition: str, group: str, sample: Any) -> bool:
            offered.append((definition, group))
            return definition == "send"

        seen.clear()
        database.commit_selected(
            WORK, "t", "app", "READY", 0, look, limit=5,
            partitions=ClaimPartitions(accepts),
        )  # fmt: skip
        assert offered == [("bill", "unsorted"), ("send", "unsorted")]
        assert seen == [["w1"]]
    finally:
        database.close()
    SQLiteDatabase(path).close()  # reopening an upgraded store changes nothing
    assert raw_scalar(path, "PRAGMA user_version") == SCHEMA_VERSION


def test_a_failed_upgrade_leaves_the_schema_1_store_as_it_was(path: Path) -> None:
    make_schema_1_store(path)
    connection = raw(path)
    # An object in the way of the upgrade's CREATE INDEX, so that its last steps fail.
    connection.execute("CREATE INDEX rows_by_definition ON rows (key)")
    connection.close()
    with pytest.raises(WorkloadError) as raised:
        SQLiteDatabase(path)
    assert raised.value.code == STORAGE_FAILURE
    assert "rows_by_definition" in raised.value.message
    assert raw_scalar(path, "PRAGMA user_version") == 1
    columns = raw(path).execute("PRAGMA table_info(rows)").fetchall()
    assert "definition_id" not in [column[1] for column in columns]


def test_refuses_a_sqlite_file_of_another_application_and_leaves_it_alone(path: Path) -> None:
    connection = raw(path)
    connection.execute("CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT)")
    connection.close()
    with pytest.raises(WorkloadError) as raised:
        SQLiteDatabase(path)
    assert raised.value.code == STORAGE_FAILURE
    assert "is not a feltdb store" in raised.value.message
    assert str(path) in raised.value.message
    # Not converted to WAL nor given feltdb tables on the way to the refusal.
    assert raw_scalar(path, "PRAGMA journal_mode") == "delete"
    assert raw_scalar(path, "SELECT count(*) FROM sqlite_schema") == 1


def test_refuses_an_empty_sqlite_file_with_a_foreign_application_id(path: Path) -> None:
    connection = raw(path)
    connection.execute("PRAGMA application_id = 1234")
    connection.close()
    with pytest.raises(WorkloadError) as raised:
        SQLiteDatabase(path)
    assert raised.value.code == STORAGE_FAILURE
    assert "is not a feltdb store" in raised.value.message
    assert "0x4d2" in raised.value.message


def test_refuses_a_file_that_is_not_sqlite(path: Path) -> None:
    original = "name,priority\nreport,5\n" * 100
    path.write_text(original)
    with pytest.raises(WorkloadError) as raised:
        SQLiteDatabase(path)
    assert raised.value.code == STORAGE_FAILURE
    assert "is not a SQLite database" in raised.value.message
    assert str(path) in raised.value.message
    assert isinstance(raised.value.__cause__, sqlite3.DatabaseError)
    assert path.read_text() == original


def test_refuses_a_path_whose_directory_is_missing(tmp_path: Path) -> None:
    target = tmp_path / "missing" / "store.db"
    with pytest.raises(WorkloadError) as raised:
        SQLiteDatabase(target)
    assert raised.value.code == STORAGE_FAILURE
    assert str(target) in raised.value.message
    assert "does not exist" in raised.value.message


def test_refuses_a_directory(tmp_path: Path) -> None:
    with pytest.raises(WorkloadError) as raised:
        SQLiteDatabase(tmp_path)
    assert raised.value.code == STORAGE_FAILURE
    assert str(tmp_path) in raised.value.message
    assert isinstance(raised.value.__cause__, sqlite3.Error)


@pytest.mark.parametrize("target", [":memory:", "", "file:store.db?mode=memory"])
def test_refuses_in_memory_and_uri_targets(target: str) -> None:
    with pytest.raises(WorkloadError) as raised:
        SQLiteDatabase(target)
    assert raised.value.code == INVALID


# --- versions, revisions and the log ---------------------------------------------------


def test_the_stored_document_is_canonical_json_without_the_version(
    db: SQLiteDatabase, path: Path
) -> None:
    db.commit("op", [Mutation("work", "w1", {"b": [1, "é"], "a": 1, "__version": 99})])
    stored = raw_scalar(path, "SELECT document FROM rows WHERE key = 'w1'")
    assert stored == '{"a":1,"b":[1,"é"]}'
    row = db.get_row("work", "w1")
    assert row is not None
    assert row.version == 1
    assert row.document["__version"] == 1


def test_revisions_grow_by_one_per_commit(db: SQLiteDatabase) -> None:
    assert db.current_revision() == 0
    for expected in range(1, 6):
        commit = db.commit(f"op{expected}", [Mutation("work", f"w{expected % 2}", {})])
        assert commit.revision == expected
        assert commit.rows[0].revision == expected
        assert db.current_revision() == expected
    log = db.committed_transactions_after(0)
    assert [(entry.base_revision, entry.commit_revision) for entry in log] == [
        (n - 1, n) for n in range(1, 6)
    ]


def test_revisions_stay_dense_when_writers_race(path: Path) -> None:
    """One writer at a time: the log is 1, 2, 3, ... with no gap, whoever commits."""
    databases = [SQLiteDatabase(path) for _ in range(3)]
    start = threading.Barrier(len(databases))
    failures: list[BaseException] = []

    def write(me: int, database: SQLiteDatabase) -> None:
        try:
            start.wait(timeout=30)
            for n in range(20):
                database.commit(f"{me}-{n}", [Mutation("work", f"{me}-{n}", {})])
        except BaseException as error:
            failures.append(error)

    threads = [threading.Thread(target=write, args=pair) for pair in enumerate(databases)]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=120)
        assert failures == []
        log = databases[0].committed_transactions_after(0)
        assert [(t.base_revision, t.commit_revision) for t in log] == [
            (n - 1, n) for n in range(1, 61)
        ]
        assert databases[0].current_revision() == 60
    finally:
        for database in databases:
            database.close()


# --- index queries ---------------------------------------------------------------------


def _plan(path: Path, query_name: str) -> list[str]:
    query = QUERIES[query_name]
    params = dict.fromkeys(re.findall(r":(\w+)", query), 1)
    connection = raw(path)
    try:
        return [row[3] for row in connection.execute("EXPLAIN QUERY PLAN " + query, params)]
    finally:
        connection.close()


@pytest.mark.parametrize(
    ("query_name", "index"),
    [
        ("claimable_rows", "rows_by_state"),
        ("claim_groups_after", "rows_ready"),
        ("next_claim_definition", "rows_ready"),
        ("claimable_rows_in_group", "rows_ready"),
        ("claimable_rows_in_group_same_priority", "rows_ready"),
        ("claimable_rows_in_group_lower_priority", "rows_ready"),
        ("list_rows_by_state", "rows_by_state"),
        ("list_rows_by_application", "rows_by_application"),
        ("page_rows_by_state_same_priority", "rows_by_state"),
        ("page_rows_by_state_lower_priority", "rows_by_state"),
        ("page_rows_by_application_same_priority", "rows_by_application"),
        ("page_rows_by_application_lower_priority", "rows_by_application"),
        ("list_rows_of_definition", "rows_by_definition"),
        ("page_rows_of_definition_same_priority", "rows_by_definition"),
        ("page_rows_of_definition_lower_priority", "rows_by_definition"),
        ("list_rows_of_environment", "rows_by_environment"),
        ("page_rows_of_environment_same_priority", "rows_by_environment"),
        ("page_rows_of_environment_lower_priority", "rows_by_environment"),
        ("rows_due_lease_expires_at", "rows_by_lease_expiry"),
        ("rows_due_deadline_at", "rows_by_deadline"),
        ("get_row", "sqlite_autoindex_rows_1"),
        ("get_rows", "sqlite_autoindex_rows_1"),
        ("rows_with_result_ids", "rows_by_result_id"),
        ("row_version", "sqlite_autoindex_rows_1"),
        ("update_row_if_version", "sqlite_autoindex_rows_1"),
        ("delete_row_if_version", "sqlite_autoindex_rows_1"),
        ("delete_row", "sqlite_autoindex_rows_1"),
        ("update_index", "sqlite_autoindex_rows_1"),
        ("set_aside", "sqlite_autoindex_rows_1"),
        ("release_waiting", "rows_waiting"),
    ],
)
def test_index_queries_never_scan_nor_sort(
    db: SQLiteDatabase, path: Path, query_name: str, index: str
) -> None:
    for n in range(50):
        put(db, f"w{n}", RowIndex("t1", "app1", "ready", n % 5, n, n, n, n, f"r{n}"))
    plan = _plan(path, query_name)
    assert any(re.search(rf"USING (COVERING )?INDEX {index}\b", detail) for detail in plan), plan
    # Many keys come as a JSON array: json_each's values are read, each one seek. A walk
    # of claim groups reads its own steps (a recursive CTE), each step one seek of rows.
    scans = [detail for detail in plan if detail.startswith("SCAN")]
    walked = ("SCAN CONSTANT ROW", "SCAN walk")
    assert all("json_each" in detail or detail in walked for detail in scans), plan
    assert not any("TEMP B-TREE" in detail for detail in plan), plan


def test_result_ids_are_each_one_seek_not_a_range_of_every_result(
    db: SQLiteDatabase, path: Path
) -> None:
    # A completion looks its result id up: a range over every row with a result (as
    # "result_id IS NOT NULL" made it) grows with every workload ever completed.
    for n in range(300):
        put(db, f"w{n}", RowIndex("t1", "app1", "succeeded", 0, n, result_id=f"r{n}"))
    plan = _plan(path, "rows_with_result_ids")
    assert plan[0] == (
        "SEARCH rows USING INDEX rows_by_result_id (collection=? AND result_id=?)"
    ), plan
    found = db.rows_with_result_ids("work", ["r7", "r9", "absent"])
    assert sorted(found) == ["r7", "r9"]


def test_one_claim_group_s_candidates_are_one_range_of_rows_ready(
    db: SQLiteDatabase, path: Path
) -> None:
    # Many definitions and groups, most rows in one of them, and statistics to plan with:
    # the candidate query still seeks rows_ready on every equality column, definition and
    # group included, and reads the range in ORDER BY order (no sort).
    for n in range(300):
        index = RowIndex(
            "t1", "app1", "ready", n % 5, n, None,
            definition_id=f"d{min(n % 40, 3)}", claim_group=f"g{min(n % 7, 2)}",
        )  # fmt: skip
        put(db, f"w{n}", index)
    connection = raw(path)
    connection.execute("ANALYZE")
    connection.close()
    plan = _plan(path, "claimable_rows_in_group")
    assert len(plan) == 1, plan
    assert re.fullmatch(
        r"SEARCH rows USING INDEX rows_ready \(collection=\? AND tenant_id=\? AND "
        r"application_id=\? AND definition_id=\? AND claim_group=\?\)",
        plan[0],
    ), plan


def test_the_log_queries_use_the_revision_key(db: SQLiteDatabase, path: Path) -> None:
    put(db, "a")
    assert _plan(path, "transactions_after") == [
        "SEARCH transactions USING INTEGER PRIMARY KEY (rowid>?)"
    ]
    # MAX() of the rowid is answered by one seek to the end of the b-tree.
    assert _plan(path, "current_revision") == ["SEARCH transactions"]


# --- locking and retries ---------------------------------------------------------------


def _count_begins(database: SQLiteDatabase, on_begin: Any = None) -> list[str]:
    begins: list[str] = []

    def trace(statement: str) -> None:
        if statement.startswith("BEGIN IMMEDIATE"):
            begins.append(statement)
            if on_begin is not None:
                on_begin(len(begins))

    database._dialect.connection().set_trace_callback(trace)
    return begins


def test_a_store_locked_through_every_attempt_fails_as_storage_failure(path: Path) -> None:
    database = SQLiteDatabase(path, busy_timeout_ms=5)
    blocker = raw(path)
    try:
        begins = _count_begins(database)
        blocker.execute("BEGIN IMMEDIATE")
        with pytest.raises(WorkloadError) as raised:
            database.commit("op", [Mutation("work", "a", {})])
        assert raised.value.code == STORAGE_FAILURE
        assert "locked" in raised.value.message
        assert str(path) in raised.value.message
        assert isinstance(raised.value.__cause__, sqlite3.OperationalError)
        assert len(begins) == WRITE_ATTEMPTS
        blocker.execute("ROLLBACK")
        assert database.get_row("work", "a") is None
        assert database.current_revision() == 0
    finally:
        blocker.close()
        database.close()


def test_a_write_is_retried_when_the_lock_is_released_between_attempts(path: Path) -> None:
    database = SQLiteDatabase(path, busy_timeout_ms=5)
    blocker = raw(path)
    try:

        def release_on_second_attempt(attempt: int) -> None:
            if attempt == 2:
                blocker.execute("ROLLBACK")

        begins = _count_begins(database, release_on_second_attempt)
        blocker.execute("BEGIN IMMEDIATE")
        commit = database.commit("op", [Mutation("work", "a", {})])
        assert len(begins) == 2
        assert commit.revision == 1
        assert database.get_row("work", "a") is not None
    finally:
        blocker.close()
        database.close()


def _trace(database: SQLiteDatabase) -> list[str]:
    """The statements ``database`` runs from now on, each as SQLite expands it. A statement
    that fires a trigger (the log's fence, on INSERT INTO transactions) is reported again
    when the trigger's program starts, with the same text: that report is left out (no two
    statements run in a row have one text, their parameters differ).
    """
    statements: list[str] = []

    def traced(statement: str) -> None:
        if not statements or statements[-1] != statement:
            statements.append(statement)

    database._dialect.connection().set_trace_callback(traced)
    return statements


def test_a_guarded_write_is_one_statement(db: SQLiteDatabase) -> None:
    # No SELECT of the version first: the UPDATE … WHERE version = ? is the guard.
    put(db, "a")
    statements = _trace(db)
    db.commit(
        "op", [Mutation("work", "a", {"n": 2})], [Precondition("work", "a", expected_version=1)]
    )
    db.commit("op", [Mutation("work", "b", {})], [Precondition("work", "b", require_absent=True)])
    db.commit("op", [Mutation("work", "a", None)], [Precondition("work", "a", expected_version=2)])
    writes = [s.split()[0] for s in statements if not s.startswith(("BEGIN", "COMMIT"))]
    # Each commit: the guarded write, then its log entry (INSERT INTO transactions).
    assert writes == ["UPDATE", "INSERT", "INSERT", "INSERT", "DELETE", "INSERT"]
    assert [s.split()[2] for s in statements if s.startswith("INSERT")] == [
        "transactions",
        "rows",
        "transactions",
        "transactions",
    ]
    assert not any(s.startswith("SELECT") for s in statements), statements


def test_a_lost_guard_reads_the_version_that_beat_it(db: SQLiteDatabase) -> None:
    put(db, "a")
    put(db, "a")
    statements = _trace(db)
    with pytest.raises(StorageConflict) as raised:
        db.commit(
            "op", [Mutation("work", "a", {})], [Precondition("work", "a", expected_version=1)]
        )
    assert raised.value.details["found_version"] == 2
    # The guard is the commit's first write: nothing was logged before it was lost.
    assert [s.split()[0].rstrip(";") for s in statements] == [
        "BEGIN",
        "UPDATE",
        "SELECT",
        "ROLLBACK",
    ]


def test_a_batch_is_one_transaction_with_a_savepoint_only_around_plans_of_two_guards(
    db: SQLiteDatabase,
) -> None:
    put(db, "a")
    put(db, "b")
    statements = _trace(db)
    single = PlannedCommit(
        "single", [Mutation("work", "a", {})], [Precondition("work", "a", expected_version=9)]
    )
    pair = PlannedCommit(
        "pair",
        [Mutation("work", "a", {}), Mutation("work", "b", {})],
        [
            Precondition("work", "a", expected_version=1),
            Precondition("work", "b", expected_version=9),
        ],
    )
    free = PlannedCommit("free", [Mutation("work", "c", {})])
    answers = db.commit_many([single, pair, free, free])
    assert [type(answer).__name__ for answer in answers] == [
        "StorageConflict",
        "StorageConflict",
        "Commit",
        "Commit",
    ]
    assert [s.split()[0].rstrip(";") for s in statements] == [
        "BEGIN",
        "UPDATE",  # single: its guard, lost
        "SELECT",
        "SAVEPOINT",  # pair: its first guard holds, its second is lost
        "UPDATE",
        "UPDATE",
        "SELECT",
        "ROLLBACK",  # ROLLBACK TO SAVEPOINT
        "RELEASE",
        "INSERT",  # free: the row, then the log entry
        "INSERT",
        "INSERT",
        "INSERT",
        "COMMIT",
    ]
    # Dense revisions: the two committed plans are the next two.
    assert [answer.revision for answer in answers[2:]] == [3, 4]  # type: ignore[union-attr]
    log = db.committed_transactions_after(2)
    assert [(t.base_revision, t.commit_revision) for t in log] == [(2, 3), (3, 4)]


def test_a_conflict_is_not_retried(db: SQLiteDatabase) -> None:
    put(db, "a")
    begins = _count_begins(db)
    with pytest.raises(StorageConflict):
        db.commit(
            "op", [Mutation("work", "a", {})], [Precondition("work", "a", require_absent=True)]
        )
    assert len(begins) == 1


# --- connections and closing -----------------------------------------------------------


def test_each_thread_has_its_own_connection_released_when_the_thread_ends(
    db: SQLiteDatabase,
) -> None:
    put(db, "a")
    seen: list[sqlite3.Connection] = []

    def read() -> None:
        assert db.get_row("work", "a") is not None
        seen.append(db._dialect.connection())

    for _ in range(20):
        thread = threading.Thread(target=read)
        thread.start()
        thread.join()
    assert db._dialect.connection() not in seen
    assert len(db._dialect.connections) == 1
    with pytest.raises(sqlite3.ProgrammingError):
        seen[0].execute("SELECT 1")


def test_close_closes_every_thread_s_connection(path: Path) -> None:
    database = SQLiteDatabase(path)
    ready, done = threading.Event(), threading.Event()
    connections: list[sqlite3.Connection] = []

    def hold() -> None:
        connections.append(database._dialect.connection())
        ready.set()
        done.wait(timeout=30)

    thread = threading.Thread(target=hold)
    thread.start()
    try:
        assert ready.wait(timeout=30)
        connections.append(database._dialect.connection())
        database.close()
        for connection in connections:
            with pytest.raises(sqlite3.ProgrammingError):
                connection.execute("SELECT 1")
    finally:
        done.set()
        thread.join()
        database.close()


# --- open_database ---------------------------------------------------------------------


def _opened_path(target: Any) -> str:
    database = open_database(target)
    try:
        assert isinstance(database, SQLiteDatabase)
        return database.target
    finally:
        database.close()


def test_open_database_takes_paths_and_sqlite_urls(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert _opened_path(tmp_path / "a.db") == str(tmp_path / "a.db")
    assert _opened_path(str(tmp_path / "b.db")) == str(tmp_path / "b.db")
    assert _opened_path("relative.db") == "relative.db"
    assert _opened_path("sqlite:///via-url.db") == "via-url.db"
    assert (tmp_path / "via-url.db").exists()
    assert _opened_path(f"sqlite:///{tmp_path}/abs.db") == f"{tmp_path}/abs.db"
    assert (tmp_path / "abs.db").exists()
    assert _opened_path(f"SQLITE:///{tmp_path}/upper.db") == f"{tmp_path}/upper.db"


def test_sqlite_path_names_the_file_of_a_target_and_none_for_postgresql(tmp_path: Path) -> None:
    assert sqlite_path(tmp_path / "a.db") == tmp_path / "a.db"
    assert sqlite_path("relative.db") == Path("relative.db")
    assert sqlite_path("sqlite:///via-url.db") == Path("via-url.db")
    assert sqlite_path(f"sqlite:///{tmp_path}/abs.db") == tmp_path / "abs.db"
    assert sqlite_path("postgresql://u@h/db") is None
    assert sqlite_path("postgresql+psycopg://u@h/db") is None
    with pytest.raises(WorkloadError):
        sqlite_path("mysql://h/db")


@pytest.mark.parametrize(
    ("target", "named"),
    [
        ("mysql://h/db", "'mysql'"),
        ("redis://h", "'redis'"),
        ("sqlite://host/db", "sqlite:///"),
        ("sqlite://", "sqlite:///"),
        ("sqlite:///store.db?mode=ro", "options"),
    ],
)
def test_open_database_refuses_other_targets(target: str, named: str) -> None:
    with pytest.raises(WorkloadError) as raised:
        open_database(target)
    assert raised.value.code == INVALID
    assert named in raised.value.message


# --- the SQL files ---------------------------------------------------------------------


def test_every_query_is_named_described_and_prepares(db: SQLiteDatabase, path: Path) -> None:
    text = resources.files("feltdb.storage.sql").joinpath("sqlite", "queries.sql").read_text()
    described = re.findall(r"^-- name: (\w+)\n-- description: \S", text, re.M)
    assert sorted(described) == sorted(QUERIES)
    connection = raw(path)
    try:
        for query in QUERIES.values():
            if not query.startswith(("BEGIN", "COMMIT", "ROLLBACK", "PRAGMA")):
                connection.execute("EXPLAIN " + query, dict.fromkeys(re.findall(r":(\w+)", query)))
    finally:
        connection.close()


def test_the_schema_sets_the_stamps_the_code_checks() -> None:
    schema = load_schema("sqlite")
    assert f"PRAGMA application_id = {APPLICATION_ID:#X}".replace("0X", "0x") in schema
    assert f"PRAGMA user_version = {SCHEMA_VERSION};" in schema


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("-- name: a\nSELECT 1;", "no '-- description:'"),
        ("-- name: a\n-- description: d\n", "no statement"),
        (
            "-- name: a\n-- description: d\nSELECT 1;\n-- name: a\n-- description: d\nSELECT 2;",
            "twice",
        ),
    ],
)
def test_malformed_query_files_are_refused(text: str, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        parse_queries(text)


def test_parse_queries_keeps_statements_whole() -> None:
    parsed = parse_queries(
        "-- preamble\n-- name: one\n-- description: first\nSELECT 1\nFROM t;\n\n"
        "-- name: two\n-- description: second\nSELECT 2;\n"
    )
    assert parsed == {"one": "SELECT 1\nFROM t;", "two": "SELECT 2;"}


@pytest.mark.parametrize("dialect", ["nosuch", "../sqlite", ""])
def test_unknown_dialects_are_refused(dialect: str) -> None:
    with pytest.raises(ValueError):
        load_queries(dialect)


def test_stored_json_round_trips_through_the_log(db: SQLiteDatabase, path: Path) -> None:
    db.commit("op", [Mutation("work", "a", {})], audit={"b": 1, "a": "é"})
    stored = raw_scalar(path, "SELECT audit FROM transactions")
    assert stored == '{"a":"é","b":1}'
    assert json.loads(raw_scalar(path, "SELECT operation_ids FROM transactions")) == ["op"]


def test_sqlite_gathers_no_planner_statistics(db: SQLiteDatabase, path: Path) -> None:
    # Its statements are planned to use their index without statistics (the plan tests
    # above): the maintenance pass's refresh runs nothing, and no sqlite_stat1 appears.
    put(db, "a")
    assert db.refresh_statistics() is False
    assert db.refresh_statistics() is False
    connection = raw(path)
    try:
        tables = {row[0] for row in connection.execute("SELECT name FROM sqlite_master")}
    finally:
        connection.close()
    assert "sqlite_stat1" not in tables


def test_a_new_store_and_its_log_files_are_readable_by_their_owner_alone(tmp_path):
    import stat

    from support.factories import make_request

    from feltdb import WorkloadStore

    path = tmp_path / "private.db"
    with WorkloadStore.open(path) as store:
        store.create(make_request())
        made = {p.name: stat.S_IMODE(p.stat().st_mode) for p in tmp_path.iterdir()}
    assert made == {"private.db": 0o600, "private.db-wal": 0o600, "private.db-shm": 0o600}
    # A store that exists keeps the permissions its owner gave it.
    path.chmod(0o640)
    WorkloadStore.open(path).close()
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
