"""WorkloadStore.page, audit_after and the grant revocations, on every backend."""

from __future__ import annotations

import threading

import pytest
from support.factories import CAPABILITIES, make_request

from feltdb import WorkloadError, WorkloadState, WorkloadStore
from feltdb.storage import Mutation
from feltdb.work.store import REVOKED_GRANTS_COLLECTION, revoked_grant_key

JOIN_TIMEOUT_S = 60


@pytest.fixture
def store(new_target) -> WorkloadStore:
    with WorkloadStore.open(new_target("pages")) as opened:
        yield opened


def admit(store: WorkloadStore, n: int, priority: int = 0) -> str:
    request = make_request(idempotency_key=f"k{n}", priority=priority, created_at=10 + n % 3)
    return store.create(request).workload_id


def walk(store: WorkloadStore, limit: int, **filters) -> list[str]:
    seen: list[str] = []
    after = None
    for _ in range(100):  # bounded
        page, after = store.page("t", "app", after=after, limit=limit, **filters)
        assert len(page) <= limit
        seen += [w.workload_id for w in page]
        if after is None:
            return seen
    raise AssertionError("the pages did not end")


@pytest.mark.parametrize("limit", [1, 2, 5, 50])
def test_pages_walk_the_list_order_and_end_with_no_cursor(store, limit):
    for n in range(11):
        admit(store, n, priority=n % 4)
    expected = [w.workload_id for w in store.list("t", "app")]
    assert walk(store, limit) == expected
    claim = store.claim_next("t", "app", "w1", CAPABILITIES, now=20)
    assert claim is not None
    ready = [w.workload_id for w in store.list("t", "app") if w.state is WorkloadState.READY]
    assert walk(store, limit, state="READY") == ready
    assert walk(store, limit, state=WorkloadState.CLAIMED) == [claim.workload_id]


@pytest.mark.parametrize("limit", [1, 3, 50])
def test_a_definition_filter_keeps_its_work_and_the_cursor_walks_everything(store, limit):
    for n in range(9):
        request = make_request(
            idempotency_key=f"k{n}", definition_id="send" if n % 3 else "bill", created_at=10 + n
        )
        store.create(request)
    expected = [w.workload_id for w in store.list("t", "app") if w.definition_id == "bill"]
    assert len(expected) == 3
    assert walk(store, limit, definition="bill") == expected
    # A definition is its own index range: one with no work ends at once.
    assert store.page("t", "app", definition="nothing", limit=2) == ([], None)


def test_a_full_last_page_answers_no_cursor(store):
    for n in range(4):
        admit(store, n)
    page, after = store.page("t", "app", limit=4)
    assert len(page) == 4
    assert after is None
    page, after = store.page("t", "app", limit=3)
    assert after == (page[-1].priority, page[-1].created_at, page[-1].workload_id)


def test_other_applications_are_never_on_a_page(store):
    admit(store, 1)
    assert store.page("t", "other")[0] == []
    assert store.page("t2", "app")[0] == []


@pytest.mark.parametrize(
    "bad",
    [
        {"limit": 0},
        {"limit": True},
        {"state": "NOPE"},
        {"after": (1, 2)},
        {"after": ("1", 2, "k")},
        {"after": (1, 2, 3)},
        {"after": (2**60, 0, "k")},
    ],
)
def test_bad_page_arguments_are_invalid(store, bad):
    with pytest.raises(WorkloadError) as raised:
        store.page("t", "app", **bad)
    assert raised.value.code == "WORKLOAD_INVALID"


def test_audit_after_keeps_only_the_tenant_s_application_entries(store):
    start = store.db.current_revision()
    first = admit(store, 1)
    store.db.commit(
        "foreign", [Mutation("x", "a", {})], audit={"tenant": "t2", "application": "app"}
    )
    store.db.commit(
        "other-app", [Mutation("x", "b", {})], audit={"tenant": "t", "application": "a2"}
    )
    store.db.commit("no-audit", [Mutation("x", "c", {})])
    second = admit(store, 2)
    entries, after = store.audit.after("t", "app", start)
    assert [e.work_id for e in entries] == [first, second]
    assert after == entries[-1].commit_revision
    assert store.audit.after("t", "app", after) == ([], after)
    assert store.audit.after("t2", "app", start)[0][0].operation_ids == ["foreign"]


