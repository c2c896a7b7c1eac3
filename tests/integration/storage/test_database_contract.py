"""The storage contract of feltdb.storage.base, on every backend.

Each test runs on SQLite and on PostgreSQL through the ``backend`` fixture: the promises of
the ``Database`` protocol (versions, guards, atomic commits, the revision and its log, the
scheduling index, the locked select-choose-commit) are checked once, for both. What only one
backend does (SQLite's PRAGMAs and file refusals, dense revisions) lives in that backend's
own tests.

Revisions: every backend's revision strictly increases with each commit, and a logged
transaction's ``base_revision`` is below its ``commit_revision``. Whether revisions are
dense (``commit_revision == base_revision + 1``) is the backend's choice, so these tests
compare revisions with the ones commits returned, never with counts; but the plans one
``commit_many`` commits are at consecutive revisions on every backend.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import re
import sqlite3
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
import pytest
from support.rows import keys, put, ready, work_index

from feltdb.errors import ErrorCode, WorkloadError
from feltdb.limits import MAX_PLANS_PER_BATCH
from feltdb.storage import (
    Commit,
    Database,
    Mutation,
    PlannedCommit,
    Precondition,
    RowIndex,
    StorageConflict,
    StoredRow,
)
from feltdb.storage.base import RowReader
from feltdb.storage.partitions import ClaimPartitions
from feltdb.storage.sql import load_queries
from feltdb.storage.targets import open_database

STORAGE_FAILURE = ErrorCode.WORKLOAD_STORAGE_FAILURE.value
INVALID = ErrorCode.WORKLOAD_INVALID.value
JOIN_TIMEOUT_S = 120
SQLITE_QUERIES = load_queries("sqlite")
POSTGRES_QUERIES = load_queries("postgres")


@pytest.fixture
def target(new_target: Callable[..., str]) -> str:
    return new_target("store")


@pytest.fixture
def db(target: str) -> Iterator[Database]:
    database = open_database(target)
    try:
        yield database
    finally:
        database.close()


def log_count(db: Database) -> int:
    return len(db.committed_transactions_after(0))


def claimable(
    db: Database,
    now: int = 0,
    *,
    limit: int = 10,
    offset: int = 0,
    definitions: Any = None,
) -> list[StoredRow]:
    """The rows commit_selected hands ``choose`` for t1/app1's ready work (nothing is
    planned, so nothing is written).
    """
    seen: list[list[StoredRow]] = []

    def look(rows: list[StoredRow], read: RowReader) -> PlannedCommit | None:
        seen.append(list(rows))
        return None

    commit = db.commit_selected(
        "work",
        "t1",
        "app1",
        "ready",
        now,
        look,
        limit=limit,
        offset=offset,
        partitions=None if definitions is None else every_group(definitions),
    )
    assert commit is None
    if definitions is not None and not seen:
        return []  # no group to read: choose was not called
    assert len(seen) == 1
    return seen[0]


def every_group(definitions: Any) -> ClaimPartitions:
    """Claim partitions of ``definitions`` that accept every group."""
    return ClaimPartitions(lambda definition, group, sample: True, definitions)


def assert_revisions_increase(commits: list[Commit], db: Database) -> None:
    """The commits' revisions strictly increase, and the log holds them in that order."""
    revisions = [commit.revision for commit in commits]
    assert revisions == sorted(set(revisions)), revisions
    log = db.committed_transactions_after(0)
    assert [entry.commit_revision for entry in log] == revisions
    assert [entry.transaction_id for entry in log] == [c.transaction_id for c in commits]
    for entry in log:
        assert entry.base_revision < entry.commit_revision, entry
    assert db.current_revision() == revisions[-1]


# --- opening ---------------------------------------------------------------------------


def test_a_new_store_is_empty_at_revision_zero(db: Database) -> None:
    assert db.current_revision() == 0
    assert db.committed_transactions_after(0) == []
    assert db.get_row("work", "a") is None
    assert db.list_rows("work") == []


def test_reopening_sees_everything(target: str) -> None:
    first = open_database(target)
    try:
        a = first.commit(
            "a", [Mutation("work", "w1", {"n": 1}, work_index())], audit={"work_id": "w1"}
        )
        b = first.commit("b", [Mutation("work", "w1", {"n": 2}, work_index())])
        c = first.commit("c", [Mutation("work", "w2", {"n": 3}, work_index(priority=9))])
    finally:
        first.close()
    second = open_database(target)
    try:
        row = second.get_row("work", "w1")
        assert row is not None
        assert (row.version, row.revision, row.document) == (
            2,
            b.revision,
            {"n": 2, "__version": 2},
        )
        assert second.current_revision() == c.revision
        assert keys(claimable(second)) == ["w2", "w1"]
        log = second.committed_transactions_after(0)
        assert [entry.operation_ids for entry in log] == [["a"], ["b"], ["c"]]
        assert [entry.commit_revision for entry in log] == [a.revision, b.revision, c.revision]
        assert log[0].work_id == "w1"
    finally:
        second.close()


# --- versions, revisions and the log ---------------------------------------------------


def test_versions_start_at_one_and_grow_by_one(db: Database) -> None:
    for expected in range(1, 5):
        commit = db.commit(f"op{expected}", [Mutation("work", "w1", {"n": expected})])
        assert commit.rows[0].version == expected
        assert commit.rows[0].document == {"n": expected, "__version": expected}
        row = db.get_row("work", "w1")
        assert row is not None
        assert row.version == expected
        assert row.document == {"n": expected, "__version": expected}


def test_a_document_s_own_version_field_is_ignored_on_write(db: Database) -> None:
    db.commit("op", [Mutation("work", "w1", {"b": [1, "é"], "a": 1, "__version": 99})])
    row = db.get_row("work", "w1")
    assert row is not None
    assert row.version == 1
    assert row.document == {"a": 1, "b": [1, "é"], "__version": 1}


def test_revisions_strictly_increase_with_each_commit(db: Database) -> None:
    assert db.current_revision() == 0
    commits: list[Commit] = []
    for n in range(1, 6):
        commit = db.commit(f"op{n}", [Mutation("work", f"w{n % 2}", {})])
        assert commit.rows[0].revision == commit.revision
        assert db.current_revision() == commit.revision
        assert commit.revision > (commits[-1].revision if commits else 0)
        commits.append(commit)
    assert_revisions_increase(commits, db)


def test_rows_carry_the_revision_of_their_last_write(db: Database) -> None:
    first = db.commit("1", [Mutation("work", "a", {}), Mutation("work", "b", {})])
    second = db.commit("2", [Mutation("work", "b", {})])
    a, b = db.get_row("work", "a"), db.get_row("work", "b")
    assert a is not None and b is not None
    assert (a.revision, b.revision) == (first.revision, second.revision)
    assert first.revision < second.revision


def test_a_commit_is_logged_with_its_keys_operation_and_audit(db: Database) -> None:
    audit = {"kind": "claim", "work_id": "w1", "agent_id": "ag", "session_id": None, "x": [1]}
    commit = db.commit(
        "op-claim",
        [Mutation("work", "w1", {}), Mutation("claims", "c1", {}), Mutation("work", "gone", None)],
        audit=audit,
    )
    [entry] = db.committed_transactions_after(0)
    assert entry.transaction_id == commit.transaction_id
    assert re.fullmatch(r"tx_[A-Za-z0-9]{24}", entry.transaction_id)
    assert entry.commit_revision == commit.revision
    assert entry.base_revision < entry.commit_revision
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


def test_transaction_ids_are_fresh_and_never_the_operation_id(db: Database) -> None:
    ids = {db.commit("same-op", [Mutation("work", "w", {})]).transaction_id for _ in range(50)}
    assert len(ids) == 50
    assert "same-op" not in ids


def test_committed_transactions_after_returns_the_slice(db: Database) -> None:
    revisions = [
        db.commit(f"op{n}", [Mutation("work", "w", {})], audit={"work_id": f"w{n}"}).revision
        for n in range(1, 8)
    ]
    after = db.committed_transactions_after
    assert [t.commit_revision for t in after(revisions[2])] == revisions[3:]
    assert [t.commit_revision for t in after(revisions[2], limit=2)] == revisions[3:5]
    assert [t.work_id for t in after(revisions[4])] == ["w6", "w7"]
    assert after(revisions[6]) == []
    assert after(0, limit=0) == []
    # A revision between two commits' (if the backend leaves gaps) starts after it.
    assert [t.commit_revision for t in after(revisions[2] + 1)] == [
        r for r in revisions if r > revisions[2] + 1
    ]


