"""Temporal work eligibility: a workload may exist durably before it is executable.

Ported from the reference's "Temporal work eligibility" tests. Every test drives the real
store (creating, claiming, reopening the store) rather than asserting that a field exists.
"""

from __future__ import annotations

import pytest
from support.factories import CAPABILITIES, make_request

from feltdb import AttemptStatus, WorkloadError, WorkloadState


def scheduled(not_before: int):
    """The fixture request, not claimable before ``not_before``."""
    return make_request(not_before=not_before)


def test_scheduled_work_is_not_claimable_before_not_before(store):
    workload = store.create(scheduled(2_000))

    # Durable and Ready immediately: existing before it is executable is the whole point.
    assert workload.state == WorkloadState.READY
    assert workload.next_attempt_at == 2_000

    with pytest.raises(WorkloadError) as refused:
        store.claim(workload.workload_id, "worker", CAPABILITIES, now=1_999, lease_ms=10_000)
    assert refused.value.code == "WORKLOAD_NOT_YET_ELIGIBLE"
    assert "2000" in refused.value.message, (
        f"the refusal names the instant the worker should return at: {refused.value.message}"
    )

    # Refusing a claim is not a state change. Nothing executed.
    after = store.get(workload.workload_id)
    assert after.state == WorkloadState.READY
    assert after.attempt_count == 0
    assert not after.attempts
    assert after.current_claim is None


def test_scheduled_work_becomes_claimable_after_not_before(store):
    workload = store.create(scheduled(2_000))

    # The boundary belongs to the eligible side: at exactly `not_before` the workload is
    # claimable, so a worker polling on the second does not have to wait a further tick.
    claim = store.claim(workload.workload_id, "worker", CAPABILITIES, now=2_000, lease_ms=10_000)
    assert claim.worker_id == "worker"
    assert store.get(workload.workload_id).state == WorkloadState.CLAIMED


def test_scheduled_work_survives_restart_before_eligibility(store, open_store):
    id = store.create(scheduled(2_000)).workload_id
    store.close()

    # Restart the authority. The workload is still here, still Ready, still carrying its
    # eligibility, and still refused.
    reopened = open_store()
    recovered = reopened.get(id)
    assert recovered.state == WorkloadState.READY
    assert recovered.next_attempt_at == 2_000

    with pytest.raises(WorkloadError) as refused:
        reopened.claim(id, "worker", CAPABILITIES, now=1_999, lease_ms=10_000)
    assert refused.value.code == "WORKLOAD_NOT_YET_ELIGIBLE"


def test_scheduled_work_executes_after_restart(store, open_store):
    id = store.create(scheduled(2_000)).workload_id
    store.close()

    reopened = open_store()
    claim = reopened.claim(id, "worker", CAPABILITIES, now=2_001, lease_ms=10_000)
    reopened.start(id, claim.claim_id, "worker", claim.fencing_token, now=2_002)
    reopened.complete(
        id,
        claim.claim_id,
        "worker",
        claim.fencing_token,
        "result-scheduled",
        {"ok": True},
        [],
        1,
        now=2_003,
    )

    # And the outcome is durable across a second restart.
    again = open_store()
    finished = again.get(id)
    assert finished.state == WorkloadState.SUCCEEDED
    assert (finished.result.result_id if finished.result else None) == "result-scheduled"


def test_immediate_work_behavior_is_unchanged(store):
    # `make_request()` sets no `not_before`, which is what every caller did before this
    # field existed.
    workload = store.create(make_request())
    assert workload.next_attempt_at is None
    assert workload.is_eligible_at(workload.created_at)

    # Claimable at its own creation instant, with no waiting.
    store.claim(
        workload.workload_id,
        "worker",
        CAPABILITIES,
        now=workload.created_at,
        lease_ms=10_000,
    )


def test_multiple_workers_claim_temporally_eligible_work_once(store):
    id = store.create(scheduled(2_000)).workload_id

    # Both workers are polling and both see eligibility open at the same instant.
    # Exactly one wins.
    winner = store.claim(id, "worker-a", CAPABILITIES, now=2_000, lease_ms=10_000)
    with pytest.raises(WorkloadError) as loser:
        store.claim(id, "worker-b", CAPABILITIES, now=2_000, lease_ms=10_000)
    assert loser.value.code == "WORKLOAD_NOT_READY", (
        "the second worker is refused on state, not on time: the workload is claimed"
    )

    # And the loser cannot complete work it never owned.
    with pytest.raises(WorkloadError) as refused:
        store.complete(
            id,
            winner.claim_id,
            "worker-b",
            winner.fencing_token,
            "duplicate",
            None,
            [],
            1,
            now=2_001,
        )
    assert refused.value.code == "WORKLOAD_STALE_FENCE"
    assert store.get(id).attempt_count == 1


