"""Authoritative reads and canonical admission (the reference's PR 2 tests).

Every read answers from the committed store, so another writer's commits are seen and
acted on without a restart, and a replayed admission is matched against the committed
request after normalization.
"""

from __future__ import annotations

import threading

import msgspec
import pytest
from support.factories import CAPABILITIES, make_request
from support.pinned import pinned_store

from feltdb import (
    WorkloadDependency,
    WorkloadError,
    WorkloadRetryPolicy,
    WorkloadState,
    WorkloadTimeouts,
)


def run_concurrently(*targets, timeout: float = 60.0):
    """Run each target on its own thread, all released at once by a barrier.

    Returns each target's return value, in order. An exception raised on any thread is
    re-raised here, in the test's thread, so it fails the test.
    """
    barrier = threading.Barrier(len(targets), timeout=timeout)
    results: list[object] = [None] * len(targets)
    errors: list[BaseException] = []

    def runner(index, target):
        try:
            barrier.wait()
            results[index] = target()
        except BaseException as error:
            errors.append(error)

    threads = [
        threading.Thread(target=runner, args=(index, target), daemon=True)
        for index, target in enumerate(targets)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout)
        assert not thread.is_alive(), "a thread did not finish"
    if errors:
        raise errors[0]
    return results


def test_another_writers_commits_are_visible_and_acted_on_without_restart(store, open_store):
    a = store
    b = open_store()
    # A projection that does not re-read: what B would be if it answered from memory.
    stale = pinned_store(open_store())
    id = a.create(make_request()).workload_id
    # B never saw the admission, yet reads it from the store.
    with pytest.raises(WorkloadError) as missing:
        stale.get(id)
    assert missing.value.code == "WORKLOAD_NOT_FOUND", "the projection alone is stale"
    assert b.get(id).state == WorkloadState.READY
    assert len(b.list("t", "app")) == 1
    # A claims; B's claim decides on the committed claim, not its own view.
    claim = a.claim(id, "worker-a", CAPABILITIES, now=11, lease_ms=10_000)
    with pytest.raises(WorkloadError) as refused:
        b.claim(id, "worker-b", CAPABILITIES, now=11, lease_ms=10_000)
    assert refused.value.code == "WORKLOAD_NOT_READY"
    # A transition committed through A is what B fences against.
    b.start(id, claim.claim_id, "worker-a", claim.fencing_token, now=12)
    assert a.get(id).state == WorkloadState.RUNNING
    # A writer that has seen nothing replays an admission A committed, by key, from the
    # store.
    c = open_store()
    replayed, created = c.admit(make_request())
    assert not created
    assert replayed.workload_id == id


def _set_definition_id(request):
    request.definition_id = "other"


def _set_definition_revision(request):
    request.definition_revision = "r2"


def _set_environment(request):
    request.environment = "staging"


def _set_input(request):
    request.input = {"a": 1, "b": 3}


def _add_capability(request):
    request.capability_snapshot = request.capability_snapshot | {"sms:send"}


def _add_connection_scope(request):
    request.connection_scopes = request.connection_scopes | {"crm"}


def _set_priority(request):
    request.priority = 5


def _set_max_attempts(request):
    request.retry_policy = msgspec.structs.replace(request.retry_policy, max_attempts=9)


def _drop_retry_on_worker_failure(request):
    request.retry_policy = msgspec.structs.replace(
        request.retry_policy, retry_on=request.retry_policy.retry_on - {"worker_failure"}
    )


def _set_execution_timeout(request):
    request.timeouts = msgspec.structs.replace(request.timeouts, execution_ms=60_000)


def _drop_a_dependency(request):
    request.dependencies.pop()


def _set_not_before(request):
    request.not_before = 5_000


MUTATIONS = [
    ("definition_id", _set_definition_id),
    ("definition_revision", _set_definition_revision),
    ("environment", _set_environment),
    ("input", _set_input),
    ("capability_snapshot", _add_capability),
    ("connection_scopes", _add_connection_scope),
    ("priority", _set_priority),
    ("retry_policy", _set_max_attempts),
    ("retry_policy", _drop_retry_on_worker_failure),
    ("timeouts", _set_execution_timeout),
    ("dependencies", _drop_a_dependency),
    ("not_before", _set_not_before),
]


def test_a_replay_matches_only_an_equivalent_request_and_names_every_conflicting_field(
    store, open_store
):
    # The reference names dependencies "w1" and "w2" that do not exist; this port refuses a
    # dependency on missing work at admission (issue 9, point 2), so they are admitted first.
    w1, w2 = (store.create(make_request(idempotency_key=key)).workload_id for key in ("w1", "w2"))
    original = make_request(
        input={"a": 1, "b": 2},
        dependencies=[
            WorkloadDependency(workload_id=w1, required_state=WorkloadState.SUCCEEDED),
            WorkloadDependency(workload_id=w2, required_state=WorkloadState.SUCCEEDED),
        ],
    )
    first = store.create(original.model_copy(deep=True))

    # Equivalent after normalization: member order, dependency order, the defaults written
    # out, and provenance that does not change what runs.
    equivalent = original.model_copy(deep=True)
    equivalent.input = {"b": 2, "a": 1}
    equivalent.dependencies.reverse()
    equivalent.retry_policy = WorkloadRetryPolicy()
    equivalent.timeouts = WorkloadTimeouts()
    equivalent.priority = 0
    equivalent.trigger = "retried-by-client"
    equivalent.session_id = "another-session"
    equivalent.created_at = 99
    replayed, created = store.admit(equivalent)
    assert not created
    assert replayed.workload_id == first.workload_id

    for field, mutate in MUTATIONS:
        request = original.model_copy(deep=True)
        mutate(request)
        with pytest.raises(WorkloadError) as refused:
            store.admit(request)
        assert refused.value.code == "IDEMPOTENCY_KEY_REUSED", field
        assert refused.value.details is not None, field
        assert refused.value.details["fields"] == [field], field

    # Several at once are all named.
    request = original.model_copy(deep=True)
    request.priority = 1
    request.environment = "staging"
    with pytest.raises(WorkloadError) as refused:
        store.admit(request)
    assert refused.value.details is not None
    assert refused.value.details["fields"] == ["environment", "priority"]

    # After a restart: the same answers from the committed record.
    store.close()
    reopened = open_store()
    assert not reopened.admit(original.model_copy(deep=True))[1]
    changed = original.model_copy(deep=True)
    changed.retry_policy = msgspec.structs.replace(changed.retry_policy, initial_delay_ms=5)
    with pytest.raises(WorkloadError) as refused:
        reopened.admit(changed)
    assert refused.value.code == "IDEMPOTENCY_KEY_REUSED"
    assert len(reopened.list("t", "app")) == 3, "nothing was created"  # w1, w2 and the work


def test_concurrent_conflicting_admissions_admit_one_and_refuse_the_other(new_target, open_store):
    for round in range(10):
        target = new_target(f"admission-race-{round}")
        stores = [open_store(target), open_store(target)]

        def admit(store, priority):
            request = make_request(priority=priority)

            def attempt():
                try:
                    workload, created = store.admit(request)
                except WorkloadError as error:
                    return error
                return (workload.priority, created)

            return attempt

        outcomes = run_concurrently(*(admit(store, i) for i, store in enumerate(stores)))
        admitted = sum(1 for o in outcomes if isinstance(o, tuple) and o[1] is True)
        refused = sum(
            1
            for o in outcomes
            if isinstance(o, WorkloadError) and o.code == "IDEMPOTENCY_KEY_REUSED"
        )
        assert (admitted, refused) == (1, 1), f"round {round}: {outcomes!r}"