def test_committed_transactions_before_reads_the_log_backwards(db: Database) -> None:
    revisions = [
        db.commit(f"op{n}", [Mutation("work", "w", {})], audit={"work_id": f"w{n}"}).revision
        for n in range(1, 8)
    ]
    before = db.committed_transactions_before
    head = db.current_revision() + 1
    assert [t.commit_revision for t in before(head, 3)] == revisions[::-1][:3]
    assert [t.work_id for t in before(revisions[2], 10)] == ["w2", "w1"]
    assert before(revisions[0], 10) == []
    assert before(head, 0) == []
    # A revision between two commits' (if the backend leaves gaps) ends before it.
    assert [t.commit_revision for t in before(revisions[4] - 1, 10)] == [
        r for r in revisions[::-1] if r < revisions[4] - 1
    ]


def test_recent_operations_are_one_applications_newest_entries(db: Database) -> None:
    def logged(n: int, tenant: str = "t", operation: str | None = "complete") -> None:
        audit = {"tenant": tenant, "application": "a", "operation": operation, "n": n}
        if n == 1:
            audit.update(work_id="w1", state="DEAD_LETTER", attempt_worker_id="service:w")
        db.commit(f"op{n}", [Mutation("work", f"w{n}", {})], audit=audit)

    assert db.recent_operations("t", "a", 0, 10) == ([], None)
    logged(1, operation="fail")
    logged(2, tenant="other")
    logged(3, operation=None)
    db.commit("bare", [Mutation("work", "x", {})])  # no audit record at all
    # A NUL, escaped, in another field of a record (a subject's id may hold one) is no
    # error for the reads of the others (PostgreSQL's jsonb would refuse the whole read).
    db.commit("nul", [Mutation("work", "n", {})], audit={"tenant": "x", "subject": "a\x00b"})
    logged(4)
    found, floor = db.recent_operations("t", "a", 0, 10)
    assert sorted(entry.operation or "" for entry in found) == ["", "complete", "fail"]
    assert {(entry.work_id, entry.state, entry.worker) for entry in found} == {
        ("w1", "DEAD_LETTER", "service:w"),
        (None, None, None),  # these records name no workload
    }
    assert floor is None  # fewer than 10 entries: the whole log was read
    newest, floor = db.recent_operations("t", "a", 0, 2)  # the NUL record and n=4
    assert [entry.operation for entry in newest] == ["complete"]
    everything = db.committed_transactions_after(0)
    assert floor == everything[-2].committed_at
    assert db.recent_operations("t", "a", everything[-1].committed_at + 1, 10)[0] == []
    assert db.recent_operations("t", "b", 0, 10)[0] == []
    assert db.recent_operations("t", "a", 0, 0) == ([], None)


def test_a_commit_without_audit_logs_no_provenance(db: Database) -> None:
    db.commit("op", [Mutation("work", "w", {})])
    [entry] = db.committed_transactions_after(0)
    assert entry.audit is None
    assert entry.work_id is None


def test_a_non_string_provenance_field_is_refused_before_writing(db: Database) -> None:
    with pytest.raises(WorkloadError) as raised:
        db.commit("op", [Mutation("work", "w", {})], audit={"work_id": 7})
    assert raised.value.code == INVALID
    assert db.get_row("work", "w") is None
    assert log_count(db) == 0
    assert db.current_revision() == 0


def test_an_audit_record_with_a_key_that_is_not_a_string_is_refused(db: Database) -> None:
    with pytest.raises(WorkloadError) as raised:
        db.commit("op", [Mutation("work", "w", {})], audit={1: "x", "work_id": "w"})
    assert raised.value.code == INVALID and "audit record" in raised.value.message
    assert db.get_row("work", "w") is None and log_count(db) == 0


def test_an_operation_id_that_is_not_a_string_is_refused_before_writing(db: Database) -> None:
    # Committed, it would fail every later read of the log (CommittedTransaction types it).
    with pytest.raises(WorkloadError) as raised:
        db.commit(5, [Mutation("work", "w", {})])  # type: ignore[arg-type]
    assert raised.value.code == INVALID
    assert "operation id" in raised.value.message
    assert db.get_row("work", "w") is None
    assert db.current_revision() == 0
    put(db, "after")
    assert [t.operation_ids for t in db.committed_transactions_after(0)] == [["put:after"]]


def test_a_key_written_twice_in_one_commit_is_refused_before_writing(db: Database) -> None:
    with pytest.raises(WorkloadError) as raised:
        db.commit("op", [Mutation("work", "w", {"n": 1}), Mutation("work", "w", {"n": 2})])
    assert raised.value.code == INVALID
    assert "written twice" in raised.value.message
    assert db.get_row("work", "w") is None
    assert db.current_revision() == 0


def test_a_deletion_removes_the_row_and_is_not_among_the_written_rows(db: Database) -> None:
    put(db, "a")
    commit = db.commit("del", [Mutation("work", "a", None), Mutation("work", "b", {"n": 1})])
    assert keys(commit.rows) == ["b"]
    assert db.get_row("work", "a") is None
    put(db, "a")
    row = db.get_row("work", "a")
    assert row is not None
    assert row.version == 1


@contextmanager
def another_open_transaction(backend: str, target: str) -> Iterator[None]:
    """Another client of the store in the middle of a transaction: a SQLite reader holding
    its snapshot, or a PostgreSQL session that has taken a transaction id.
    """
    if backend == "sqlite":
        reader = sqlite3.connect(target, isolation_level=None)
        try:
            reader.execute("BEGIN")
            reader.execute("SELECT count(*) FROM rows").fetchall()
            yield
        finally:
            reader.close()
    else:
        with psycopg.connect(target) as session:
            session.execute("SELECT pg_current_xact_id()").fetchall()
            yield


def test_the_current_revision_never_runs_ahead_of_an_open_older_transaction(
    backend: str, target: str, db: Database
) -> None:
    """``current_revision()`` is the greatest revision readable from the log, and the log
    only grows at its end (base.py). A commit that returns while another writer's older
    transaction is open is written (its row carries its revision at once) but may not be
    current yet: on PostgreSQL the open transaction might still commit with a smaller
    revision, and a reader that had moved past it would skip it. Once the older
    transaction ends, the commit is current.
    """
    first = db.commit("first", [Mutation("work", "a", {"n": 1})])
    with another_open_transaction(backend, target):
        second = db.commit("second", [Mutation("work", "a", {"n": 2})])
        row = db.get_row("work", "a")
        assert row is not None and row.revision == second.revision
        during = db.current_revision()
        assert first.revision <= during <= second.revision
        assert db.committed_transactions_after(during) == []  # the log ends at current
    assert db.current_revision() == second.revision
    assert [t.commit_revision for t in db.committed_transactions_after(first.revision)] == [
        second.revision
    ]


# --- preconditions and atomicity -------------------------------------------------------


def test_require_absent_wins_on_a_new_key_and_loses_on_an_existing_one(db: Database) -> None:
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
    assert log_count(db) == 1


def test_expected_version_wins_on_the_current_version_and_loses_on_another(db: Database) -> None:
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
    assert log_count(db) == 2


def test_a_missing_row_fails_an_expected_version_guard(db: Database) -> None:
    with pytest.raises(StorageConflict) as raised:
        db.commit(
            "op", [Mutation("work", "w1", {})], [Precondition("work", "w1", expected_version=1)]
        )
    assert "expected version 1, found no row" in raised.value.message
    assert db.get_row("work", "w1") is None
    assert log_count(db) == 0