def test_retry_sets_next_eligibility_without_duplicate_execution(store):
    id = store.create(scheduled(2_000)).workload_id

    first = store.claim(id, "worker-a", CAPABILITIES, now=2_000, lease_ms=10_000)
    store.start(id, first.claim_id, "worker-a", first.fencing_token, now=2_001)
    state = store.fail(
        id,
        first.claim_id,
        "worker-a",
        first.fencing_token,
        "timeout",
        "upstream did not answer",
        now=2_002,
    )

    # Retry re-arms the same eligibility field creation used, so there is one temporal
    # concept rather than two competing ones.
    assert state == WorkloadState.READY
    backing_off = store.get(id)
    next_at = backing_off.next_attempt_at
    assert next_at is not None, "retry set eligibility"
    assert next_at > 2_002, f"backoff pushed eligibility into the future: {next_at}"

    with pytest.raises(WorkloadError) as early:
        store.claim(id, "worker-b", CAPABILITIES, now=next_at - 1, lease_ms=10_000)
    assert early.value.code == "WORKLOAD_NOT_YET_ELIGIBLE"

    second = store.claim(id, "worker-b", CAPABILITIES, now=next_at, lease_ms=10_000)
    assert second.fencing_token > first.fencing_token

    # The first attempt cannot land a result after the retry was handed on.
    with pytest.raises(WorkloadError) as stale:
        store.complete(
            id,
            first.claim_id,
            "worker-a",
            first.fencing_token,
            "stale",
            None,
            [],
            1,
            now=next_at,
        )
    assert stale.value.code == "WORKLOAD_STALE_FENCE"
    assert store.get(id).attempt_count == 2


def test_cancellation_before_not_before_prevents_execution(store, open_store):
    id = store.create(scheduled(2_000)).workload_id

    # Cancelling work that is durable but not yet executable is the whole reason to be
    # able to see it before it runs.
    assert store.cancel(id, "operator", now=1_500) == WorkloadState.CANCELLED

    # Eligibility arriving does not resurrect it.
    with pytest.raises(WorkloadError) as refused:
        store.claim(id, "worker", CAPABILITIES, now=2_001, lease_ms=10_000)
    assert refused.value.code == "WORKLOAD_NOT_READY"

    reopened = open_store()
    cancelled = reopened.get(id)
    assert cancelled.state == WorkloadState.CANCELLED
    assert not cancelled.attempts, "nothing ever executed"


def test_a_worker_dying_after_a_claim_returns_the_work_and_it_executes_once(store):
    id = store.create(make_request()).workload_id

    # Worker A claims a short lease, starts, and dies without completing.
    dead = store.claim(id, "worker-a", CAPABILITIES, now=10, lease_ms=1_000)
    store.start(id, dead.claim_id, "worker-a", dead.fencing_token, now=10)
    assert store.get(id).state == WorkloadState.RUNNING, (
        "the work was in flight when its worker died"
    )

    # The lease expiring is the only thing that can notice.
    recovered = store.recover_expired(12)
    assert recovered == [id]
    back = store.get(id)
    assert back.state == WorkloadState.READY, "returned to the pool"
    assert (back.attempts[-1].status if back.attempts else None) == AttemptStatus.WORKER_LOST, (
        "and the dead attempt is recorded as lost rather than erased"
    )

    # Worker B picks it up and finishes it.
    live = store.claim(id, "worker-b", CAPABILITIES, now=12, lease_ms=10_000)
    assert live.fencing_token > dead.fencing_token
    store.start(id, live.claim_id, "worker-b", live.fencing_token, now=13)
    store.complete(
        id,
        live.claim_id,
        "worker-b",
        live.fencing_token,
        "result-recovered",
        {"ok": True},
        [],
        1,
        now=14,
    )

    # Exactly one execution succeeded, and the dead worker cannot add another.
    finished = store.get(id)
    assert finished.state == WorkloadState.SUCCEEDED
    assert sum(1 for attempt in finished.attempts if attempt.status == AttemptStatus.SUCCEEDED) == 1
    # The dead worker cannot add a second result. Its claim was released by the recovery,
    # and completion released the successor's, so it is refused for having no claim at all
    # rather than a stale one.
    with pytest.raises(WorkloadError) as refused:
        store.complete(
            id,
            dead.claim_id,
            "worker-a",
            dead.fencing_token,
            "resurrected",
            None,
            [],
            1,
            now=15,
        )
    assert refused.value.code == "WORKLOAD_CLAIM_INVALID"


def test_a_recovered_workload_refuses_its_dead_worker_while_the_successor_still_holds_it(
    store,
):
    id = store.create(make_request()).workload_id

    dead = store.claim(id, "worker-a", CAPABILITIES, now=10, lease_ms=1_000)
    store.start(id, dead.claim_id, "worker-a", dead.fencing_token, now=10)
    store.recover_expired(12)
    live = store.claim(id, "worker-b", CAPABILITIES, now=12, lease_ms=10_000)

    # While the successor is mid-flight, the resurrected worker is refused on the fence
    # itself — the case a lease exists to decide.
    with pytest.raises(WorkloadError) as refused:
        store.complete(
            id,
            dead.claim_id,
            "worker-a",
            dead.fencing_token,
            "resurrected",
            None,
            [],
            1,
            now=13,
        )
    assert refused.value.code == "WORKLOAD_STALE_FENCE"
    assert store.get(id).state == WorkloadState.CLAIMED
    assert live.fencing_token > dead.fencing_token


def test_the_scheduler_skips_ineligible_work_rather_than_failing_on_it(store):
    early = store.create(make_request(idempotency_key="early", not_before=9_000))
    ready = store.create(make_request(idempotency_key="ready"))

    # The ineligible workload sorts first by id in some orderings and not others, so what
    # matters is that the scheduler never returns it and never fails because of it.
    # (An exception here is "an ineligible workload must not fail the whole pass".)
    claim = store.claim_next("t", "app", "worker", CAPABILITIES, now=1_000, lease_ms=10_000)
    assert claim is not None, "the eligible workload is still handed out"
    assert claim.workload_id == ready.workload_id
    assert store.get(early.workload_id).state == WorkloadState.READY
