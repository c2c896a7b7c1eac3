"""The store's scope (work outside it is missing work) and its commit observers."""

from __future__ import annotations

import msgspec
import pytest
from support.factories import CAPABILITIES, SIGNER, make_request

from feltdb import ResourceScope, ResourceScopeKind, WorkloadError, WorkloadState, WorkloadStore
from feltdb.auth.scope import Scope
from feltdb.work.changes import Operation, WorkloadChange

S = WorkloadState
MINE = Scope("t", "app")


@pytest.fixture
def store(tmp_path):
    with WorkloadStore.open(tmp_path / "w.db") as opened:
        yield opened


def not_found(call) -> WorkloadError:
    with pytest.raises(WorkloadError) as refused:
        call()
    assert refused.value.code == "WORKLOAD_NOT_FOUND"
    return refused.value


@pytest.mark.parametrize(
    "scope",
    [
        Scope("other", "app"),
        Scope("t", "other"),
        Scope("t", "app", environments=frozenset({"staging"})),
        Scope("t", "app", definitions=frozenset({"other-definition"})),
    ],
    ids=["tenant", "application", "environment", "definition"],
)
def test_work_outside_the_scope_is_answered_as_missing_work(store, scope):
    w = store.create(make_request())
    foreign = not_found(lambda: store.get(w.workload_id, scope=scope))
    missing = not_found(lambda: store.get("workload_missing", scope=scope))
    assert foreign.message == f"workload {w.workload_id} not found"
    assert missing.message == "workload workload_missing not found"
    assert foreign.details == {"workload_id": w.workload_id}
    revision = store.db.current_revision()
    not_found(lambda: store.cancel(w.workload_id, "human:op", now=11, scope=scope))
    not_found(lambda: store.claim(w.workload_id, "worker:w", CAPABILITIES, now=11, scope=scope))
    not_found(lambda: store.timeout(w.workload_id, "human:op", now=11, scope=scope))
    not_found(lambda: store.retry(w.workload_id, "human:op", now=11, scope=scope))
    assert store.db.current_revision() == revision, "a refusal commits nothing"
    assert store.page("t", "app", scope=scope) == ([], None)


def test_work_inside_the_scope_is_acted_on(store):
    w = store.create(make_request())
    narrowed = Scope("t", "app", frozenset({"production"}), frozenset({"send"}))
    assert store.get(w.workload_id, scope=narrowed).workload_id == w.workload_id
    claim = store.claim(w.workload_id, "worker:w", CAPABILITIES, now=11, scope=MINE)
    store.start(w.workload_id, claim.claim_id, "worker:w", claim.fencing_token, now=12, scope=MINE)
    assert store.get(w.workload_id).state is S.RUNNING
    assert [x.workload_id for x in store.page("t", "app", scope=narrowed)[0]] == [w.workload_id]


def test_admission_refuses_a_snapshot_that_does_not_cover_the_new_work(store):
    request = make_request()
    grant = msgspec.structs.replace(
        request.authorization_snapshot.grant,
        **{
            "resources": (
                ResourceScope(kind=ResourceScopeKind.WORKLOAD, uri="flow://app/workloads/x-*"),
            )
        },
    )
    request.authorization_snapshot = SIGNER.sign(grant)
    with pytest.raises(WorkloadError) as refused:
        store.admit(request)
    assert refused.value.code == "WORKLOAD_UNAUTHORIZED"
    assert refused.value.details == {"missing": "resource"}
    assert store.list("t", "app") == []


def test_observers_hear_each_durable_commit_with_what_it_changed(store):
    heard: list[WorkloadChange] = []
    unsubscribe = store.observe(heard.append)
    w = store.create(make_request(retry_policy={"max_attempts": 1}))
    claim = store.claim_next("t", "app", "worker:w", CAPABILITIES, now=11)
    assert claim is not None
    store.start(w.workload_id, claim.claim_id, "worker:w", claim.fencing_token, now=12)
    store.fail(w.workload_id, claim.claim_id, "worker:w", claim.fencing_token, "fatal", "x", 13)
    assert [c.operation for c in heard] == [
        Operation.ADMIT,
        Operation.CLAIM,
        Operation.START,
        Operation.FAIL,
    ]
    assert [c.previous for c in heard] == [None, S.READY, S.CLAIMED, S.RUNNING]
    failed = heard[-1]
    assert [e.to for e in failed.events] == [S.FAILED, S.DEAD_LETTER]
    assert failed.entered(S.DEAD_LETTER) and not failed.entered(S.READY)
    assert failed.workload.state is S.DEAD_LETTER
    unsubscribe()
    store.retry(w.workload_id, "human:op", now=14)
    assert len(heard) == 4, "an unsubscribed observer hears nothing more"


def test_refusals_and_replays_are_not_commits_and_are_not_heard(store):
    heard: list[WorkloadChange] = []
    store.observe(heard.append)
    w = store.create(make_request())
    assert not store.admit(make_request())[1]
    with pytest.raises(WorkloadError):
        store.start(w.workload_id, "claim_x", "worker:w", 1, now=11)
    assert [c.operation for c in heard] == [Operation.ADMIT]


def test_sweeps_tell_the_observers_what_they_settled(store):
    heard: list[WorkloadChange] = []
    store.observe(heard.append)
    w = store.create(make_request())
    claim = store.claim(w.workload_id, "worker:w", CAPABILITIES, now=11, lease_ms=5000)
    assert store.recover_expired(now=claim.expires_at) == [w.workload_id]
    recovered = heard[-1]
    assert recovered.operation is Operation.RECOVER
    assert recovered.previous is S.CLAIMED
    assert [e.to for e in recovered.events] == [S.RECOVERING, S.READY]


def test_an_observer_that_raises_never_undoes_the_commit(store, caplog):
    def broken(change: WorkloadChange) -> None:
        raise RuntimeError("observer bug")

    store.observe(broken)
    w = store.create(make_request())
    assert store.get(w.workload_id).state is S.READY
    assert "observer bug" in caplog.text