@pytest.mark.parametrize(
    ("mutations", "preconditions", "refusal"),
    [
        (
            [Mutation("work", "parent", {})],
            [
                Precondition("work", "parent", expected_version=1),
                Precondition("work", "parent", expected_version=1),
            ],
            "work/parent is guarded twice",
        ),
        (
            [Mutation("work", "parent", {})],
            [Precondition("work", "parent", require_absent=True, expected_version=1)],
            "not both",
        ),
        (
            [Mutation("work", "parent", None)],
            [Precondition("work", "parent", require_absent=True)],
            "a deletion cannot require the row to be absent",
        ),
    ],
    ids=["guarded-twice", "absent-and-version", "absent-deletion"],
)
def test_a_guard_that_its_write_cannot_check_is_refused_before_writing(
    db: Database, mutations: list[Mutation], preconditions: list[Precondition], refusal: str
) -> None:
    # One guard a row, of a row that exists or not, never both: any other shape is a
    # mistake of the caller's, refused up front.
    put(db, "parent")
    revision = db.current_revision()
    with pytest.raises(WorkloadError) as raised:
        db.commit("op", mutations, preconditions)
    assert raised.value.code == INVALID
    assert refusal in raised.value.message
    assert db.current_revision() == revision
    assert db.get_row("work", "child") is None
    assert db.get_row("work", "parent").version == 1  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("guard", "holds"),
    [
        (Precondition("work", "parent", expected_version=1), True),
        (Precondition("work", "parent", expected_version=2), False),
        (Precondition("work", "nothing", require_absent=True), True),
        (Precondition("work", "parent", require_absent=True), False),
        (Precondition("work", "nothing", expected_version=1), False),
    ],
    ids=["at-version", "changed", "absent", "present", "missing"],
)
def test_a_guard_of_a_row_only_read_holds_the_commit_to_what_was_read(
    db: Database, guard: Precondition, holds: bool
) -> None:
    # A decision that read another row (a dependency's state) commits only if that row is
    # still as read: the guard is checked in the commit's transaction, before any write.
    put(db, "parent")
    revision = db.current_revision()
    if holds:
        db.commit("op", [Mutation("work", "child", {})], [guard])
        assert db.get_row("work", "child") is not None
        assert db.get_row("work", "parent").version == 1  # type: ignore[union-attr]
        return
    with pytest.raises(StorageConflict) as raised:
        db.commit("op", [Mutation("work", "child", {})], [guard])
    assert f"work/{guard.key}" in raised.value.message
    assert db.get_row("work", "child") is None
    assert db.current_revision() == revision


def test_an_unguarded_precondition_is_no_guard(db: Database) -> None:
    commit = db.commit("op", [Mutation("work", "w", {})], [Precondition("work", "elsewhere")])
    assert commit.rows[0].version == 1


def test_one_failing_precondition_among_several_writes_nothing(db: Database) -> None:
    put(db, "a")
    put(db, "b")
    before_revision = db.current_revision()
    before_log = log_count(db)
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
    assert log_count(db) == before_log


def test_a_multi_mutation_commit_lands_whole_at_one_revision(db: Database) -> None:
    put(db, "a")
    commit = db.commit(
        "multi",
        [
            Mutation("work", "a", {"n": 2}),
            Mutation("work", "b", {"n": 1}),
            Mutation("claims", "c", {"n": 1}),
        ],
        [Precondition("work", "a", expected_version=1), Precondition("work", "b", True)],
    )
    assert [(r.collection, r.key, r.version, r.revision) for r in commit.rows] == [
        ("work", "a", 2, commit.revision),
        ("work", "b", 1, commit.revision),
        ("claims", "c", 1, commit.revision),
    ]
    for collection, key in [("work", "a"), ("work", "b"), ("claims", "c")]:
        row = db.get_row(collection, key)
        assert row is not None
        assert row.revision == commit.revision
    [_, entry] = db.committed_transactions_after(0)
    assert entry.keys == ["work/a", "work/b", "claims/c"]


def refuse_inserts_of(backend: str, target: str, key: str) -> type[Exception]:
    """Make the database itself refuse to insert a row at ``key`` (a trigger), as a driver
    failure midway through a commit; returns the driver's exception type for it.
    """
    if backend == "sqlite":
        connection = sqlite3.connect(target, isolation_level=None)
        try:
            connection.execute(
                f"CREATE TRIGGER refuse_{key} BEFORE INSERT ON rows WHEN NEW.key = '{key}' "
                f"BEGIN SELECT RAISE(ABORT, '{key} is refused'); END"
            )
        finally:
            connection.close()
        return sqlite3.IntegrityError
    with psycopg.connect(target, autocommit=True) as session:
        session.execute(
            f"CREATE FUNCTION refuse_{key}() RETURNS trigger LANGUAGE plpgsql AS $$ "
            f"BEGIN IF NEW.key = '{key}' THEN RAISE EXCEPTION '{key} is refused'; END IF; "
            f"RETURN NEW; END $$"
        )
        session.execute(
            f"CREATE TRIGGER refuse_{key} BEFORE INSERT ON rows "
            f"FOR EACH ROW EXECUTE FUNCTION refuse_{key}()"
        )
    return psycopg.errors.RaiseException


def test_a_driver_failure_midway_writes_nothing(backend: str, target: str, db: Database) -> None:
    refused_by_driver = refuse_inserts_of(backend, target, "boom")
    first = db.commit("put:a", [Mutation("work", "a", {"k": "a"})])
    with pytest.raises(WorkloadError) as raised:
        db.commit("op", [Mutation("work", "a", {"n": 2}), Mutation("work", "boom", {})])
    assert raised.value.code == STORAGE_FAILURE
    assert "boom is refused" in raised.value.message
    assert db.target in raised.value.message
    assert isinstance(raised.value.__cause__, refused_by_driver)
    row = db.get_row("work", "a")
    assert row is not None
    assert row.version == 1
    assert db.current_revision() == first.revision
    assert log_count(db) == 1
    # The connection is usable afterwards: no transaction was left open.
    second = db.commit("put:b", [Mutation("work", "b", {"k": "b"})])
    assert db.current_revision() == second.revision > first.revision


def test_a_key_written_twice_in_one_commit_is_refused(db: Database) -> None:
    with pytest.raises(WorkloadError) as raised:
        db.commit("op", [Mutation("work", "a", {}), Mutation("work", "a", None)])
    assert raised.value.code == INVALID
    assert log_count(db) == 0


def test_a_document_that_is_not_json_is_refused_before_writing(db: Database) -> None:
    with pytest.raises(WorkloadError) as raised:
        db.commit("op", [Mutation("work", "a", {}), Mutation("work", "b", {"x": float("nan")})])
    assert raised.value.code == INVALID
    assert "work/b" in raised.value.message
    assert db.get_row("work", "a") is None
    assert log_count(db) == 0


# --- races -----------------------------------------------------------------------------


@pytest.mark.parametrize("connections", ["one-database", "two-databases"])
def test_two_threads_racing_one_compare_and_set_have_exactly_one_winner(
    target: str, connections: str
) -> None:
    """One ``Database`` shared by both threads (its own connections, or pool), or one each."""
    first = open_database(target)
    second = first if connections == "one-database" else open_database(target)
    try:
        put(first, "w")
        rounds = 20
        barrier = threading.Barrier(2)
        outcomes: dict[str, list[str]] = {"left": [], "right": []}
        failures: list[BaseException] = []

        def contend(name: str, db: Database) -> None:
            try:
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
            except BaseException as error:
                failures.append(error)
                barrier.abort()

        threads = [
            threading.Thread(target=contend, args=("left", first)),
            threading.Thread(target=contend, args=("right", second)),
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=JOIN_TIMEOUT_S)
        assert not any(thread.is_alive() for thread in threads), "a thread hung"
        assert failures == []
        for round_ in range(rounds):
            assert sorted([outcomes["left"][round_], outcomes["right"][round_]]) == [
                "lost",
                "won",
            ]
        row = first.get_row("work", "w")
        assert row is not None
        assert row.version == rounds + 1
        assert log_count(first) == rounds + 1
        assert first.current_revision() == first.committed_transactions_after(0)[-1].commit_revision
    finally:
        first.close()
        second.close()


def _contend_in_process(target: str, name: str, rounds: int, barrier: Any, results: Any) -> None:
    database = open_database(target)
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
def test_two_processes_racing_one_compare_and_set_have_exactly_one_winner(target: str) -> None:
    database = open_database(target)
    try:
        put(database, "w")
    finally:
        database.close()
    rounds = 20
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(2)
    results = context.Queue()
    processes = [
        context.Process(target=_contend_in_process, args=(target, name, rounds, barrier, results))
        for name in ("left", "right")
    ]
    for process in processes:
        process.start()
    try:
        outcomes = dict(results.get(timeout=JOIN_TIMEOUT_S) for _ in processes)
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
    reopened = open_database(target)
    try:
        row = reopened.get_row("work", "w")
        assert row is not None
        assert row.version == rounds + 1
        log = reopened.committed_transactions_after(0)
        assert len(log) == rounds + 1
        assert reopened.current_revision() == log[-1].commit_revision
    finally:
        reopened.close()


