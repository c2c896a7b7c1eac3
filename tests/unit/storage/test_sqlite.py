"""The SQLite backend against the storage contract of feltdb.storage.base."""

from __future__ import annotations

import json
import multiprocessing
import re
import sqlite3
import threading
from collections.abc import Iterator
from importlib import resources
from pathlib import Path
from typing import Any

import pytest

from feltdb.errors import ErrorCode, WorkloadError
from feltdb.storage import (
    Database,
    Mutation,
    PlannedCommit,
    Precondition,
    RowIndex,
    StorageConflict,
    StoredRow,
    open_database,
)
from feltdb.storage.base import RowReader
from feltdb.storage.sql import load_queries, load_schema, parse_queries
from feltdb.storage.sqlite import (
    APPLICATION_ID,
    SCHEMA_VERSION,
    WRITE_ATTEMPTS,
    SQLiteDatabase,
)

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


def work_index(
    state: str = "ready",
    priority: int = 0,
    created_at: int = 0,
    eligible_at: int | None = None,
    *,
    tenant_id: str = "t1",
    application_id: str = "app1",
) -> RowIndex:
    return RowIndex(
        tenant_id=tenant_id,
        application_id=application_id,
        state=state,
        priority=priority,
        created_at=created_at,
        eligible_at=eligible_at,
    )


def put(db: Database, key: str, index: RowIndex | None = None, **document: Any) -> None:
    db.commit(f"put:{key}", [Mutation("work", key, document or {"k": key}, index or RowIndex())])


def keys(rows: list[Any]) -> list[str]:
    return [row.key for row in rows]


def log_count(path: Path) -> int:
    count: int = raw_scalar(path, "SELECT count(*) FROM transactions")
    return count


# --- opening and the schema ------------------------------------------------------------


def test_new_store_is_stamped_with_the_feltdb_application_id_and_schema(
    db: SQLiteDatabase, path: Path
) -> None:
    assert raw_scalar(path, "PRAGMA application_id") == APPLICATION_ID == 0x66656C74
    assert raw_scalar(path, "PRAGMA user_version") == SCHEMA_VERSION == 1
    assert raw_scalar(path, "PRAGMA journal_mode") == "wal"
    assert db.current_revision() == 0
    assert db.target == str(path)


def test_each_connection_is_configured(db: SQLiteDatabase) -> None:
    connection = db._connection()
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
    connection.execute("PRAGMA user_version = 2")
    connection.close()
    with pytest.raises(WorkloadError) as raised:
        SQLiteDatabase(path)
    assert raised.value.code == STORAGE_FAILURE
    assert "newer feltdb (schema 2)" in raised.value.message
    assert "reads schema 1" in raised.value.message
    assert str(path) in raised.value.message


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


def test_reopening_sees_everything(path: Path) -> None:
    first = SQLiteDatabase(path)
    try:
        first.commit("a", [Mutation("work", "w1", {"n": 1}, work_index())], audit={"work_id": "w1"})
        first.commit("b", [Mutation("work", "w1", {"n": 2}, work_index())])
        first.commit("c", [Mutation("work", "w2", {"n": 3}, work_index(priority=9))])
    finally:
        first.close()
    second = SQLiteDatabase(path)
    try:
        row = second.get_row("work", "w1")
        assert row is not None
        assert (row.version, row.revision, row.document) == (2, 2, {"n": 2, "__version": 2})
        assert second.current_revision() == 3
        assert keys(second.claimable_rows("work", "t1", "app1", "ready", 0, limit=10)) == [
            "w2",
            "w1",
        ]
        log = second.committed_transactions_after(0)
        assert [entry.operation_ids for entry in log] == [["a"], ["b"], ["c"]]
        assert log[0].work_id == "w1"
    finally:
        second.close()


# --- versions, revisions and the log ---------------------------------------------------


def test_versions_start_at_one_and_grow_by_one(db: SQLiteDatabase) -> None:
    for expected in range(1, 5):
        commit = db.commit(f"op{expected}", [Mutation("work", "w1", {"n": expected})])
        assert commit.rows[0].version == expected
        assert commit.rows[0].document == {"n": expected, "__version": expected}
        row = db.get_row("work", "w1")
        assert row is not None
        assert row.version == expected
        assert row.document == {"n": expected, "__version": expected}


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