def test_audit_after_pages_without_skipping_and_bounds_its_scan(store):
    start = store.db.current_revision()
    ids = [admit(store, n) for n in range(5)]
    for n in range(7):
        store.db.commit(f"f{n}", [Mutation("x", f"{n}", {})], audit={"tenant": "t2"})
    last = admit(store, 9)
    entries, after = store.audit.after("t", "app", start, limit=2)
    assert [e.work_id for e in entries] == ids[:2]
    entries, after = store.audit.after("t", "app", after, limit=2)
    assert [e.work_id for e in entries] == ids[2:4]
    # A scan of 3 log entries reads the fifth workload and two foreign entries, no more.
    entries, after = store.audit.after("t", "app", after, limit=10, scan=3)
    assert [e.work_id for e in entries] == ids[4:]
    entries, after = store.audit.after("t", "app", after, limit=10, scan=3)
    assert entries == []  # three foreign entries: nothing found, but progress made
    entries, after = store.audit.after("t", "app", after, limit=10)
    assert [e.work_id for e in entries] == [last]
    assert after == store.db.current_revision()


def test_a_revocation_is_scoped_idempotent_and_logged(store):
    start = store.db.current_revision()
    assert not store.grants.is_revoked("g1", tenant_id="t", application_id="app")
    assert store.grants.revoke("g1", "human:ops", 50, tenant_id="t", application_id="app")
    assert store.grants.is_revoked("g1", tenant_id="t", application_id="app")
    assert not store.grants.is_revoked("g1", tenant_id="t2", application_id="app")
    assert not store.grants.is_revoked("g1", tenant_id="t", application_id="app2")
    assert not store.grants.is_revoked("g2", tenant_id="t", application_id="app")
    assert not store.grants.revoke("g1", "human:other", 60, tenant_id="t", application_id="app")
    row = store.db.get_row(REVOKED_GRANTS_COLLECTION, revoked_grant_key("t", "app", "g1"))
    assert row is not None
    assert row.document["revoked_by"] == "human:ops"
    assert row.document["revoked_at"] == 50
    (entry,) = store.db.committed_transactions_after(start)
    assert entry.audit is not None
    assert entry.audit["kind"] == "grant.revoked"
    assert entry.audit["grant_id"] == "g1"
    assert store.audit.after("t", "app", start)[0] == [entry]


def test_concurrent_revocations_commit_once(store):
    results: list[bool] = []
    errors: list[BaseException] = []
    barrier = threading.Barrier(6)

    def revoke(n: int) -> None:
        try:
            barrier.wait(timeout=JOIN_TIMEOUT_S)
            results.append(
                store.grants.revoke("g", f"human:{n}", tenant_id="t", application_id="app")
            )
        except (WorkloadError, threading.BrokenBarrierError) as error:
            errors.append(error)

    threads = [threading.Thread(target=revoke, args=(n,)) for n in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(JOIN_TIMEOUT_S)
    assert not errors
    assert sorted(results) == [False] * 5 + [True]


@pytest.mark.parametrize(
    "bad",
    [
        {"grant_id": ""},
        {"grant_id": "g\x00"},
        {"actor": ""},
        {"tenant_id": ""},
        {"application_id": 3},
    ],
)
def test_bad_revocations_are_invalid(store, bad):
    arguments = {"grant_id": "g", "actor": "a", "tenant_id": "t", "application_id": "app"}
    arguments.update(bad)
    with pytest.raises(WorkloadError) as raised:
        store.grants.revoke(**arguments)
    assert raised.value.code == "WORKLOAD_INVALID"