def test_a_follower_of_the_log_never_misses_a_commit_of_concurrent_writers(target: str) -> None:
    """Revisions grow in commit order: a reader that pages through
    ``committed_transactions_after(last_seen)`` while writers commit sees every commit, and
    never one below a revision it has already passed.
    """
    writers, commits_each = 4, 50
    databases = [open_database(target) for _ in range(writers + 1)]
    reader = databases[-1]
    done = threading.Event()
    failures: list[BaseException] = []
    start = threading.Barrier(writers + 1)

    def write(me: int, db: Database) -> None:
        try:
            start.wait(timeout=30)
            for n in range(commits_each):
                db.commit(f"w{me}-{n}", [Mutation("work", f"w{me}-{n}", {"n": n})])
        except BaseException as error:
            failures.append(error)

    threads = [
        threading.Thread(target=write, args=(me, db)) for me, db in enumerate(databases[:writers])
    ]
    try:
        for thread in threads:
            thread.start()
        start.wait(timeout=30)
        seen: list[int] = []
        cursor = 0
        while True:
            finished = done.is_set()
            for entry in reader.committed_transactions_after(cursor):
                seen.append(entry.commit_revision)
                cursor = entry.commit_revision
            if finished:
                break
            if not any(thread.is_alive() for thread in threads):
                done.set()  # one more pass after the last commit
        for thread in threads:
            thread.join(timeout=JOIN_TIMEOUT_S)
        assert failures == []
        everything = [entry.commit_revision for entry in reader.committed_transactions_after(0)]
        assert len(everything) == writers * commits_each
        assert seen == everything, "the follower missed commits"
    finally:
        for thread in threads:
            thread.join(timeout=JOIN_TIMEOUT_S)
        for db in databases:
            db.close()


# --- index queries ---------------------------------------------------------------------


def test_commit_selected_selects_by_priority_desc_then_created_at_then_key(db: Database) -> None:
    for key, priority, created_at in [
        ("e", 1, 5),
        ("b", 5, 20),
        ("c", 5, 10),
        ("a", 5, 10),
        ("d", 9, 30),
    ]:
        put(db, key, work_index(priority=priority, created_at=created_at))
    assert keys(claimable(db)) == ["d", "a", "c", "b", "e"]
    assert keys(claimable(db, limit=2)) == ["d", "a"]
    assert keys(claimable(db, limit=2, offset=2)) == ["c", "b"]


def test_commit_selected_selects_eligible_rows_of_one_state_tenant_and_application(
    db: Database,
) -> None:
    put(db, "now", work_index(eligible_at=100))
    put(db, "past", work_index(eligible_at=99))
    put(db, "later", work_index(eligible_at=101))
    put(db, "unset", work_index(eligible_at=None))
    put(db, "running", work_index("running"))
    put(db, "other-tenant", work_index(tenant_id="t2"))
    put(db, "other-app", work_index(application_id="app2"))
    db.commit("x", [Mutation("other", "now", {}, work_index())])
    assert sorted(keys(claimable(db, 100))) == ["now", "past", "unset"]
    assert sorted(keys(claimable(db, 101))) == ["later", "now", "past", "unset"]


def test_list_rows_filters_and_orders(db: Database) -> None:
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


def _cursor(row: StoredRow, index: dict[str, tuple[int, int]]) -> tuple[int, int, str]:
    priority, created_at = index[row.key]
    return priority, created_at, row.key


@pytest.mark.parametrize("state", [None, "ready"])
@pytest.mark.parametrize("limit", [1, 2, 3, 7, 50])
def test_page_rows_walks_list_rows_order_page_by_page(
    db: Database, state: str | None, limit: int
) -> None:
    index: dict[str, tuple[int, int]] = {}
    for n, (priority, created_at) in enumerate(
        [(5, 10), (5, 10), (5, 3), (9, 1), (0, 0), (5, 20), (-2, 4), (9, 1), (0, 7), (5, 10)]
    ):
        key = f"k{(n * 7) % 10}"
        index[key] = (priority, created_at)
        put(db, key, work_index("ready" if n % 4 else "running", priority, created_at))
    put(db, "foreign-tenant", work_index(tenant_id="t2"))
    put(db, "foreign-app", work_index(application_id="app2"))
    db.commit("x", [Mutation("other", "z", {}, work_index())])
    expected = keys(db.list_rows("work", tenant_id="t1", application_id="app1", state=state))
    seen: list[str] = []
    after = None
    for _ in range(len(expected) + 2):  # bounded: one page per row at most, plus the end
        page = db.page_rows("work", "t1", "app1", state, after, limit=limit)
        assert len(page) <= limit
        if not page:
            break
        seen += keys(page)
        after = _cursor(page[-1], index)
    assert seen == expected
    assert len(expected) == (10 if state is None else 7)


def test_page_rows_after_the_last_row_or_with_no_room_is_empty(db: Database) -> None:
    put(db, "a", work_index(priority=1, created_at=1))
    assert keys(db.page_rows("work", "t1", "app1", None, None, limit=5)) == ["a"]
    assert db.page_rows("work", "t1", "app1", None, (1, 1, "a"), limit=5) == []
    assert db.page_rows("work", "t1", "app1", None, None, limit=0) == []
    # A cursor need not name an existing row: the page starts after where it would sort.
    assert keys(db.page_rows("work", "t1", "app1", "ready", (1, 0, "zzz"), limit=5)) == ["a"]
    assert keys(db.page_rows("work", "t1", "app1", "ready", (2, 99, ""), limit=5)) == ["a"]


def test_rows_due_for_each_column(db: Database) -> None:
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


def test_rows_with_result_ids(db: Database) -> None:
    put(db, "b", RowIndex(result_id="r1"))
    put(db, "a", RowIndex(result_id="r1"))
    put(db, "c", RowIndex(result_id="r2"))
    put(db, "d")
    db.commit("x", [Mutation("other", "z", {}, RowIndex(result_id="r1"))])
    found = db.rows_with_result_ids("work", ["r2", "r1", "r9"])
    assert {result_id: keys(rows) for result_id, rows in found.items()} == {
        "r1": ["a", "b"],
        "r2": ["c"],
    }
    # An id asked for twice is answered once, with each of its rows once.
    twice = db.rows_with_result_ids("work", ["r1", "r2", "r1"])
    assert {result_id: keys(rows) for result_id, rows in twice.items()} == {
        "r1": ["a", "b"],
        "r2": ["c"],
    }
    assert db.rows_with_result_ids("work", []) == {}


def test_get_rows_reads_many_keys_at_once(db: Database) -> None:
    put(db, "a", RowIndex(result_id="r1"))
    put(db, "b")
    db.commit("x", [Mutation("other", "a", {"other": True})])
    found = db.get_rows("work", ["b", "missing", "a", "a"])
    assert sorted(found) == ["a", "b"]
    assert (found["a"].version, found["a"].document) == (1, {"k": "a", "__version": 1})
    assert found["b"].text == db.get_row("work", "b").text  # the row, not another collection's
    assert db.get_rows("work", []) == {}
    with pytest.raises(WorkloadError) as raised:
        db.get_rows("work", [f"k{n}" for n in range(MAX_PLANS_PER_BATCH + 1)])
    assert raised.value.code == INVALID


# --- closing ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "call",
    [
        lambda db: db.get_row("work", "a"),
        lambda db: db.list_rows("work"),
        lambda db: db.page_rows("work", "t", "a", None, (0, 0, "k"), limit=1),
        lambda db: db.commit_selected(
            "work", "t", "a", "ready", 0, lambda rows, read: None, limit=1
        ),
        lambda db: db.rows_due("work", "deadline_at", 0, limit=1),
        lambda db: db.rows_with_result_ids("work", ["r"]),
        lambda db: db.get_rows("work", ["a"]),
        lambda db: db.current_revision(),
        lambda db: db.commit("op", [Mutation("work", "a", {})]),
        lambda db: db.commit_many([PlannedCommit("op", [Mutation("work", "a", {})])]),
        lambda db: db.commit_many([]),
        lambda db: db.count_by_state("work"),
        lambda db: db.oldest_by_definition("work", "ready"),
        lambda db: db.committed_transactions_after(0),
    ],
    ids=[
        "get_row",
        "list_rows",
        "page_rows",
        "commit_selected",
        "rows_due",
        "rows_with_result_ids",
        "get_rows",
        "current_revision",
        "commit",
        "commit_many",
        "commit_many-empty",
        "count_by_state",
        "oldest_by_definition",
        "committed_transactions_after",
    ],
)
def test_a_closed_database_refuses_every_call(target: str, call: Any) -> None:
    database = open_database(target)
    database.close()
    database.close()
    with pytest.raises(WorkloadError) as raised:
        call(database)
    assert raised.value.code == STORAGE_FAILURE
    assert "database is closed" in raised.value.message