def test_rows_carry_the_revision_of_their_last_write(db: SQLiteDatabase) -> None:
    db.commit("1", [Mutation("work", "a", {}), Mutation("work", "b", {})])
    db.commit("2", [Mutation("work", "b", {})])
    a, b = db.get_row("work", "a"), db.get_row("work", "b")
    assert a is not None and b is not None
    assert (a.revision, b.revision) == (1, 2)


def test_a_commit_is_logged_with_its_keys_operation_and_audit(db: SQLiteDatabase) -> None:
    audit = {"kind": "claim", "work_id": "w1", "agent_id": "ag", "session_id": None, "x": [1]}
    commit = db.commit(
        "op-claim",
        [Mutation("work", "w1", {}), Mutation("claims", "c1", {}), Mutation("work", "gone", None)],
        audit=audit,
    )
    [entry] = db.committed_transactions_after(0)
    assert entry.transaction_id == commit.transaction_id
    assert re.fullmatch(r"tx_[A-Za-z0-9]{24}", entry.transaction_id)
    assert entry.operation_ids == ["op-claim"]
    assert entry.keys == ["work/w1", "claims/c1", "work/gone"]
    assert entry.audit == audit
    assert (entry.work_id, entry.agent_id, entry.session_id, entry.delegator_id) == (
        "w1",
        "ag",
        None,
        None,
    )
    assert entry.committed_at > 1_600_000_000


def test_transaction_ids_are_fresh_and_never_the_operation_id(db: SQLiteDatabase) -> None:
    ids = {db.commit("same-op", [Mutation("work", "w", {})]).transaction_id for _ in range(50)}
    assert len(ids) == 50
    assert "same-op" not in ids


def test_committed_transactions_after_returns_the_slice(db: SQLiteDatabase) -> None:
    for n in range(1, 8):
        db.commit(f"op{n}", [Mutation("work", "w", {})], audit={"work_id": f"w{n}"})
    assert [t.commit_revision for t in db.committed_transactions_after(3)] == [4, 5, 6, 7]
    assert [t.commit_revision for t in db.committed_transactions_after(3, limit=2)] == [4, 5]
    assert [t.work_id for t in db.committed_transactions_after(5)] == ["w6", "w7"]
    assert db.committed_transactions_after(7) == []
    assert db.committed_transactions_after(0, limit=0) == []


def test_a_commit_without_audit_logs_no_provenance(db: SQLiteDatabase) -> None:
    db.commit("op", [Mutation("work", "w", {})])
    [entry] = db.committed_transactions_after(0)
    assert entry.audit is None
    assert entry.work_id is None


def test_a_non_string_provenance_field_is_refused_before_writing(
    db: SQLiteDatabase, path: Path
) -> None:
    with pytest.raises(WorkloadError) as raised:
        db.commit("op", [Mutation("work", "w", {})], audit={"work_id": 7})
    assert raised.value.code == INVALID
    assert db.get_row("work", "w") is None
    assert log_count(path) == 0


def test_a_deletion_removes_the_row_and_is_not_among_the_written_rows(db: SQLiteDatabase) -> None:
    put(db, "a")
    commit = db.commit("del", [Mutation("work", "a", None), Mutation("work", "b", {"n": 1})])
    assert keys(commit.rows) == ["b"]
    assert db.get_row("work", "a") is None
    put(db, "a")
    row = db.get_row("work", "a")
    assert row is not None
    assert row.version == 1


# --- preconditions and atomicity -------------------------------------------------------


def test_require_absent_wins_on_a_new_key_and_loses_on_an_existing_one(
    db: SQLiteDatabase,
) -> None:
    guard = [Precondition("work", "w1", require_absent=True)]
    db.commit("first", [Mutation("work", "w1", {"n": 1})], guard)
    with pytest.raises(StorageConflict) as raised:
        db.commit("second", [Mutation("work", "w1", {"n": 2})], guard)
    assert raised.value.code == ErrorCode.WORKLOAD_CONFLICT.value
    assert "work/w1" in raised.value.message
    assert "expected no row, found version 1" in raised.value.message
    row = db.get_row("work", "w1")
    assert row is not None
    assert row.document == {"n": 1, "__version": 1}


