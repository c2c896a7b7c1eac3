"""Admission in the caller's transaction (``store.admit(request, connection=conn)``): the
work and its audit record exist exactly when the application's own rows do.

Each test runs on both backends: the application holds a ``sqlite3`` connection to the
store's file (inside ``BEGIN IMMEDIATE``) or a ``psycopg`` one to its database, writes an
``orders`` row of its own beside the workload, and commits or rolls back.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from psycopg.rows import dict_row
from support.app_rows import (
    Connection,
    begin,
    commit,
    connect,
    create_orders,
    insert_order,
    orders,
    rollback,
)
from support.factories import CAPABILITIES, make_request

from feltdb import WorkloadError, WorkloadStore
from feltdb.errors import ErrorCode
from feltdb.records.workload import WorkloadDependency
from feltdb.storage.joined import MAX_JOINED_COMMITS

MISSING = WorkloadDependency(workload_id="workload_000000000000000000000000")
"""A dependency on work that does not exist: a refused admission."""


@pytest.fixture
def app_connection(store: WorkloadStore, store_target: str) -> Iterator[Connection]:
    """The application's connection, its ``orders`` table made (and committed)."""
    create_orders(store_target)
    connection = connect(store_target)
    yield connection
    connection.close()


def logged_keys(store: WorkloadStore) -> list[str]:
    """The workload ids of every logged write."""
    return [
        key.rpartition("/")[2]
        for entry in store.db.committed_transactions_after(0)
        for key in entry.keys
    ]


def test_work_admitted_in_a_transaction_exists_once_it_commits_with_the_callers_rows(
    store, store_target, app_connection, open_store
):
    other = open_store()  # another writer of the store: sees only what is committed
    begin(app_connection)
    insert_order(app_connection, "order-1")
    workload, created = store.admit(make_request(idempotency_key="o1"), connection=app_connection)
    assert created
    with pytest.raises(WorkloadError) as unseen:
        other.get(workload.workload_id)
    assert unseen.value.code == ErrorCode.WORKLOAD_NOT_FOUND
    assert other.claim_next("t", "app", "w", CAPABILITIES) is None
    assert workload.workload_id not in logged_keys(other)

    commit(app_connection)

    assert orders(store_target) == {"order-1"}
    assert other.get(workload.workload_id).state == "READY"
    logged = other.db.committed_transactions_after(0)
    [entry] = [e for e in logged if f"system_durable_work/{workload.workload_id}" in e.keys]
    assert entry.audit["work_id"] == workload.workload_id
    assert entry.audit["principal_id"] == "agent:a1" and entry.audit["operation"] == "admit"
    assert other.audit.verify().problem is None  # its place in the chain is sound
    claim = other.claim_next("t", "app", "w", CAPABILITIES)
    assert claim is not None and claim.workload_id == workload.workload_id


def test_a_rollback_leaves_neither_the_work_nor_its_audit_record(
    store, store_target, app_connection
):
    before = store.db.current_revision()
    begin(app_connection)
    insert_order(app_connection, "order-1")
    workload, _ = store.admit(make_request(idempotency_key="o1"), connection=app_connection)
    rollback(app_connection)

    assert orders(store_target) == set()
    with pytest.raises(WorkloadError) as missing:
        store.get(workload.workload_id)
    assert missing.value.code == ErrorCode.WORKLOAD_NOT_FOUND
    assert workload.workload_id not in logged_keys(store)
    assert store.db.current_revision() == before
    assert store.audit.verify().problem is None