# --- commit_selected: select, choose and commit in one transaction ----------------------


def test_commit_selected_applies_the_plan_for_the_rows_it_selected(db: Database) -> None:
    ready(db, "low", 1)
    ready(db, "high", 9)
    seen: list[list[str]] = []

    def choose(rows: list[StoredRow], read: RowReader) -> PlannedCommit | None:
        seen.append(keys(rows))
        first = rows[0]
        assert read("work", "low") is not None and read("work", "absent") is None
        return PlannedCommit(
            "claim-high",
            [Mutation("work", first.key, {"n": first.key, "claimed": True}, RowIndex())],
            [Precondition("work", first.key, expected_version=first.version)],
            {"work_id": first.key},
        )

    commit = db.commit_selected("work", "t1", "app1", "ready", 100, choose, limit=10)
    assert commit is not None
    assert seen == [["high", "low"]]
    assert commit.rows[0].key == "high" and commit.rows[0].version == 2
    assert commit.revision == db.current_revision()
    stored = db.get_row("work", "high")
    assert stored is not None and stored.document["claimed"] is True
    assert db.committed_transactions_after(commit.revision - 1)[0].work_id == "high"
    assert keys(claimable(db, 100)) == ["low"]


def test_commit_selected_many_commits_each_plan_of_the_rows_it_selected(db: Database) -> None:
    ready(db, "a", 3)
    ready(db, "b", 2)
    ready(db, "c", 1)
    before = db.current_revision()

    def claim_two(rows: list[StoredRow], read: RowReader) -> list[PlannedCommit]:
        return [
            PlannedCommit(
                f"claim-{row.key}",
                [Mutation("work", row.key, {"n": row.key, "claimed": True}, RowIndex())],
                [Precondition("work", row.key, expected_version=row.version)],
                {"work_id": row.key},
            )
            for row in rows[:2]
        ]

    outcomes = db.commit_selected_many("work", "t1", "app1", "ready", 100, claim_two, limit=10)
    assert [outcome.rows[0].key for outcome in outcomes] == ["a", "b"]
    logged = db.committed_transactions_after(before)
    assert [entry.work_id for entry in logged] == ["a", "b"], "one log entry per plan"
    assert keys(claimable(db, 100)) == ["c"]
    revision = db.current_revision()
    assert (
        db.commit_selected_many("work", "t1", "app1", "ready", 100, lambda r, g: [], limit=5) == []
    )
    assert db.current_revision() == revision, "no plan, nothing written"


def test_commit_selected_writes_nothing_when_choose_declines_or_raises(db: Database) -> None:
    ready(db, "a", 1)
    revision, logged = db.current_revision(), log_count(db)
    assert (
        db.commit_selected("work", "t1", "app1", "ready", 100, lambda r, g: None, limit=5) is None
    )

    def refuse(rows: list[StoredRow], read: RowReader) -> PlannedCommit | None:
        raise WorkloadError("WORKLOAD_NOT_READY", "refused inside the transaction")

    with pytest.raises(WorkloadError) as raised:
        db.commit_selected("work", "t1", "app1", "ready", 100, refuse, limit=5)
    assert raised.value.code == "WORKLOAD_NOT_READY"
    assert (db.current_revision(), log_count(db)) == (revision, logged)
    assert db.get_row("work", "a").version == 1  # type: ignore[union-attr]


def test_commit_selected_guards_its_plan_like_commit(db: Database) -> None:
    ready(db, "a", 1)
    revision, logged = db.current_revision(), log_count(db)

    def stale(rows: list[StoredRow], read: RowReader) -> PlannedCommit | None:
        return PlannedCommit(
            "stale",
            [Mutation("work", "a", {"n": "a", "late": True}, RowIndex())],
            [Precondition("work", "a", expected_version=rows[0].version + 1)],
        )

    with pytest.raises(StorageConflict):
        db.commit_selected("work", "t1", "app1", "ready", 100, stale, limit=5)
    assert (db.current_revision(), log_count(db)) == (revision, logged)
    assert "late" not in db.get_row("work", "a").document  # type: ignore[union-attr]


def test_commit_selected_pages_with_offset_and_honours_eligibility(db: Database) -> None:
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


def ready_of(db: Database, key: str, definition: str, priority: int, created_at: int) -> None:
    """A claimable row ``key`` of ``definition`` (its document is ``{"n": key}``)."""
    index = RowIndex(
        "t1", "app1", "ready", priority, created_at, definition_id=definition, claim_group="g"
    )
    put(db, key, index, n=key)


def selected(db: Database, definitions: Any, *, limit: int = 10, offset: int = 0) -> list[str]:
    """The keys commit_selected hands ``choose`` (which declines), at now = 100."""
    return keys(claimable(db, 100, limit=limit, offset=offset, definitions=definitions))


@pytest.fixture
def three_definitions(db: Database) -> Database:
    ready_of(db, "a-hi", "a", 9, 1)
    ready_of(db, "b-hi", "b", 9, 2)
    ready_of(db, "a-mid", "a", 5, 3)
    ready_of(db, "c-mid", "c", 5, 1)
    ready_of(db, "b-old", "b", 1, 1)
    ready_of(db, "b-new", "b", 1, 4)
    ready_of(db, "a-tie", "a", 1, 4)  # same priority and age as b-new: the key decides
    ready(db, "none", 7)  # no definition: selected only without definitions
    later = RowIndex("t1", "app1", "ready", 8, 1, 500, definition_id="b", claim_group="g")
    put(db, "b-later", later)
    put(db, "b-done", RowIndex("t1", "app1", "done", 8, 1, definition_id="b"))
    put(db, "b-elsewhere", RowIndex("t2", "app1", "ready", 8, 1, definition_id="b"))
    return db


def test_commit_selected_with_definitions_selects_only_theirs(three_definitions: Database) -> None:
    db = three_definitions
    assert selected(db, ["b"]) == ["b-hi", "b-old", "b-new"]
    assert selected(db, {"c"}) == ["c-mid"]
    assert selected(db, ("unknown",)) == []
    everything = ["a-hi", "b-hi", "none", "c-mid", "a-mid", "b-old", "a-tie", "b-new"]
    assert selected(db, None) == everything  # unchanged without definitions


def test_commit_selected_merges_definitions_in_index_order(three_definitions: Database) -> None:
    db = three_definitions
    merged = ["a-hi", "b-hi", "c-mid", "a-mid", "b-old", "a-tie", "b-new"]
    assert selected(db, ["c", "b", "a"]) == merged
    assert selected(db, frozenset({"a", "b"})) == [k for k in merged if k != "c-mid"]
    assert selected(db, ["a", "a", "unknown"]) == ["a-hi", "a-mid", "a-tie"]


def test_commit_selected_with_no_definitions_selects_nothing(three_definitions: Database) -> None:
    db = three_definitions
    revision = db.current_revision()
    assert selected(db, []) == []
    assert selected(db, frozenset()) == []
    assert db.current_revision() == revision


def test_commit_selected_pages_over_the_definitions_rows(three_definitions: Database) -> None:
    db = three_definitions
    merged = ["a-hi", "b-hi", "c-mid", "a-mid", "b-old", "a-tie", "b-new"]
    pages = [selected(db, ["a", "b", "c"], limit=3, offset=offset) for offset in (0, 3, 6, 9)]
    assert pages == [merged[0:3], merged[3:6], merged[6:], []]
    assert selected(db, ["b"], limit=1, offset=1) == ["b-old"]
    assert selected(db, ["b", "c"], limit=2, offset=1) == ["c-mid", "b-old"]