def test_expected_version_wins_on_the_current_version_and_loses_on_another(
    db: SQLiteDatabase,
) -> None:
    put(db, "w1")
    db.commit(
        "cas", [Mutation("work", "w1", {"n": 2})], [Precondition("work", "w1", expected_version=1)]
    )
    with pytest.raises(StorageConflict) as raised:
        db.commit(
            "stale",
            [Mutation("work", "w1", {"n": 3})],
            [Precondition("work", "w1", expected_version=1)],
        )
    assert "work/w1" in raised.value.message
    assert "expected version 1, found version 2" in raised.value.message
    assert raised.value.details == {
        "collection": "work",
        "key": "w1",
        "expected_version": 1,
        "found_version": 2,
    }
    row = db.get_row("work", "w1")
    assert row is not None
    assert row.document == {"n": 2, "__version": 2}


def test_a_missing_row_fails_an_expected_version_guard(db: SQLiteDatabase) -> None:
    with pytest.raises(StorageConflict) as raised:
        db.commit(
            "op", [Mutation("work", "w1", {})], [Precondition("work", "w1", expected_version=1)]
        )
    assert "expected version 1, found no row" in raised.value.message
    assert db.get_row("work", "w1") is None


def test_a_guard_may_cover_a_row_that_is_not_written(db: SQLiteDatabase) -> None:
    put(db, "parent")
    db.commit(
        "child",
        [Mutation("work", "child", {})],
        [Precondition("work", "parent", expected_version=1)],
    )
    put(db, "parent")
    with pytest.raises(StorageConflict):
        db.commit(
            "child2",
            [Mutation("work", "child2", {})],
            [Precondition("work", "parent", expected_version=1)],
        )
    assert db.get_row("work", "child2") is None


def test_one_failing_precondition_among_several_writes_nothing(
    db: SQLiteDatabase, path: Path
) -> None:
    put(db, "a")
    put(db, "b")
    before_revision = db.current_revision()
    before_log = log_count(path)
    with pytest.raises(StorageConflict):
        db.commit(
            "multi",
            [
                Mutation("work", "a", {"changed": True}),
                Mutation("work", "b", None),
                Mutation("work", "c", {"new": True}),
            ],
            [
                Precondition("work", "a", expected_version=1),
                Precondition("work", "c", require_absent=True),
                Precondition("work", "b", expected_version=7),
            ],
        )
    a, b = db.get_row("work", "a"), db.get_row("work", "b")
    assert a is not None and b is not None
    assert a.document == {"k": "a", "__version": 1}
    assert b.version == 1
    assert db.get_row("work", "c") is None
    assert db.current_revision() == before_revision
    assert log_count(path) == before_log


def test_a_driver_failure_midway_writes_nothing(db: SQLiteDatabase, path: Path) -> None:
    connection = raw(path)
    connection.execute(
        "CREATE TRIGGER refuse_boom BEFORE INSERT ON rows WHEN NEW.key = 'boom' "
        "BEGIN SELECT RAISE(ABORT, 'boom is refused'); END"
    )
    connection.close()
    put(db, "a")
    with pytest.raises(WorkloadError) as raised:
        db.commit("op", [Mutation("work", "a", {"n": 2}), Mutation("work", "boom", {})])
    assert raised.value.code == STORAGE_FAILURE
    assert "boom is refused" in raised.value.message
    assert str(path) in raised.value.message
    assert isinstance(raised.value.__cause__, sqlite3.IntegrityError)
    row = db.get_row("work", "a")
    assert row is not None
    assert row.version == 1
    assert db.current_revision() == 1
    assert log_count(path) == 1
    # The connection is usable afterwards: no transaction was left open.
    put(db, "b")
    assert db.current_revision() == 2


def test_a_key_written_twice_in_one_commit_is_refused(db: SQLiteDatabase, path: Path) -> None:
    with pytest.raises(WorkloadError) as raised:
        db.commit("op", [Mutation("work", "a", {}), Mutation("work", "a", None)])
    assert raised.value.code == INVALID
    assert log_count(path) == 0


def test_a_document_that_is_not_json_is_refused_before_writing(
    db: SQLiteDatabase, path: Path
) -> None:
    with pytest.raises(WorkloadError) as raised:
        db.commit("op", [Mutation("work", "a", {}), Mutation("work", "b", {"x": float("nan")})])
    assert raised.value.code == INVALID
    assert "work/b" in raised.value.message
    assert db.get_row("work", "a") is None
    assert log_count(path) == 0


# --- races -----------------------------------------------------------------------------