def test_a_key_rolled_back_is_admitted_anew_and_a_committed_one_is_replayed(store, app_connection):
    begin(app_connection)
    first, created = store.admit(make_request(idempotency_key="k"), connection=app_connection)
    rollback(app_connection)
    assert created

    begin(app_connection)
    again, created_again = store.admit(make_request(idempotency_key="k"), connection=app_connection)
    assert created_again and again.workload_id == first.workload_id
    # Within the transaction that admitted it, the key is already taken: a replay.
    replayed, created_twice = store.admit(
        make_request(idempotency_key="k"), connection=app_connection
    )
    assert not created_twice and replayed.workload_id == again.workload_id
    commit(app_connection)

    outside, created_outside = store.admit(make_request(idempotency_key="k"))
    assert not created_outside and outside.workload_id == again.workload_id
    with pytest.raises(WorkloadError) as reused:
        store.admit(make_request(idempotency_key="k", input={"id": 2}))
    assert reused.value.code == ErrorCode.IDEMPOTENCY_KEY_REUSED


def test_several_admissions_and_a_batch_share_one_transaction(store, app_connection):
    begin(app_connection)
    singles = [
        store.admit(make_request(idempotency_key=f"s{n}"), connection=app_connection)[0]
        for n in range(3)
    ]
    answers = store.admit_many(
        [make_request(idempotency_key=f"b{n}") for n in range(4)], connection=app_connection
    )
    commit(app_connection)

    batch = [answer[0] for answer in answers if isinstance(answer, tuple)]
    assert len(batch) == 4
    ids = {w.workload_id for w in [*singles, *batch]}
    assert {w.workload_id for w in store.list("t", "app")} == ids
    revisions = [
        e.commit_revision
        for e in store.db.committed_transactions_after(0)
        if ids.intersection(key.rpartition("/")[2] for key in e.keys)
    ]
    assert len(revisions) == 7 and revisions == sorted(set(revisions))
    assert store.audit.verify().problem is None


def test_a_refused_admission_changes_nothing_and_the_callers_transaction_goes_on(
    store, store_target, app_connection
):
    begin(app_connection)
    insert_order(app_connection, "order-1")
    with pytest.raises(WorkloadError) as invalid:
        store.admit(
            make_request(idempotency_key="bad", dependencies=[MISSING]), connection=app_connection
        )
    assert invalid.value.code == ErrorCode.WORKLOAD_INVALID
    answers = store.admit_many(
        [
            make_request(idempotency_key="good"),
            make_request(idempotency_key="bad", dependencies=[MISSING]),
        ],
        connection=app_connection,
    )
    insert_order(app_connection, "order-2")
    commit(app_connection)

    assert isinstance(answers[0], tuple) and isinstance(answers[1], WorkloadError)
    assert orders(store_target) == {"order-1", "order-2"}
    assert [w.idempotency_key for w in store.list("t", "app")] == ["good"]


@pytest.mark.parametrize("first_commits", [True, False])
def test_two_callers_admitting_one_key_at_once_end_with_one_workload(
    store, store_target, app_connection, first_commits
):
    # The second caller reads the key absent (the first has not committed) and then
    # writes: on PostgreSQL its insert waits for the first transaction, and loses its guard
    # if that commits (undone alone, converging on the committed work) or wins if that
    # rolls back; on SQLite its BEGIN IMMEDIATE waits for the first, then reads it.
    begin(app_connection)
    first, _ = store.admit(make_request(idempotency_key="same"), connection=app_connection)
    answers: list[tuple[Any, bool]] = []
    failures: list[BaseException] = []

    def second_caller() -> None:
        try:
            with connect(store_target) as other:
                begin(other)
                answers.append(store.admit(make_request(idempotency_key="same"), connection=other))
                insert_order(other, "order-2")
                commit(other)
        except BaseException as error:
            failures.append(error)

    second = threading.Thread(target=second_caller)
    second.start()
    second.join(0.5)  # it waits for the first transaction
    assert second.is_alive()
    (commit if first_commits else rollback)(app_connection)
    second.join(30)
    assert failures == [] and not second.is_alive()
    [(workload, created)] = answers
    assert workload.workload_id == first.workload_id and created is not first_commits
    assert orders(store_target) == {"order-2"}
    assert [w.workload_id for w in store.list("t", "app")] == [first.workload_id]
    assert store.audit.verify().problem is None