def test_commit_selected_pages_from_a_position_in_claim_order(three_definitions: Database) -> None:
    # A claim's next page starts past the last row it read, by position, not by count:
    # rows before the position are never read again, and rows added before it are not
    # reached (they are a later claim's, from the start).
    db = three_definitions
    merged = ["a-hi", "b-hi", "c-mid", "a-mid", "b-old", "a-tie", "b-new"]
    position = {"a-hi": (9, 1), "c-mid": (5, 1), "a-mid": (5, 3), "b-old": (1, 1)}

    def after(key: str, limit: int = 10) -> list[str]:
        priority, created_at = position[key]
        found = []

        def look(rows: list[StoredRow], read: RowReader) -> PlannedCommit | None:
            found.extend(rows)
            return None

        partitions = ClaimPartitions(
            lambda definition, group, sample: True, ["a", "b", "c"], (priority, created_at, key)
        )
        db.commit_selected(
            "work", "t1", "app1", "ready", 100, look, limit=limit, partitions=partitions
        )
        return keys(found)

    for key in position:
        assert after(key) == merged[merged.index(key) + 1 :], key
    assert after("c-mid", limit=2) == ["a-mid", "b-old"]
    ready_of(db, "a-first", "a", 9, 0)  # before every position: never read past one
    assert after("a-hi") == merged[1:]


def test_commit_selected_with_definitions_commits_the_plan(three_definitions: Database) -> None:
    db = three_definitions

    def claim_first(rows: list[StoredRow], read: RowReader) -> PlannedCommit | None:
        first = rows[0]
        index = RowIndex("t1", "app1", "claimed", 1, 1, definition_id="b")
        return PlannedCommit(
            "claim",
            [Mutation("work", first.key, {"n": first.key}, index)],
            [Precondition("work", first.key, expected_version=first.version)],
        )

    commit = db.commit_selected(
        "work", "t1", "app1", "ready", 100, claim_first, limit=1, partitions=every_group(["b"])
    )
    assert commit is not None and commit.rows[0].key == "b-hi"
    assert selected(db, ["b"]) == ["b-old", "b-new"]


def test_the_definition_index_is_written_by_every_kind_of_write(db: Database) -> None:
    # Each kind of write is its own statement: the unguarded upsert, the guarded update
    # and the guarded insert.
    ready_of(db, "k", "a", 1, 1)
    assert selected(db, ["a"]) == ["k"]
    ready_of(db, "k", "b", 1, 1)
    assert (selected(db, ["a"]), selected(db, ["b"])) == ([], ["k"])
    db.commit(
        "to-c",
        [
            Mutation(
                "work",
                "k",
                {"n": "k"},
                RowIndex("t1", "app1", "ready", 1, 1, definition_id="c", claim_group="g"),
            )
        ],
        [Precondition("work", "k", expected_version=2)],
    )
    assert (selected(db, ["b"]), selected(db, ["c"])) == ([], ["k"])
    db.commit(
        "new-c",
        [
            Mutation(
                "work",
                "r",
                {"n": "r"},
                RowIndex("t1", "app1", "ready", 1, 2, definition_id="c", claim_group="g"),
            )
        ],
        [Precondition("work", "r", require_absent=True)],
    )
    assert selected(db, ["c"]) == ["k", "r"]


def test_partitions_read_only_the_groups_they_accept(db: Database) -> None:
    # Two groups of one definition: the claim walks both (one sample each, its first row
    # in the claim order) and reads only the accepted group's rows.
    for key, group, priority in [
        ("x1", "gx", 9),
        ("x2", "gx", 8),
        ("y1", "gy", 1),
        ("y2", "gy", 0),
    ]:
        index = RowIndex("t1", "app1", "ready", priority, 1, definition_id="d", claim_group=group)
        put(db, key, index, n=key)
    put(db, "z", RowIndex("t2", "app1", "ready", 9, 1, definition_id="d", claim_group="gz"))
    offered: list[tuple[str, str, str | None]] = []

    def only_gy(definition: str, group: str, sample: Any) -> bool:
        first = sample()
        offered.append((definition, group, None if first is None else first.key))
        return group == "gy"

    seen: list[list[str]] = []
    db.commit_selected(
        "work", "t1", "app1", "ready", 100, lambda rows, read: seen.append(keys(rows)),
        limit=10, partitions=ClaimPartitions(only_gy),
    )  # fmt: skip
    assert offered == [("d", "gx", "x1"), ("d", "gy", "y1")]
    assert seen == [["y1", "y2"]]
    revision = db.current_revision()
    assert db.commit_selected_many(
        "work", "t1", "app1", "ready", 100, lambda rows, read: pytest.fail("not called"),
        limit=10, partitions=ClaimPartitions(lambda *_: False),
    ) == []  # fmt: skip
    assert db.current_revision() == revision


def test_concurrent_commit_selected_callers_take_disjoint_rows(target: str) -> None:
    """Four writers take the first selected row until none is left: every row is taken once,
    and no plan loses its guard (the rows a caller selected were its own until it committed).
    """
    callers, total = 4, 60
    databases = [open_database(target) for _ in range(callers)]
    try:
        for n in range(total):
            ready(databases[0], f"k{n:02}", n % 3)
        taken: list[list[str]] = [[] for _ in range(callers)]
        failures: list[BaseException] = []
        start = threading.Barrier(callers)

        def take(me: int, db: Database) -> None:
            def first(rows: list[StoredRow], read: RowReader) -> PlannedCommit | None:
                if not rows:
                    return None
                row = rows[0]
                return PlannedCommit(
                    f"take-{row.key}-by-{me}",
                    [Mutation("work", row.key, {"n": row.key, "by": me}, work_index("taken"))],
                    [Precondition("work", row.key, expected_version=row.version)],
                )

            try:
                start.wait(timeout=30)
                while True:
                    commit = db.commit_selected("work", "t1", "app1", "ready", 100, first, limit=1)
                    if commit is None:
                        return
                    taken[me].append(commit.rows[0].key)
            except BaseException as error:
                failures.append(error)

        threads = [threading.Thread(target=take, args=(me, db)) for me, db in enumerate(databases)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=JOIN_TIMEOUT_S)
        assert not any(thread.is_alive() for thread in threads), "a caller hung"
        assert failures == []
        everything = [key for mine in taken for key in mine]
        assert sorted(everything) == [f"k{n:02}" for n in range(total)]
        for key in everything:
            row = databases[0].get_row("work", key)
            assert row is not None and row.version == 2
        assert log_count(databases[0]) == 2 * total
    finally:
        for db in databases:
            db.close()


# --- opening by URL ----------------------------------------------------------------------


@pytest.mark.parametrize("scheme", ["postgresql", "postgres"])
def test_open_database_takes_postgresql_and_postgres_urls(
    new_pg_url: Callable[..., str], scheme: str
) -> None:
    url = new_pg_url("by-url")
    assert url.startswith("postgresql://")
    database = open_database(scheme + url.removeprefix("postgresql"))
    try:
        put(database, "a")
        row = database.get_row("work", "a")
        assert row is not None and row.version == 1
    finally:
        database.close()


# --- counting by state -------------------------------------------------------------------


def test_count_by_state_counts_one_collection_by_its_index_state(db: Database) -> None:
    assert db.count_by_state("work") == {}
    for n in range(5):
        put(db, f"r{n}", work_index("ready", tenant_id=f"t{n % 2}", application_id=f"a{n % 3}"))
    put(db, "c", work_index("claimed"))
    put(db, "s", work_index("succeeded"))
    put(db, "unscheduled")  # no index fields: not counted
    db.commit("other", [Mutation("other", "o", {}, work_index("ready"))])
    assert db.count_by_state("work") == {"ready": 5, "claimed": 1, "succeeded": 1}
    assert db.count_by_state("other") == {"ready": 1}
    assert db.count_by_state("none") == {}

    # The count follows the index: a row moved to another state, a deleted row.
    put(db, "c", work_index("succeeded"))
    db.commit("gone", [Mutation("work", "r0", None)])
    put(db, "r1", work_index("failed"))
    assert db.count_by_state("work") == {"ready": 3, "failed": 1, "succeeded": 2}