def test_two_threads_racing_one_compare_and_set_have_exactly_one_winner(
    db: SQLiteDatabase,
) -> None:
    put(db, "w")
    rounds = 20
    barrier = threading.Barrier(2)
    outcomes: dict[str, list[str]] = {"left": [], "right": []}

    def contend(name: str) -> None:
        for round_ in range(rounds):
            barrier.wait(timeout=30)
            try:
                db.commit(
                    f"{name}-{round_}",
                    [Mutation("work", "w", {"winner": name})],
                    [Precondition("work", "w", expected_version=round_ + 1)],
                )
                outcomes[name].append("won")
            except StorageConflict:
                outcomes[name].append("lost")
            barrier.wait(timeout=30)

    threads = [threading.Thread(target=contend, args=(name,)) for name in outcomes]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    for round_ in range(rounds):
        assert sorted([outcomes["left"][round_], outcomes["right"][round_]]) == ["lost", "won"]
    row = db.get_row("work", "w")
    assert row is not None
    assert row.version == rounds + 1
    assert db.current_revision() == rounds + 1


def _contend_in_process(target: str, name: str, rounds: int, barrier: Any, results: Any) -> None:
    database = SQLiteDatabase(target)
    outcomes = []
    try:
        for round_ in range(rounds):
            barrier.wait(timeout=60)
            try:
                database.commit(
                    f"{name}-{round_}",
                    [Mutation("work", "w", {"winner": name})],
                    [Precondition("work", "w", expected_version=round_ + 1)],
                )
                outcomes.append("won")
            except StorageConflict:
                outcomes.append("lost")
            barrier.wait(timeout=60)
    finally:
        database.close()
        results.put((name, outcomes))


@pytest.mark.multiprocess
def test_two_processes_racing_one_compare_and_set_have_exactly_one_winner(path: Path) -> None:
    database = SQLiteDatabase(path)
    try:
        put(database, "w")
    finally:
        database.close()
    rounds = 20
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(2)
    results = context.Queue()
    processes = [
        context.Process(
            target=_contend_in_process, args=(str(path), name, rounds, barrier, results)
        )
        for name in ("left", "right")
    ]
    for process in processes:
        process.start()
    try:
        outcomes = dict(results.get(timeout=120) for _ in processes)
        for process in processes:
            process.join(timeout=60)
            assert process.exitcode == 0
    finally:
        for process in processes:
            if process.is_alive():
                process.terminate()
                process.join()
        results.close()
        results.join_thread()
    for round_ in range(rounds):
        assert sorted([outcomes["left"][round_], outcomes["right"][round_]]) == ["lost", "won"]
    reopened = SQLiteDatabase(path)
    try:
        row = reopened.get_row("work", "w")
        assert row is not None
        assert row.version == rounds + 1
        assert reopened.current_revision() == rounds + 1
    finally:
        reopened.close()


# --- restore and update_index ----------------------------------------------------------


def test_a_restored_row_without_version_reads_as_version_one(
    db: SQLiteDatabase, path: Path
) -> None:
    commit = db.restore_row("work", "old", {"legacy": True})
    assert commit.revision == 1
    assert commit.rows[0].version == 1
    row = db.get_row("work", "old")
    assert row is not None
    assert (row.version, row.document) == (1, {"legacy": True, "__version": 1})
    written = db.commit(
        "cas",
        [Mutation("work", "old", {"legacy": False})],
        [Precondition("work", "old", expected_version=1)],
    )
    assert written.rows[0].version == 2
    [restore, _] = db.committed_transactions_after(0)
    assert restore.operation_ids == ["restore:old"]
    assert restore.audit == {"kind": "restore"}
    assert restore.keys == ["work/old"]
    assert restore.transaction_id != "restore:old"


def test_a_restored_row_keeps_its_version_and_index(db: SQLiteDatabase, path: Path) -> None:
    put(db, "w")
    db.restore_row("work", "w", {"n": 1, "__version": 7}, work_index(priority=3))
    row = db.get_row("work", "w")
    assert row is not None
    assert (row.version, row.revision, row.document) == (7, 2, {"n": 1, "__version": 7})
    assert raw_scalar(path, "SELECT document FROM rows WHERE key = 'w'") == '{"n":1}'
    assert keys(db.claimable_rows("work", "t1", "app1", "ready", 0, limit=5)) == ["w"]
    db.restore_row("work", "w", {"n": 2})
    assert db.claimable_rows("work", "t1", "app1", "ready", 0, limit=5) == []