def test_the_connection_must_be_a_transaction_on_the_stores_database(
    store, store_target, new_target, backend, app_connection
):
    def refused(connection: object) -> str:
        with pytest.raises(WorkloadError) as refusal:
            store.admit(make_request(idempotency_key="x"), connection=connection)
        assert refusal.value.code == ErrorCode.WORKLOAD_INVALID
        return refusal.value.message

    assert "not builtins.object" in refused(object())
    elsewhere_target = new_target("elsewhere")
    WorkloadStore.open(elsewhere_target).close()  # a store of its own, another database
    with connect(elsewhere_target) as elsewhere:
        begin(elsewhere)
        assert "store's" in refused(elsewhere)
    if backend == "postgres":
        with psycopg.connect(store_target, autocommit=True) as outside:
            assert "no open transaction" in refused(outside)
        with connect(store_target) as failed:
            with pytest.raises(psycopg.Error):
                failed.execute("SELECT 1/0")
            assert "failed" in refused(failed)
        assert "a psycopg.Connection" in refused(sqlite3.connect(":memory:"))
    else:
        assert "no open transaction" in refused(app_connection)  # no BEGIN yet
        with sqlite3.connect(":memory:", isolation_level=None) as memory:
            begin(memory)
            assert "in-memory" in refused(memory)
    assert store.list("t", "app") == []


def test_any_row_factory_of_the_caller_is_left_alone(store, store_target, backend):
    factory = {"row_factory": dict_row} if backend == "postgres" else {}
    with connect(store_target, **factory) as connection:
        if isinstance(connection, sqlite3.Connection):
            connection.row_factory = sqlite3.Row
        begin(connection)
        workload, created = store.admit(make_request(idempotency_key="r"), connection=connection)
        commit(connection)
    assert created and store.get(workload.workload_id).state == "READY"


def test_the_stores_observers_are_not_told_of_a_callers_commit(store, app_connection):
    told: list[str] = []
    store.observe(lambda change: told.append(change.workload.workload_id))
    begin(app_connection)
    store.admit(make_request(idempotency_key="quiet"), connection=app_connection)
    commit(app_connection)
    store.admit(make_request(idempotency_key="loud"))
    assert len(told) == 1  # the store's own commit only


