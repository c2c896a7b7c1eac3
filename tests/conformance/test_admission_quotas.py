"""Admission quotas: a tenant (or one of its grants) holds at most its cap of unfinished
work and admits at most its rate, whichever way work is admitted (one at a time, by
batch, as a workflow, by a schedule, from another store on the same target).
"""

from __future__ import annotations

import pytest
from support.factories import CAPABILITIES, SIGNER, make_grant, make_request

from feltdb import Subject, WorkloadError, WorkloadState, WorkloadStore
from feltdb.auth import ResourceScope, ResourceScopeKind
from feltdb.records.workload import DURABLE_WORK_COLLECTION as WORK
from feltdb.work import quotas
from feltdb.work.quotas import QUOTAS_COLLECTION, quota_key
from feltdb.workflows import WorkflowStep

SET_AT = 0
NOW = 100  # past SET_AT + quotas.SETTLE_S: the stored count is trusted
OPERATOR = "human:ops"


def admit(store: WorkloadStore, key: str, now: int = NOW, **fields: object) -> WorkloadError | bool:
    """The admission of ``key``: whether it created work, or its refusal."""
    try:
        return store.admit(make_request(idempotency_key=key, created_at=now, **fields))[1]
    except WorkloadError as refusal:
        return refusal


def cap(store: WorkloadStore, n: int | None, rate: float | None = None, **fields: object) -> None:
    store.limits.set_quota(
        "t", max_unfinished=n, per_second=rate, actor=OPERATOR, now=SET_AT, **fields
    )


def finish(store: WorkloadStore, now: int = NOW) -> str:
    claim = store.claim_next("t", "app", "w", CAPABILITIES, now=now)
    assert claim is not None
    store.start(claim.workload_id, claim.claim_id, "w", claim.fencing_token, now=now)
    store.complete(
        claim.workload_id, claim.claim_id, "w", claim.fencing_token, f"r-{claim.workload_id}",
        {}, now=now,
    )  # fmt: skip
    return claim.workload_id


def unfinished(store: WorkloadStore, tenant: str = "t") -> int:
    return sum(
        row.document["tenant_id"] == tenant and row.document["state"] in quotas.UNFINISHED_STATES
        for row in store.db.list_rows(WORK)
    )


def grant_request(grant_id: str, key: str, now: int = NOW) -> object:
    grant = make_grant(id=grant_id, expires_at=2_000_000_000)
    return make_request(
        idempotency_key=key, created_at=now, authorization_snapshot=SIGNER.sign(grant)
    )


def test_the_cap_holds_and_a_refusal_names_the_quota_and_when_to_retry(store):
    cap(store, 3)
    assert [admit(store, f"k{n}") for n in range(3)] == [True, True, True]
    before = store.db.get_row(QUOTAS_COLLECTION, quota_key("t"))

    refused = admit(store, "k3")

    assert isinstance(refused, WorkloadError)
    assert refused.code == "WORKLOAD_QUOTA_EXCEEDED"
    assert "admission quota of tenant 't'" in refused.message
    assert "3 unfinished workloads at most" in refused.message
    assert refused.details == {
        "quota": "max_unfinished", "tenant_id": "t", "grant_id": None, "max_unfinished": 3,
        "retry_after_s": 1,
    }  # fmt: skip
    # Refused, it changed nothing.
    assert unfinished(store) == 3
    assert store.db.get_row(QUOTAS_COLLECTION, quota_key("t")) == before
    assert store.limits.quotas(now=NOW).quotas[0].unfinished == 3


def test_admit_many_refuses_item_by_item_and_admits_the_rest(store):
    cap(store, 3)
    assert admit(store, "first") is True

    answers = store.admit_many(
        [make_request(idempotency_key=f"m{n}", created_at=NOW) for n in range(4)]
    )

    assert [a[1] if isinstance(a, tuple) else a.code for a in answers] == [
        True, True, "WORKLOAD_QUOTA_EXCEEDED", "WORKLOAD_QUOTA_EXCEEDED",
    ]  # fmt: skip
    assert unfinished(store) == 3
    row = store.db.get_row(QUOTAS_COLLECTION, quota_key("t"))
    assert row.document["count"] == 3


def test_a_replay_of_admitted_work_is_never_refused(store):
    cap(store, 2, rate=2)
    assert [admit(store, "a"), admit(store, "b")] == [True, True]
    assert isinstance(admit(store, "c"), WorkloadError)  # full, and out of tokens

    assert admit(store, "a") is False  # the same work again: admits nothing
    replayed = store.admit_many([make_request(idempotency_key="b", created_at=NOW)])
    assert replayed[0][1] is False  # type: ignore[index]
    assert unfinished(store) == 2