@pytest.mark.parametrize("version", [0, -1, "3", True, 1.5])
def test_restore_refuses_a_version_that_is_not_a_positive_integer(
    db: SQLiteDatabase, version: Any
) -> None:
    with pytest.raises(WorkloadError) as raised:
        db.restore_row("work", "w", {"__version": version})
    assert raised.value.code == INVALID
    assert db.get_row("work", "w") is None


def test_update_index_changes_the_index_only(db: SQLiteDatabase, path: Path) -> None:
    db.commit("op", [Mutation("work", "w", {"n": 1}, work_index("waiting"))])
    assert db.claimable_rows("work", "t1", "app1", "ready", 0, limit=5) == []
    assert db.update_index("work", "w", work_index("ready")) is True
    [row] = db.claimable_rows("work", "t1", "app1", "ready", 0, limit=5)
    assert (row.version, row.revision, row.document) == (1, 1, {"n": 1, "__version": 1})
    assert db.current_revision() == 1
    assert log_count(path) == 1
    assert db.update_index("work", "missing", work_index()) is False


# --- index queries ---------------------------------------------------------------------


def test_claimable_rows_order_is_priority_desc_then_created_at_then_key(
    db: SQLiteDatabase,
) -> None:
    for key, priority, created_at in [
        ("e", 1, 5),
        ("b", 5, 20),
        ("c", 5, 10),
        ("a", 5, 10),
        ("d", 9, 30),
    ]:
        put(db, key, work_index(priority=priority, created_at=created_at))
    rows = db.claimable_rows("work", "t1", "app1", "ready", 0, limit=10)
    assert keys(rows) == ["d", "a", "c", "b", "e"]
    assert keys(db.claimable_rows("work", "t1", "app1", "ready", 0, limit=2)) == ["d", "a"]
    assert keys(db.claimable_rows("work", "t1", "app1", "ready", 0, limit=2, offset=2)) == [
        "c",
        "b",
    ]


def test_claimable_rows_eligibility_boundary_and_filters(db: SQLiteDatabase) -> None:
    put(db, "now", work_index(eligible_at=100))
    put(db, "past", work_index(eligible_at=99))
    put(db, "later", work_index(eligible_at=101))
    put(db, "unset", work_index(eligible_at=None))
    put(db, "running", work_index("running"))
    put(db, "other-tenant", work_index(tenant_id="t2"))
    put(db, "other-app", work_index(application_id="app2"))
    db.commit("x", [Mutation("other", "now", {}, work_index())])
    assert sorted(keys(db.claimable_rows("work", "t1", "app1", "ready", 100, limit=10))) == [
        "now",
        "past",
        "unset",
    ]
    assert sorted(keys(db.claimable_rows("work", "t1", "app1", "ready", 101, limit=10))) == [
        "later",
        "now",
        "past",
        "unset",
    ]


def test_list_rows_filters_and_orders(db: SQLiteDatabase) -> None:
    put(db, "a", work_index("ready", priority=1, created_at=1))
    put(db, "b", work_index("running", priority=2, created_at=1))
    put(db, "c", work_index("ready", priority=2, created_at=0))
    put(db, "d", work_index("ready", tenant_id="t2", priority=9))
    put(db, "e", work_index("ready", application_id="app2", priority=8))
    put(db, "plain")
    db.commit("x", [Mutation("other", "z", {}, work_index())])
    assert keys(db.list_rows("work", tenant_id="t1", application_id="app1")) == ["c", "b", "a"]
    assert keys(db.list_rows("work", tenant_id="t1", application_id="app1", state="ready")) == [
        "c",
        "a",
    ]
    assert keys(db.list_rows("work", tenant_id="t1", application_id="app1", limit=1)) == ["c"]
    assert keys(db.list_rows("work", tenant_id="t1")) == ["e", "c", "b", "a"]
    assert keys(db.list_rows("work", state="running")) == ["b"]
    # The whole collection; rows without an index (priority NULL) sort last.
    assert keys(db.list_rows("work")) == ["d", "e", "c", "b", "a", "plain"]