def test_a_postgres_transaction_holds_a_bounded_number_of_commits(store, app_connection, backend):
    # PostgreSQL numbers a transaction's commits in 1024 positions of its id; SQLite's
    # revisions are dense, so there it has no such bound.
    begin(app_connection)
    for n in range(MAX_JOINED_COMMITS // 500):
        answers = store.admit_many(
            [make_request(idempotency_key=f"{n}-{m}") for m in range(500)],
            connection=app_connection,
        )
        assert all(isinstance(answer, tuple) for answer in answers)
    last = [make_request(idempotency_key=f"last-{m}") for m in range(30)]
    if backend == "postgres":
        with pytest.raises(WorkloadError) as full:
            store.admit_many(last, connection=app_connection)
        assert full.value.code == ErrorCode.WORKLOAD_INVALID
        assert "at most 1024" in full.value.message
    else:
        assert all(isinstance(a, tuple) for a in store.admit_many(last, connection=app_connection))
    commit(app_connection)
    assert len(store.list("t", "app")) == (1000 if backend == "postgres" else 1030)
    assert store.audit.verify().problem is None


def test_the_wake_up_hint_is_sent_when_the_caller_commits_and_never_on_rollback(new_pg_url):
    # PostgreSQL only: SQLite has no hints between processes (a waiter looks again).
    target = new_pg_url("hints")
    store, listener = WorkloadStore.open(target), WorkloadStore.open(target)
    app_connection = connect(target)
    try:
        hinted(store, listener, app_connection)
    finally:
        app_connection.close()
        store.close()
        listener.close()


def hinted(store: WorkloadStore, listener: WorkloadStore, app_connection: Connection) -> None:
    assert listener.db.wakeups is not None
    listening = threading.Event()
    listener.db.wakeups.subscribe(listening.set)  # called once when the listener connects
    assert listening.wait(10)

    def received_within(seconds: float) -> int:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline and listener.db.wakeups.received == 0:
            time.sleep(0.02)
        return listener.db.wakeups.received

    begin(app_connection)
    store.admit(make_request(idempotency_key="h1"), connection=app_connection)
    assert received_within(0.5) == 0  # not before the commit
    rollback(app_connection)
    assert received_within(0.5) == 0  # nor for a rollback
    begin(app_connection)
    store.admit(make_request(idempotency_key="h2"), connection=app_connection)
    store.admit(make_request(idempotency_key="h3"), connection=app_connection)
    commit(app_connection)
    assert received_within(10) == 1  # one hint for the transaction


def test_a_quota_holds_in_the_callers_transaction_too(store, store_target, app_connection):
    store.limits.set_quota("t", max_unfinished=1, actor="ops", now=0)
    begin(app_connection)
    store.admit(make_request(idempotency_key="first"), connection=app_connection)
    with pytest.raises(WorkloadError) as refused:
        store.admit(make_request(idempotency_key="second"), connection=app_connection)
    insert_order(app_connection, "order-1")
    commit(app_connection)
    assert refused.value.code == ErrorCode.WORKLOAD_QUOTA_EXCEEDED
    assert [w.idempotency_key for w in store.list("t", "app")] == ["first"]
    assert orders(store_target) == {"order-1"}


def test_postgres_refuses_a_connection_reaching_other_tables_or_in_pipeline_mode(new_pg_url):
    # PostgreSQL only: its statements name tables as the connection's search_path finds
    # them, and a pipeline hides each statement's row count until later.
    target = new_pg_url("paths")
    with WorkloadStore.open(target) as store, psycopg.connect(target) as connection:
        store.admit(make_request(idempotency_key="first"), connection=connection)
        connection.execute("SET search_path TO nowhere")  # the same connection, later
        with pytest.raises(WorkloadError) as elsewhere:
            store.admit(make_request(idempotency_key="second"), connection=connection)
        assert elsewhere.value.code == ErrorCode.WORKLOAD_INVALID
        assert "search_path" in elsewhere.value.message
        connection.execute("RESET search_path")
        connection.execute("CREATE TEMP TABLE rows (key text)")  # found before the store's
        with pytest.raises(WorkloadError) as shadowed:
            store.admit(make_request(idempotency_key="second"), connection=connection)
        assert shadowed.value.code == ErrorCode.WORKLOAD_INVALID
        connection.commit()
        with connection.pipeline():
            with pytest.raises(WorkloadError) as piped:
                store.admit(make_request(idempotency_key="third"), connection=connection)
        assert "pipeline" in piped.value.message
        connection.rollback()
        assert [w.idempotency_key for w in store.list("t", "app")] == ["first"]


def test_postgres_tells_a_caller_its_transaction_may_be_run_again(new_pg_url):
    # Under REPEATABLE READ, a key another writer admitted after the caller's snapshot is
    # a serialization failure: the caller's to run again, and the error says so.
    target = new_pg_url("retry")
    with WorkloadStore.open(target) as store, psycopg.connect(target) as connection:
        connection.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
        connection.execute("SELECT 1")  # the transaction's snapshot is taken
        store.admit(make_request(idempotency_key="raced"))  # another writer, committed
        with pytest.raises(WorkloadError) as raced:
            store.admit(make_request(idempotency_key="raced"), connection=connection)
        assert raced.value.code == ErrorCode.WORKLOAD_STORAGE_FAILURE
        assert raced.value.details is not None and raced.value.details["retryable"] is True
        connection.rollback()
        connection.isolation_level = None
        replay = store.admit(make_request(idempotency_key="raced"), connection=connection)
        connection.commit()
        assert replay[1] is False and len(store.list("t", "app")) == 1