def test_the_rate_refuses_past_its_burst_and_admits_again_as_time_passes(store):
    cap(store, None, rate=2)
    assert [admit(store, f"a{n}", now=NOW) for n in range(2)] == [True, True]

    refused = admit(store, "a2", now=NOW)

    assert isinstance(refused, WorkloadError) and refused.code == "WORKLOAD_QUOTA_EXCEEDED"
    assert refused.details is not None
    assert refused.details["quota"] == "per_second" and refused.details["retry_after_s"] == 1
    assert "2 admissions a second (bursts of 2)" in refused.message
    # A second later the bucket holds two again; never more than its burst.
    assert [admit(store, f"b{n}", now=NOW + 1) for n in range(3)][:2] == [True, True]
    assert [admit(store, f"c{n}", now=NOW + 60) for n in range(3)][2] != True  # noqa: E712


def test_a_rate_below_one_a_second_has_a_burst_of_one_and_says_the_wait(store):
    cap(store, None, rate=0.25)
    assert admit(store, "a", now=NOW) is True
    refused = admit(store, "b", now=NOW + 1)
    assert isinstance(refused, WorkloadError) and refused.details is not None
    assert refused.details["retry_after_s"] == 3  # a quarter token, at a quarter a second
    assert isinstance(admit(store, "b", now=NOW + 3), WorkloadError)
    assert admit(store, "b", now=NOW + 4) is True


def test_finishing_work_makes_room_after_the_recount(store):
    cap(store, 2)
    assert [admit(store, "a"), admit(store, "b")] == [True, True]
    assert isinstance(admit(store, "c"), WorkloadError)

    finish(store)

    assert admit(store, "c") is True
    assert isinstance(admit(store, "d"), WorkloadError)
    # A cancelled workload is finished too; a dead letter is not (an operator may retry it).
    ready = [w for w in store.list("t", "app") if w.state is WorkloadState.READY]
    store.cancel(ready[0].workload_id, "human:ops", now=NOW)
    assert admit(store, "d") is True


def test_removing_a_quota_lets_admissions_through(store):
    cap(store, 1, rate=1)
    assert admit(store, "a") is True
    assert isinstance(admit(store, "b"), WorkloadError)

    cap(store, None, None)

    assert [admit(store, f"n{n}") for n in range(3)] == [True, True, True]
    assert store.limits.quotas().quotas == []
    assert store.db.get_row(QUOTAS_COLLECTION, quota_key("t")) is None


def test_another_tenants_quota_does_not_bind_this_one(store):
    store.limits.set_quota("other", max_unfinished=1, per_second=1, actor=OPERATOR, now=SET_AT)
    assert [admit(store, f"k{n}") for n in range(5)] == [True] * 5
    listed = store.limits.quotas(now=NOW).quotas
    assert [(q.tenant_id, q.unfinished) for q in listed] == [("other", 0)]


def test_a_grants_quota_binds_the_work_admitted_under_that_grant_alone(store):
    store.limits.set_quota("t", grant_id="g1", max_unfinished=1, actor=OPERATOR, now=SET_AT)
    assert store.admit(grant_request("g1", "a"))[1] is True

    with pytest.raises(WorkloadError) as refused:
        store.admit(grant_request("g1", "b"))

    assert refused.value.code == "WORKLOAD_QUOTA_EXCEEDED"
    assert "grant 'g1' of tenant 't'" in refused.value.message
    assert refused.value.details is not None and refused.value.details["grant_id"] == "g1"
    assert [store.admit(grant_request("g2", f"c{n}"))[1] for n in range(3)] == [True] * 3
    (quota,) = store.limits.quotas("t", now=NOW).quotas
    assert (quota.grant_id, quota.unfinished) == ("g1", 1)
    # The tenant's quota binds every grant's work, the grant's as well.
    cap(store, 5)
    assert store.admit(grant_request("g2", "e"))[1] is True  # 5 of 5
    with pytest.raises(WorkloadError) as full:
        store.admit(grant_request("g2", "f"))
    assert "tenant 't' is 5 unfinished workloads" in full.value.message


def test_two_stores_on_one_target_share_the_cap(store, open_store):
    cap(store, 3)
    other = open_store()
    assert [admit(store, "a"), admit(other, "b"), admit(store, "c")] == [True, True, True]
    assert isinstance(admit(other, "d"), WorkloadError)
    assert isinstance(admit(store, "e"), WorkloadError)
    assert unfinished(store) == 3