def test_rows_due_for_each_column(db: SQLiteDatabase) -> None:
    for key, lease, deadline in [("a", 30, None), ("b", 10, 50), ("c", 10, 5), ("d", None, 60)]:
        put(db, key, RowIndex(lease_expires_at=lease, deadline_at=deadline))
    db.commit("x", [Mutation("other", "z", {}, RowIndex(lease_expires_at=0, deadline_at=0))])
    assert keys(db.rows_due("work", "lease_expires_at", 30, limit=10)) == ["b", "c", "a"]
    assert keys(db.rows_due("work", "lease_expires_at", 29, limit=10)) == ["b", "c"]
    assert keys(db.rows_due("work", "lease_expires_at", 30, limit=1)) == ["b"]
    assert keys(db.rows_due("work", "deadline_at", 50, limit=10)) == ["c", "b"]
    assert keys(db.rows_due("work", "deadline_at", 4, limit=10)) == []
    with pytest.raises(WorkloadError) as raised:
        db.rows_due("work", "created_at", 10, limit=10)
    assert raised.value.code == INVALID


def test_rows_with_result_id(db: SQLiteDatabase) -> None:
    put(db, "b", RowIndex(result_id="r1"))
    put(db, "a", RowIndex(result_id="r1"))
    put(db, "c", RowIndex(result_id="r2"))
    put(db, "d")
    db.commit("x", [Mutation("other", "z", {}, RowIndex(result_id="r1"))])
    assert keys(db.rows_with_result_id("work", "r1")) == ["a", "b"]
    assert keys(db.rows_with_result_id("work", "r9")) == []


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
        ("list_rows_by_state", "rows_by_state"),
        ("list_rows_by_application", "rows_by_application"),
        ("rows_due_lease_expires_at", "rows_by_lease_expiry"),
        ("rows_due_deadline_at", "rows_by_deadline"),
        ("rows_with_result_id", "rows_by_result_id"),
        ("get_row", "sqlite_autoindex_rows_1"),
        ("row_version", "sqlite_autoindex_rows_1"),
        ("update_index", "sqlite_autoindex_rows_1"),
        ("delete_row", "sqlite_autoindex_rows_1"),
    ],
)
def test_index_queries_never_scan_nor_sort(
    db: SQLiteDatabase, path: Path, query_name: str, index: str
) -> None:
    for n in range(50):
        put(db, f"w{n}", RowIndex("t1", "app1", "ready", n % 5, n, n, n, n, f"r{n}"))
    plan = _plan(path, query_name)
    assert any(re.search(rf"USING (COVERING )?INDEX {index}\b", detail) for detail in plan), plan
    assert not any(detail.startswith("SCAN") for detail in plan), plan
    assert not any("TEMP B-TREE" in detail for detail in plan), plan


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

    database._connection().set_trace_callback(trace)
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
        seen.append(db._connection())

    for _ in range(20):
        thread = threading.Thread(target=read)
        thread.start()
        thread.join()
    assert db._connection() not in seen
    assert len(db._connections) == 1
    with pytest.raises(sqlite3.ProgrammingError):
        seen[0].execute("SELECT 1")


def test_close_closes_every_thread_s_connection(path: Path) -> None:
    database = SQLiteDatabase(path)
    ready, done = threading.Event(), threading.Event()
    connections: list[sqlite3.Connection] = []

    def hold() -> None:
        connections.append(database._connection())
        ready.set()
        done.wait(timeout=30)

    thread = threading.Thread(target=hold)
    thread.start()
    try:
        assert ready.wait(timeout=30)
        connections.append(database._connection())
        database.close()
        for connection in connections:
            with pytest.raises(sqlite3.ProgrammingError):
                connection.execute("SELECT 1")
    finally:
        done.set()
        thread.join()
        database.close()


@pytest.mark.parametrize(
    "call",
    [
        lambda db: db.get_row("work", "a"),
        lambda db: db.list_rows("work"),
        lambda db: db.claimable_rows("work", "t", "a", "ready", 0, limit=1),
        lambda db: db.rows_due("work", "deadline_at", 0, limit=1),
        lambda db: db.rows_with_result_id("work", "r"),
        lambda db: db.current_revision(),
        lambda db: db.commit("op", [Mutation("work", "a", {})]),
        lambda db: db.restore_row("work", "a", {}),
        lambda db: db.update_index("work", "a", RowIndex()),
        lambda db: db.committed_transactions_after(0),
    ],
)
def test_a_closed_database_refuses_every_call(path: Path, call: Any) -> None:
    database = SQLiteDatabase(path)
    database.close()
    database.close()
    with pytest.raises(WorkloadError) as raised:
        call(database)
    assert raised.value.code == STORAGE_FAILURE
    assert "database is closed" in raised.value.message


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