def test_oldest_by_definition_counts_a_state_per_definition_oldest_first(db: Database) -> None:
    from dataclasses import replace

    assert db.oldest_by_definition("work", "ready") == {}
    for key, definition, created_at in (("a1", "a", 30), ("a2", "a", 10), ("b1", "b", 20)):
        put(db, key, replace(work_index("ready", created_at=created_at), definition_id=definition))
    put(db, "c", replace(work_index("claimed", created_at=1), definition_id="a"))
    put(db, "plain", work_index("ready", created_at=5))  # no definition: not counted
    found = db.oldest_by_definition("work", "ready")
    assert found == {"a": (2, 10), "b": (1, 20)}
    assert list(found) == ["a", "b"]  # oldest first
    assert db.oldest_by_definition("work", "claimed") == {"a": (1, 1)}


def test_count_in_application_counts_one_application_per_state_and_definition(
    db: Database,
) -> None:
    from dataclasses import replace

    assert db.count_in_application("work", "t1", "app1") == {}
    rows = (
        ("a1", "ready", "a", 30, "t1", "app1"),
        ("a2", "ready", "a", 10, "t1", "app1"),
        ("a3", "claimed", "a", 5, "t1", "app1"),
        ("b1", "ready", "b", 20, "t1", "app1"),
        ("x1", "ready", "a", 1, "t2", "app1"),  # another tenant's
        ("x2", "ready", "a", 2, "t1", "app2"),  # another application's
    )
    for key, state, definition, created_at, tenant, app in rows:
        index = work_index(state, created_at=created_at, tenant_id=tenant, application_id=app)
        put(db, key, replace(index, definition_id=definition))
    put(db, "plain", work_index("ready", created_at=3))  # no definition: not counted
    db.commit("other", [Mutation("other", "o", {}, replace(work_index(), definition_id="a"))])
    assert db.count_in_application("work", "t1", "app1") == {
        ("ready", "a"): (2, 10),
        ("claimed", "a"): (1, 5),
        ("ready", "b"): (1, 20),
    }
    assert db.count_in_application("work", "t2", "app1") == {("ready", "a"): (1, 1)}
    assert db.count_in_application("work", "t3", "app1") == {}


COUNT_ROWS = 2000


def test_count_by_state_reads_the_state_index_not_the_table(backend: str, target: str) -> None:
    # The table holds mostly another collection's rows, so reading the index's entries of
    # one collection is what a planner should prefer to scanning the table.
    database = open_database(target)
    try:
        database.commit(
            "fill",
            [
                Mutation(
                    "other" if n % 20 else "work",
                    f"k{n:05}",
                    {},
                    work_index(("ready", "claimed", "succeeded")[n % 3], n % 5, n),
                )
                for n in range(COUNT_ROWS)
            ],
        )
        assert sum(database.count_by_state("work").values()) == COUNT_ROWS // 20
    finally:
        database.close()
    if backend == "sqlite":
        with contextlib.closing(sqlite3.connect(target)) as connection:
            plan = [
                row[3]
                for row in connection.execute(
                    "EXPLAIN QUERY PLAN " + SQLITE_QUERIES["count_by_state"],
                    {"collection": "work"},
                )
            ]
        # Only the covering index's entries are read (the GROUP BY sorts the states).
        # rows_by_state, rows_by_definition or rows_by_environment: each covers the state.
        covering = re.compile(r"USING COVERING INDEX rows_by_(state|definition|environment)\b")
        assert any(covering.search(line) for line in plan), plan
        assert not any(line.startswith("SCAN") for line in plan), plan
    else:
        with psycopg.connect(target, autocommit=True) as connection:
            # VACUUM sets the visibility map an index-only scan relies on; ANALYZE the
            # statistics that make the planner prefer it.
            connection.execute("VACUUM ANALYZE rows")
            plan = "\n".join(
                row[0]
                for row in connection.execute(
                    "EXPLAIN " + POSTGRES_QUERIES["count_by_state"], {"collection": "work"}
                ).fetchall()
            )
        assert re.search(r"Index Only Scan using rows_by_(state|definition|environment)\b", plan), (
            plan
        )
        assert "Seq Scan" not in plan, plan


# --- update_index ----------------------------------------------------------------------


def test_update_index_changes_the_index_only(db: Database) -> None:
    commit = db.commit("op", [Mutation("work", "w", {"n": 1}, work_index("waiting"))])
    assert claimable(db) == []
    assert db.update_index("work", "w", work_index("ready")) is True
    [row] = claimable(db)
    assert (row.version, row.revision, row.document) == (
        1,
        commit.revision,
        {"n": 1, "__version": 1},
    )
    assert db.current_revision() == commit.revision
    assert log_count(db) == 1
    assert db.update_index("work", "missing", work_index()) is False


# --- commit_many: several commits in one transaction -------------------------------------


def plan(
    operation_id: str,
    key: str,
    document: dict[str, Any] | None = None,
    *,
    absent: bool = False,
    version: int | None = None,
) -> PlannedCommit:
    """A plan writing ``work/key`` (the document is ``{"by": operation_id}`` unless given),
    guarded as told, audited with its operation id.
    """
    return PlannedCommit(
        operation_id,
        [Mutation("work", key, {"by": operation_id} if document is None else document)],
        [Precondition("work", key, require_absent=absent, expected_version=version)],
        {"op": operation_id, "work_id": key},
    )


def conflict_of_commit(db: Database, planned: PlannedCommit) -> StorageConflict:
    """The conflict ``commit`` raises for ``planned`` (which must lose a guard)."""
    with pytest.raises(StorageConflict) as raised:
        db.commit(planned.operation_id, planned.mutations, planned.preconditions, planned.audit)
    return raised.value


@contextmanager
def write_transactions(backend: str, db: Database) -> Iterator[list[str]]:
    """What opens write transactions while inside: each ``transact`` of the backend's
    dialect (named), and on SQLite each ``BEGIN`` and ``COMMIT`` its connection runs.
    """
    begun: list[str] = []
    dialect = db._dialect  # type: ignore[attr-defined]  # below the protocol, to count
    transact = dialect.transact

    def counted(doing: str, work: Callable[..., Any]) -> Any:
        begun.append(f"transact {doing}")
        return transact(doing, work)

    dialect.transact = counted
    connection = dialect.connection() if backend == "sqlite" else None
    if connection is not None:
        connection.set_trace_callback(
            lambda statement: (
                begun.append(statement.split()[0].rstrip(";"))
                if statement.startswith(("BEGIN", "COMMIT"))
                else None
            )
        )
    try:
        yield begun
    finally:
        del dialect.transact
        if connection is not None:
            connection.set_trace_callback(None)


def test_commit_many_answers_each_plan_in_order_and_a_lost_guard_writes_nothing(
    db: Database,
) -> None:
    put(db, "kept")  # version 1
    put(db, "taken")
    before = db.current_revision()
    plans = [
        plan("new", "fresh", absent=True),
        plan("stale", "kept", version=7),
        plan("free", "loose", version=None),
        plan("dup", "taken", absent=True),
        plan("cas", "kept", version=1),
    ]
    # What commit raises for the plans that lose (the batch's earlier plans leave their
    # rows alone), and writes nothing.
    expected = {n: conflict_of_commit(db, plans[n]) for n in (1, 3)}
    assert db.current_revision() == before
    answers = db.commit_many(plans)
    assert [type(answer) for answer in answers] == [
        Commit,
        StorageConflict,
        Commit,
        StorageConflict,
        Commit,
    ]
    commits = [answer for answer in answers if isinstance(answer, Commit)]
    # Each conflict is the one commit raises for its plan, message and details.
    for n, conflict in expected.items():
        answer = answers[n]
        assert isinstance(answer, StorageConflict)
        assert (answer.code, answer.message, answer.details) == (
            conflict.code,
            conflict.message,
            conflict.details,
        )
    # The committed plans wrote their rows at their own revisions...
    assert [keys(commit.rows) for commit in commits] == [["fresh"], ["loose"], ["kept"]]
    for commit in commits:
        [row] = commit.rows
        assert row.revision == commit.revision
        assert db.get_row("work", row.key) == row
    # ... and the lost ones nothing: "kept" moved only by "cas", "taken" is untouched.
    kept, taken = db.get_row("work", "kept"), db.get_row("work", "taken")
    assert kept is not None and kept.document == {"by": "cas", "__version": 2}
    assert taken is not None and taken.version == 1 and taken.document["k"] == "taken"
    # One log entry per committed plan, in order, each with its own audit, consecutive.
    log = db.committed_transactions_after(before)
    assert [entry.operation_ids for entry in log] == [["new"], ["free"], ["cas"]]
    assert [entry.audit for entry in log] == [plans[n].audit for n in (0, 2, 4)]
    assert [entry.work_id for entry in log] == ["fresh", "loose", "kept"]
    assert [entry.keys for entry in log] == [["work/fresh"], ["work/loose"], ["work/kept"]]
    assert [entry.transaction_id for entry in log] == [c.transaction_id for c in commits]
    revisions = [commit.revision for commit in commits]
    assert [entry.commit_revision for entry in log] == revisions
    assert revisions == list(range(revisions[0], revisions[0] + 3))
    assert [entry.base_revision for entry in log] == [before, *revisions[:-1]]
    assert db.current_revision() == revisions[-1]
    assert len({commit.transaction_id for commit in commits}) == 3