def test_threads_admitting_at_once_share_a_transaction_and_hold_the_cap(store):
    from concurrent.futures import ThreadPoolExecutor

    cap(store, 10)
    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(lambda n: admit(store, f"k{n}"), range(40)))

    assert sum(answer is True for answer in answers) == 10
    refusals = {answer.code for answer in answers if isinstance(answer, WorkloadError)}
    assert refusals == {"WORKLOAD_QUOTA_EXCEEDED"}
    assert unfinished(store) == 10
    assert store.db.get_row(QUOTAS_COLLECTION, quota_key("t")).document["count"] == 10


def test_a_workflow_is_charged_whole(store):
    cap(store, 3)
    assert admit(store, "solo") is True

    def step(name: str, *after: str) -> WorkflowStep:
        request = make_request(idempotency_key=f"node-{name}", input={"n": name}, created_at=NOW)
        return WorkflowStep(name, request, after)

    with pytest.raises(WorkloadError) as refused:
        store.workflows.submit("three", [step("a"), step("b", "a"), step("c", "b")])

    assert refused.value.code == "WORKLOAD_QUOTA_EXCEEDED"
    assert unfinished(store) == 1  # none of its nodes was admitted
    run, created = store.workflows.submit("two", [step("x"), step("y", "x")])
    assert created and len(run.nodes) == 2
    assert unfinished(store) == 3


def test_a_scheduled_occurrence_refused_by_a_quota_is_held_back_not_passed_over(store):
    start = 1_800_000_000
    grant = SIGNER.sign(make_grant(expires_at=2_000_000_000))
    store.schedules.create(
        {"schedule_id": "tick", "interval_s": 60, "catch_up": "all",
         "template": {"definition_id": "report", "input": {}, "environment": "production"}},
        tenant_id="t", application_id="app", requested_by=Subject.agent("a1"),
        authorization_snapshot=grant, now=start,
    )  # fmt: skip
    store.limits.set_quota("t", max_unfinished=1, actor=OPERATOR, now=start)

    first = store.schedules.run_due(now=start + 130)  # two due: one has room

    assert len(first) == 1 and unfinished(store) == 1
    held = store.schedules.get("t", "app", "tick", now=start + 130)
    assert held["last_occurrence"] == start + 60
    assert "WORKLOAD_QUOTA_EXCEEDED" in held["last_error"]
    assert store.schedules.run_due(now=start + 130) == []  # still full: still held back
    finish(store, now=start + 131)
    again = store.schedules.run_due(now=start + 131)
    assert [o.instant for o in again] == [start + 120]


def test_the_bounds_of_a_quota_are_refused(store, monkeypatch):
    for fields in (
        {"max_unfinished": 0}, {"max_unfinished": 1_000_001}, {"per_second": 0},
        {"per_second": 2_000_000}, {"per_second": "fast"}, {"max_unfinished": True},
    ):  # fmt: skip
        with pytest.raises(WorkloadError) as refused:
            store.limits.set_quota("t", actor=OPERATOR, **fields)  # type: ignore[arg-type]
        assert refused.value.code == "WORKLOAD_INVALID", fields
    monkeypatch.setattr(quotas, "MAX_QUOTAS_PER_TENANT", 2)
    store.limits.set_quota("t", max_unfinished=5, actor=OPERATOR)
    store.limits.set_quota("t", grant_id="g1", max_unfinished=5, actor=OPERATOR)
    with pytest.raises(WorkloadError) as refused:
        store.limits.set_quota("t", grant_id="g2", max_unfinished=5, actor=OPERATOR)
    assert "at most 2 quotas" in refused.value.message
    store.limits.set_quota("t", grant_id="g1", max_unfinished=6, actor=OPERATOR)  # a change


def test_the_list_says_each_quota_and_stops_at_its_bound(store, monkeypatch):
    from feltdb.work import quota_view

    cap(store, 10, rate=2.5)
    store.limits.set_quota("t", grant_id="g", per_second=1, actor=OPERATOR, now=SET_AT)
    store.limits.set_quota("u", max_unfinished=1, actor=OPERATOR, now=SET_AT)
    assert admit(store, "a") is True

    listed = store.limits.quotas(now=NOW)

    assert [(q.tenant_id, q.grant_id) for q in listed.quotas] == [
        ("t", None), ("t", "g"), ("u", None),
    ]  # fmt: skip
    mine, grant, other = listed.quotas
    assert (mine.max_unfinished, mine.unfinished, mine.per_second) == (10, 1, 2.5)
    assert mine.tokens == 2.0 and mine.set_by == OPERATOR  # a burst of 3, one taken
    assert (grant.unfinished, grant.tokens) == (None, 0.0)
    assert other.unfinished == 0 and listed.complete
    monkeypatch.setattr(quota_view, "MAX_QUOTAS_LISTED", 2)
    assert not store.limits.quotas().complete
    assert store.limits.quota("t", "g").per_second == 1  # type: ignore[union-attr]
    assert store.limits.quota("nobody") is None


