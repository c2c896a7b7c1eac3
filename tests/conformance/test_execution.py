"""Execution: retries, completion replay, resumption, cancellation and scheduling, ported."""

from __future__ import annotations

import msgspec
import pytest
from support.factories import CAPABILITIES, make_request

from feltdb import WorkloadDependency, WorkloadError, WorkloadState


def test_retry_dead_letter_checkpoint_and_secret_safety(store):
    request = make_request()
    request.retry_policy = msgspec.structs.replace(request.retry_policy, max_attempts=1)
    w = store.create(request)
    claim = store.claim(w.workload_id, "a", CAPABILITIES, now=11, lease_ms=10_000)
    store.start(w.workload_id, claim.claim_id, "a", claim.fencing_token, now=12)
    with pytest.raises(WorkloadError) as refused:
        store.checkpoint(
            w.workload_id, claim.claim_id, "a", claim.fencing_token, {"password": "bad"}, now=13
        )
    assert refused.value.code == "WORKLOAD_SECRET_REJECTED"
    assert (
        store.fail(
            w.workload_id,
            claim.claim_id,
            "a",
            claim.fencing_token,
            "worker_failure",
            "crashed",
            now=13,
        )
        == WorkloadState.DEAD_LETTER
    )


def test_a_repeated_completion_replays_only_for_the_claim_and_output_that_produced_it(store):
    w = store.create(make_request())
    workload_id = w.workload_id
    # Worker a loses its lease; worker b completes the work.
    lost = store.claim(workload_id, "a", CAPABILITIES, now=11, lease_ms=1000)
    store.start(workload_id, lost.claim_id, "a", lost.fencing_token, now=11)
    store.recover_expired(now=13)
    won = store.claim(workload_id, "b", CAPABILITIES, now=13, lease_ms=10_000)
    store.start(workload_id, won.claim_id, "b", won.fencing_token, now=13)
    output = {"sent": 1}
    first = store.complete(
        workload_id, won.claim_id, "b", won.fencing_token, "r1", output, [], 1, now=14
    )
    # The reporting attempt retrying after a lost response gets the same result.
    replay = store.complete(
        workload_id, won.claim_id, "b", won.fencing_token, "r1", output, [], 1, now=15
    )
    assert replay.output_hash == first.output_hash
    assert replay.attempt_id == first.attempt_id
    # The same result id with a different output is a conflict, not a replay.
    with pytest.raises(WorkloadError) as refused:
        store.complete(
            workload_id, won.claim_id, "b", won.fencing_token, "r1", {"sent": 2}, [], 1, now=15
        )
    assert refused.value.code == "WORKLOAD_RESULT_CONFLICT"
    # A stale worker naming the winner's result id learns nothing landed for it.
    with pytest.raises(WorkloadError) as refused:
        store.complete(
            workload_id, lost.claim_id, "a", lost.fencing_token, "r1", output, [], 1, now=15
        )
    assert refused.value.code == "WORKLOAD_RESULT_CONFLICT"
    committed = store.get(workload_id)
    assert committed.state == WorkloadState.SUCCEEDED
    assert committed.result is not None
    assert committed.result.output == output
    assert committed.result.produced_by == "b"


def test_a_resumed_attempt_reads_the_input_and_the_lost_attempts_checkpoints_through_its_fence(
    store,
):
    w = store.create(make_request())
    workload_id = w.workload_id
    lost = store.claim(workload_id, "a", CAPABILITIES, now=11, lease_ms=1000)
    store.start(workload_id, lost.claim_id, "a", lost.fencing_token, now=11)
    store.checkpoint(
        workload_id,
        lost.claim_id,
        "a",
        lost.fencing_token,
        {"step": "reserve", "status": "done"},
        now=11,
    )
    store.recover_expired(now=13)
    following = store.claim(workload_id, "b", CAPABILITIES, now=13, lease_ms=10_000)
    context = store.execution_context(
        workload_id,
        following.claim_id,
        "b",
        following.fencing_token,
        now=13,
        secret_references=[],
    )
    assert context.input == {"id": 1}
    assert len(context.checkpoints) == 1
    assert context.checkpoints[0].state["step"] == "reserve"
    assert context.checkpoints[0].attempt_id != context.attempt_id, "written by the lost attempt"
    # The lost worker's fence reads nothing.
    with pytest.raises(WorkloadError) as refused:
        store.execution_context(
            workload_id, lost.claim_id, "a", lost.fencing_token, now=13, secret_references=[]
        )
    assert refused.value.code == "WORKLOAD_STALE_FENCE"


def test_cancellation_race_and_duplicate_completion_are_deterministic(store):
    w = store.create(make_request())
    claim = store.claim(w.workload_id, "a", CAPABILITIES, now=11, lease_ms=10_000)
    store.start(w.workload_id, claim.claim_id, "a", claim.fencing_token, now=12)
    assert store.cancel(w.workload_id, "user", now=13) == WorkloadState.CANCELLATION_REQUESTED
    with pytest.raises(WorkloadError) as refused:
        store.complete(
            w.workload_id, claim.claim_id, "a", claim.fencing_token, "r", None, [], 1, now=14
        )
    assert refused.value.code == "WORKLOAD_TRANSITION_DENIED"
    store.confirm_cancel(w.workload_id, claim.claim_id, "a", claim.fencing_token, now=14)
    assert store.get(w.workload_id).state == WorkloadState.CANCELLED


def test_scheduler_respects_dependencies_and_tenant_application_isolation(store):
    parent = store.create(make_request())
    child = make_request()
    child.idempotency_key = "child"
    child.dependencies = [
        WorkloadDependency(workload_id=parent.workload_id, required_state=WorkloadState.SUCCEEDED)
    ]
    child = store.create(child)
    assert len(store.list("other", "app")) == 0
    first = store.claim_next("t", "app", "worker", CAPABILITIES, now=11, lease_ms=10_000)
    assert first is not None
    assert first.workload_id == parent.workload_id
    assert first.workload_id != child.workload_id