def test_commit_many_plans_see_the_writes_of_earlier_plans(db: Database) -> None:
    answers = db.commit_many(
        [
            plan("create", "w", {"n": 1}, absent=True),
            plan("second", "w", {"n": 2}, version=1),
            plan("stale", "w", {"n": -1}, version=1),  # the version "second" replaced
            plan("third", "w", {"n": 3}, version=2),
            plan("again", "w", absent=True),
            PlannedCommit(
                "delete",
                [Mutation("work", "w", None)],
                [Precondition("work", "w", expected_version=3)],
            ),
            plan("recreate", "w", {"n": 4}, absent=True),
        ]
    )
    outcomes = [
        answer.rows[0].version if isinstance(answer, Commit) and answer.rows else answer
        for answer in answers
    ]
    assert outcomes[:2] == [1, 2]
    assert isinstance(outcomes[2], StorageConflict)
    assert outcomes[2].message == "work/w: expected version 1, found version 2"
    assert outcomes[3] == 3
    assert isinstance(outcomes[4], StorageConflict)
    assert outcomes[4].message == "work/w: expected no row, found version 3"
    assert isinstance(answers[5], Commit) and answers[5].rows == []
    assert outcomes[6] == 1
    row = db.get_row("work", "w")
    assert row is not None and row.document == {"n": 4, "__version": 1}
    ops = [entry.operation_ids[0] for entry in db.committed_transactions_after(0)]
    assert ops == ["create", "second", "third", "delete", "recreate"]


def test_commit_many_undoes_a_plan_that_loses_its_second_guard(db: Database) -> None:
    put(db, "a")
    put(db, "b")
    before = db.current_revision()
    both = PlannedCommit(
        "both",
        [Mutation("work", "a", {"both": 1}), Mutation("work", "b", {"both": 1})],
        [
            Precondition("work", "a", expected_version=1),  # holds: "a" is written first...
            Precondition("work", "b", expected_version=5),  # ... then this one is lost
        ],
    )
    two = PlannedCommit(
        "two",
        [Mutation("work", "b", {"two": 1}), Mutation("work", "c", {"two": 1})],
        [
            Precondition("work", "b", expected_version=1),
            Precondition("work", "c", require_absent=True),
        ],
    )
    answers = db.commit_many([plan("first", "x", absent=True), both, two])
    assert isinstance(answers[0], Commit) and isinstance(answers[2], Commit)
    assert isinstance(answers[1], StorageConflict)
    # As commit would have answered then: "b" was at version 1 ("two" wrote it after).
    assert answers[1].message == "work/b: expected version 5, found version 1"
    assert answers[1].details == {
        "collection": "work",
        "key": "b",
        "expected_version": 5,
        "found_version": 1,
    }
    a = db.get_row("work", "a")
    assert a is not None and a.version == 1 and "both" not in a.document
    assert [row.version for row in answers[2].rows] == [2, 1]
    log = db.committed_transactions_after(before)
    assert [entry.operation_ids for entry in log] == [["first"], ["two"]]
    assert log[1].commit_revision == log[0].commit_revision + 1


def test_commit_many_is_one_write_transaction(backend: str, target: str, db: Database) -> None:
    put(db, "a")
    put(db, "b")
    with write_transactions(backend, db) as begun:
        answers = db.commit_many(
            [
                plan("one", "n1", absent=True),
                plan("lost", "a", version=9),
                PlannedCommit(
                    "pair",
                    [Mutation("work", "a", {}), Mutation("work", "b", {})],
                    [
                        Precondition("work", "a", expected_version=1),
                        Precondition("work", "b", require_absent=True),
                    ],
                ),
                plan("two", "n2", absent=True),
            ]
        )
    assert [type(answer).__name__ for answer in answers] == [
        "Commit",
        "StorageConflict",
        "StorageConflict",
        "Commit",
    ]
    expected = ["transact commit"] + (["BEGIN", "COMMIT"] if backend == "sqlite" else [])
    assert begun == expected
    if backend == "postgres":
        # Both log entries were written by one transaction: they carry its id as xmin.
        with psycopg.connect(target) as connection:
            writers = connection.execute(
                "SELECT DISTINCT xmin::text FROM transactions WHERE transaction_id = ANY(%s)",
                [[answer.transaction_id for answer in answers if isinstance(answer, Commit)]],
            ).fetchall()
        assert len(writers) == 1


def test_an_empty_commit_many_answers_nothing_and_opens_no_transaction(
    backend: str, db: Database
) -> None:
    put(db, "a")
    with write_transactions(backend, db) as begun:
        assert db.commit_many([]) == []
    assert begun == []
    assert log_count(db) == 1


def test_commit_many_refuses_a_batch_with_an_invalid_plan_before_writing(db: Database) -> None:
    put(db, "a")
    before = db.current_revision()
    guarded_twice = PlannedCommit(
        "bad",
        [Mutation("work", "b", {})],
        [Precondition("work", "b", require_absent=True)] * 2,
    )
    with pytest.raises(WorkloadError) as raised:
        db.commit_many([plan("fine", "n", absent=True), guarded_twice])
    assert raised.value.code == INVALID
    assert raised.value.message.startswith("plan 1 of the batch: work/b is guarded twice")
    assert raised.value.details == {"plan": 1}
    with pytest.raises(WorkloadError) as too_many:
        db.commit_many([plan(f"p{n}", f"k{n}") for n in range(1025)])
    assert too_many.value.code == INVALID
    assert "at most 1024 plans" in too_many.value.message
    assert db.current_revision() == before
    assert db.get_row("work", "n") is None and db.get_row("work", "k0") is None


def test_a_value_the_database_refuses_mid_batch_refuses_the_whole_batch(db: Database) -> None:
    # Only the database finds an integer outside 64 bits, once the batch is writing.
    put(db, "a")
    before = db.current_revision()
    overflowing = PlannedCommit("big", [Mutation("work", "big", {}, RowIndex(priority=2**63))])
    with pytest.raises(WorkloadError) as raised:
        db.commit_many([plan("fine", "n", absent=True), overflowing])
    assert raised.value.code == INVALID
    assert db.current_revision() == before
    assert db.get_row("work", "n") is None
    assert db.commit_many([plan("fine", "n", absent=True)])[0].revision > before  # type: ignore[union-attr]


def test_two_racing_batches_have_exactly_one_winner_per_row(target: str) -> None:
    rows = 30
    setup = open_database(target)
    try:
        for n in range(rows):
            put(setup, f"r{n}")
    finally:
        setup.close()
    answers: dict[str, list[Commit | StorageConflict]] = {}
    barrier = threading.Barrier(2)

    def racer(name: str) -> None:
        database = open_database(target)
        try:
            barrier.wait(timeout=JOIN_TIMEOUT_S)
            answers[name] = database.commit_many(
                [plan(f"{name}{n}", f"r{n}", {"by": name}, version=1) for n in range(rows)]
            )
        finally:
            database.close()

    threads = [threading.Thread(target=racer, args=(name,)) for name in ("x", "y")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(JOIN_TIMEOUT_S)
    assert sorted(answers) == ["x", "y"]
    check = open_database(target)
    try:
        for n in range(rows):
            won = [name for name in "xy" if isinstance(answers[name][n], Commit)]
            assert len(won) == 1, (n, answers["x"][n], answers["y"][n])
            row = check.get_row("work", f"r{n}")
            assert row is not None and row.document == {"by": won[0], "__version": 2}
        assert log_count(check) == rows + rows
    finally:
        check.close()