def test_a_grants_recount_counts_only_its_work(store):
    other_app = make_grant(
        id="g1", application_id="app2", expires_at=2_000_000_000,
        resources=[ResourceScope(kind=ResourceScopeKind.WORKLOAD, uri="flow://app2/workloads/*")],
    )  # fmt: skip
    for n in range(3):
        store.admit(grant_request("g9", f"other{n}"))
    store.admit(
        make_request(idempotency_key="x", created_at=NOW, application_id="app2",
                     authorization_snapshot=SIGNER.sign(other_app))
    )  # fmt: skip
    counted = store.db.count_in_states(WORK, "t", quotas.UNFINISHED_STATES, 100, grant_id="g9")
    assert counted == 3
    assert store.db.count_in_states(WORK, "t", quotas.UNFINISHED_STATES, 100) == 4
    assert store.db.count_in_states(WORK, "t", quotas.UNFINISHED_STATES, 2) == 2
    assert (
        store.db.count_in_states(WORK, "t", quotas.UNFINISHED_STATES, 100, application_id="app2")
        == 1
    )


def _plan(key: str, **guard: object) -> object:
    from feltdb.storage.base import Mutation, PlannedCommit, Precondition

    return PlannedCommit(
        f"op-{key}", [Mutation("things", key, {"n": key})], [Precondition("things", key, **guard)]
    )


def test_held_rows_ride_on_the_last_plan_or_alone_when_it_loses(store):
    from feltdb.storage.base import Mutation
    from feltdb.storage.held import Decision

    db = store.db
    db.commit("seed", [Mutation("things", "taken", {"n": 0})])
    counted: list[int] = []

    def decide(rows, count, *, last="c"):
        assert rows == {"q": None} or rows["q"].document["n"] >= 1
        counted.append(count("t", ["READY"], 10, None, None))
        version = 0 if rows["q"] is None else rows["q"].document["n"]
        refused = WorkloadError("WORKLOAD_QUOTA_EXCEEDED", "no room")
        items = [_plan("a", require_absent=True), refused, _plan(last, require_absent=True)]
        return Decision(items, [Mutation("held", "q", {"n": version + 1})], {"kind": "k"})

    answers = db.commit_held("held", ["q"], WORK, decide)

    assert [type(answer).__name__ for answer in answers] == ["Commit", "WorkloadError", "Commit"]
    assert answers[2].rows[-1].key == "q"  # the last plan carried the held row
    assert counted == [0]
    # The last plan loses its own guard after the first committed: the held row alone.
    answers = db.commit_held(
        "held", ["q"], WORK, lambda rows, count: decide(rows, count, last="taken")
    )
    assert [type(answer).__name__ for answer in answers] == [
        "StorageConflict", "WorkloadError", "StorageConflict",
    ]  # fmt: skip  # "a" exists now: nothing committed, so nothing is written
    assert db.get_row("held", "q").document["n"] == 1
    db.commit("drop-a", [Mutation("things", "a", None)], [])
    answers = db.commit_held(
        "held", ["q"], WORK, lambda rows, count: decide(rows, count, last="taken")
    )
    assert [type(answer).__name__ for answer in answers][::2] == ["Commit", "StorageConflict"]
    assert db.get_row("held", "q").document["n"] == 2
    entries = db.committed_transactions_after(0)
    assert entries[-1].keys == ["held/q"] and entries[-1].audit == {"kind": "k"}


def test_the_audit_chain_verifies_after_admissions_under_quotas(store):
    cap(store, 5, rate=100)
    store.admit_many([make_request(idempotency_key=f"b{n}", created_at=NOW) for n in range(7)])
    admit(store, "single")
    finish(store)
    admit(store, "after")
    assert store.audit.verify().ok


def test_the_local_client_answers_its_own_quotas(store):
    from feltdb.auth.scope import Scope
    from feltdb.client import LocalClient

    signed = SIGNER.sign(make_grant(id="g7", expires_at=2_000_000_000))
    client = LocalClient(store, Scope("t", "app"), Subject.agent("a1"), grant=signed)
    assert client.admission_quotas().quotas == []
    cap(store, 4)
    store.limits.set_quota("t", grant_id="g7", per_second=0.5, actor=OPERATOR, now=SET_AT)
    store.limits.set_quota("t", grant_id="g8", per_second=1, actor=OPERATOR, now=SET_AT)
    client.admit(definition_id="send", input={}, idempotency_key="k")

    shown = client.admission_quotas().quotas

    assert [(q.grant_id, q.max_unfinished, q.per_second, q.unfinished) for q in shown] == [
        (None, 4, None, 1), ("g7", None, 0.5, None),
    ]  # fmt: skip