@pytest.mark.parametrize(
    "target", ["postgresql://u@h/db", "postgres://h/db", "postgresql+psycopg://h/db"]
)
def test_open_database_postgresql_is_not_available_yet(target: str) -> None:
    with pytest.raises(WorkloadError) as raised:
        open_database(target)
    assert raised.value.code == STORAGE_FAILURE
    assert raised.value.message == "PostgreSQL support is not available in this build yet"


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


# --- commit_selected: select, decide and commit in one transaction ----------------------


def ready(db: Database, key: str, priority: int) -> None:
    put(db, key, work_index(priority=priority), n=key)


def test_commit_selected_applies_the_plan_for_the_rows_it_selected(db: SQLiteDatabase) -> None:
    ready(db, "low", 1)
    ready(db, "high", 9)
    seen: list[list[str]] = []

    def decide(rows: list[StoredRow], read: RowReader) -> PlannedCommit | None:
        seen.append(keys(rows))
        first = rows[0]
        assert read("work", "low") is not None and read("work", "absent") is None
        return PlannedCommit(
            "claim-high",
            [Mutation("work", first.key, {"n": first.key, "claimed": True}, RowIndex())],
            [Precondition("work", first.key, expected_version=first.version)],
            {"work_id": first.key},
        )

    commit = db.commit_selected("work", "t1", "app1", "ready", 100, decide, limit=10)
    assert commit is not None
    assert seen == [["high", "low"]]
    assert commit.rows[0].key == "high" and commit.rows[0].version == 2
    stored = db.get_row("work", "high")
    assert stored is not None and stored.document["claimed"] is True
    assert db.committed_transactions_after(commit.revision - 1)[0].work_id == "high"
    assert keys(db.claimable_rows("work", "t1", "app1", "ready", 100, limit=10)) == ["low"]


def test_commit_selected_writes_nothing_when_decide_declines_or_raises(
    db: SQLiteDatabase, path: Path
) -> None:
    ready(db, "a", 1)
    revision, logged = db.current_revision(), log_count(path)
    assert (
        db.commit_selected("work", "t1", "app1", "ready", 100, lambda r, g: None, limit=5) is None
    )

    def refuse(rows: list[StoredRow], read: RowReader) -> PlannedCommit | None:
        raise WorkloadError("WORKLOAD_NOT_READY", "refused inside the transaction")

    with pytest.raises(WorkloadError) as raised:
        db.commit_selected("work", "t1", "app1", "ready", 100, refuse, limit=5)
    assert raised.value.code == "WORKLOAD_NOT_READY"
    assert (db.current_revision(), log_count(path)) == (revision, logged)
    assert db.get_row("work", "a").version == 1  # type: ignore[union-attr]


def test_commit_selected_guards_its_plan_like_commit(db: SQLiteDatabase, path: Path) -> None:
    ready(db, "a", 1)
    revision = db.current_revision()

    def stale(rows: list[StoredRow], read: RowReader) -> PlannedCommit | None:
        return PlannedCommit(
            "stale",
            [Mutation("work", "a", {"n": "a", "late": True}, RowIndex())],
            [Precondition("work", "a", expected_version=rows[0].version + 1)],
        )

    with pytest.raises(StorageConflict):
        db.commit_selected("work", "t1", "app1", "ready", 100, stale, limit=5)
    assert db.current_revision() == revision
    assert "late" not in db.get_row("work", "a").document  # type: ignore[union-attr]


def test_commit_selected_pages_with_offset_and_honours_eligibility(db: SQLiteDatabase) -> None:
    for n in range(5):
        ready(db, f"k{n}", 5 - n)
    put(db, "early", work_index(priority=9, eligible_at=500), n="early")
    pages: list[list[str]] = []

    def look(rows: list[StoredRow], read: RowReader) -> PlannedCommit | None:
        pages.append(keys(rows))
        return None

    db.commit_selected("work", "t1", "app1", "ready", 100, look, limit=2, offset=2)
    db.commit_selected("work", "t1", "app1", "ready", 500, look, limit=1)
    assert pages == [["k2", "k3"], ["early"]]
