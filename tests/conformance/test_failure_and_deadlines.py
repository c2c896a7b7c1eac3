"""Failure reports and deadlines (the reference's PR 2 tests).

A worker's failure report is claimed, fenced and decided by policy; deadlines are enforced
from committed timestamps, are versioned with the record, and race safely.
"""

from __future__ import annotations

import msgspec
import pytest
from support.factories import CAPABILITIES, make_request

from feltdb import (
    DEADLINE_CONTRACT_VERSION,
    DURABLE_WORK_COLLECTION,
    AttemptStatus,
    WorkloadError,
    WorkloadState,
    deadline_breach,
)


def version_of(store, id):
    """The committed document version of workload ``id``."""
    return store.db.get_row(DURABLE_WORK_COLLECTION, id).version


@pytest.fixture
def claimed(new_target, open_store):
    """The reference's ``claimed(name, policy)``: a store of its own holding the
    fixture request (edited by ``policy``), claimed by worker ``a`` at 11.

    Returns ``(store, id, claim)``.
    """

    def make(name, policy=None):
        store = open_store(new_target(name))
        request = make_request()
        if policy is not None:
            policy(request)
        id = store.create(request).workload_id
        claim = store.claim(id, "a", CAPABILITIES, now=11, lease_ms=10_000)
        return store, id, claim

    return make


def test_a_worker_reports_failure_from_claimed_fenced_and_by_policy(claimed):
    # Could not start: a known failure before any effect, retried by kind.
    store, id, claim = claimed("fail-claimed")
    state = store.fail(
        id,
        claim.claim_id,
        "a",
        claim.fencing_token,
        "transient_connection",
        "no route",
        now=12,
        effect=None,
    )
    assert state == WorkloadState.READY
    w = store.get(id)
    failed = next(e for e in w.execution_history if e.to == WorkloadState.FAILED)
    assert failed.evidence["effect"] == "none", "never started, so no effect"
    assert w.attempts[0].status == AttemptStatus.FAILED
    # The identical report again (lost response) replays and commits nothing.
    version = version_of(store, id)
    assert (
        store.fail(
            id,
            claim.claim_id,
            "a",
            claim.fencing_token,
            "transient_connection",
            "no route",
            now=13,
            effect=None,
        )
        == WorkloadState.READY
    )
    assert version_of(store, id) == version
    # A different report from the same attempt is answered by its fence.
    with pytest.raises(WorkloadError) as refused:
        store.fail(
            id,
            claim.claim_id,
            "a",
            claim.fencing_token,
            "timeout",
            "other",
            now=13,
            effect=None,
        )
    assert refused.value.code == "WORKLOAD_CLAIM_INVALID"
    # So is a completion: the failure stands.
    with pytest.raises(WorkloadError) as refused:
        store.complete(id, claim.claim_id, "a", claim.fencing_token, "r", None, [], 1, now=13)
    assert refused.value.code == "WORKLOAD_CLAIM_INVALID"
    # Another worker's claim fences the old attempt out.
    next_claim = store.claim(id, "b", CAPABILITIES, now=14, lease_ms=10_000)
    with pytest.raises(WorkloadError) as refused:
        store.fail(
            id,
            claim.claim_id,
            "a",
            claim.fencing_token,
            "timeout",
            "late",
            now=15,
            effect=None,
        )
    assert refused.value.code == "WORKLOAD_STALE_FENCE"
    current = store.get(id).current_claim
    assert current is not None
    assert current.claim_id == next_claim.claim_id


def test_failure_policy_decides_retry_and_an_unknown_effect_is_decided_like_a_lost_worker(
    claimed,
):
    # A kind the policy does not retry dead-letters.
    store, id, claim = claimed("fail-kind")
    store.start(id, claim.claim_id, "a", claim.fencing_token, now=12)
    assert (
        store.fail(
            id,
            claim.claim_id,
            "a",
            claim.fencing_token,
            "validation",
            "bad input",
            now=13,
            effect="none",
        )
        == WorkloadState.DEAD_LETTER
    )
    assert store.get(id).execution_history[-1].evidence["decision"] == "failure_kind_not_retryable"

    # A retryable kind with an unknown effect, under a policy that does not re-run lost
    # work: not retried automatically.
    def without_worker_failure(request):
        request.retry_policy = msgspec.structs.replace(
            request.retry_policy, retry_on={"timeout", "transient_connection"}
        )

    store, id, claim = claimed("fail-unknown", without_worker_failure)
    store.start(id, claim.claim_id, "a", claim.fencing_token, now=12)
    assert (
        store.fail(
            id,
            claim.claim_id,
            "a",
            claim.fencing_token,
            "timeout",
            "charge sent, no answer",
            now=13,
            effect="unknown",
        )
        == WorkloadState.DEAD_LETTER
    )
    w = store.get(id)
    assert w.execution_history[-1].evidence["decision"] == "effect_unknown_not_retryable"
    # An operator can still re-arm it, with a reason.
    store.retry(id, "operator", now=14, reason="verified: not charged")
    assert store.get(id).state == WorkloadState.READY

    # The same report under a policy that re-runs lost work is retried.
    store, id, claim = claimed("fail-unknown-retry")
    store.start(id, claim.claim_id, "a", claim.fencing_token, now=12)
    assert (
        store.fail(
            id,
            claim.claim_id,
            "a",
            claim.fencing_token,
            "validation",
            "x",
            now=13,
            effect="unknown",
        )
        == WorkloadState.READY
    )
    # An invalid effect is refused before anything changes.
    with pytest.raises(WorkloadError) as refused:
        store.fail(id, "c", "a", 9, "x", "y", now=14, effect="maybe")
    assert refused.value.code == "WORKLOAD_INVALID"

    # The attempt budget bounds retries.
    def two_attempts(request):
        request.retry_policy = msgspec.structs.replace(request.retry_policy, max_attempts=2)

    store, id, claim = claimed("fail-budget", two_attempts)
    assert (
        store.fail(id, claim.claim_id, "a", claim.fencing_token, "timeout", "x", now=12)
        == WorkloadState.READY
    )
    next_at = store.get(id).next_attempt_at
    assert next_at is not None
    claim = store.claim(id, "a", CAPABILITIES, now=next_at, lease_ms=10_000)
    assert (
        store.fail(id, claim.claim_id, "a", claim.fencing_token, "timeout", "x", now=next_at)
        == WorkloadState.DEAD_LETTER
    )
    assert store.get(id).execution_history[-1].evidence["decision"] == "attempt_budget_exhausted"


def test_failure_racing_completion_commits_exactly_one_outcome(claimed):
    for completion_first in [True, False]:
        store, id, claim = claimed(f"race-{completion_first}")
        store.start(id, claim.claim_id, "a", claim.fencing_token, now=12)

        def complete(s, id=id, claim=claim):
            s.complete(id, claim.claim_id, "a", claim.fencing_token, "r", None, [], 1, now=13)

        def fail(s, id=id, claim=claim):
            s.fail(id, claim.claim_id, "a", claim.fencing_token, "timeout", "x", now=13)

        first_call, second_call = (complete, fail) if completion_first else (fail, complete)
        first_call(store)  # the first report commits
        with pytest.raises(WorkloadError) as second:
            second_call(store)
        assert second.value.code == "WORKLOAD_CLAIM_INVALID"
        w = store.get(id)
        assert w.state == (WorkloadState.SUCCEEDED if completion_first else WorkloadState.READY)
        assert len(w.attempts) == 1


def test_deadlines_are_enforced_from_committed_timestamps_and_race_safely(
    claimed, new_target, open_store
):
    # execution: a heartbeat inside the deadline keeps the attempt; after it, every worker
    # call is refused and the attempt is timed out, once.
    def execution_deadline(request):
        request.timeouts = msgspec.structs.replace(request.timeouts, execution_ms=5_000)

    store, id, claim = claimed("deadline-exec", execution_deadline)
    store.start(id, claim.claim_id, "a", claim.fencing_token, now=12)
    store.heartbeat(id, claim.claim_id, "a", claim.fencing_token, now=16, extend_ms=10_000)
    assert store.enforce_deadlines(16) == []
    with pytest.raises(WorkloadError) as refused:
        store.complete(id, claim.claim_id, "a", claim.fencing_token, "late", None, [], 1, now=17)
    assert refused.value.code == "WORKLOAD_TIMED_OUT"
    assert refused.value.details is not None
    assert refused.value.details["deadline"] == "execution"
    w = store.get(id)
    assert w.state == WorkloadState.READY, "timeout is retryable by default"
    assert w.attempts[0].status == AttemptStatus.TIMED_OUT
    assert w.result is None, "a late completion never lands"
    assert store.enforce_deadlines(30) == [], "timed out once"

    # heartbeat: the gap since the last heartbeat; a heartbeat that commits first moves the
    # deadline, the recovery pass after it changes nothing.
    def heartbeat_deadline(request):
        request.timeouts = msgspec.structs.replace(request.timeouts, heartbeat_ms=3_000)

    store, id, claim = claimed("deadline-heartbeat", heartbeat_deadline)
    store.start(id, claim.claim_id, "a", claim.fencing_token, now=12)
    store.heartbeat(id, claim.claim_id, "a", claim.fencing_token, now=13, extend_ms=10_000)
    assert store.enforce_deadlines(15) == []
    assert store.enforce_deadlines(16) == [id]
    with pytest.raises(WorkloadError) as refused:
        store.heartbeat(id, claim.claim_id, "a", claim.fencing_token, now=16, extend_ms=10_000)
    assert refused.value.code == "WORKLOAD_CLAIM_INVALID", "the timed-out claim is gone"

    # claim: claimed but never started; not retried when the policy says so.
    def claim_deadline(request):
        request.timeouts = msgspec.structs.replace(request.timeouts, claim_ms=2_000)
        request.retry_policy = msgspec.structs.replace(
            request.retry_policy, retry_on={"worker_failure"}
        )

    store, id, claim = claimed("deadline-claim", claim_deadline)
    with pytest.raises(WorkloadError) as refused:
        store.start(id, claim.claim_id, "a", claim.fencing_token, now=13)
    assert refused.value.code == "WORKLOAD_TIMED_OUT"
    w = store.get(id)
    assert w.state == WorkloadState.DEAD_LETTER
    assert w.execution_history[-1].evidence["decision"] == "timeout_not_retryable"

    # queue and overall bound the work: dead-lettered, never retried, and a queued
    # workload's previous attempt is not rewritten.
    store = open_store(new_target("deadline-queue"))
    request = make_request()
    request.timeouts = msgspec.structs.replace(request.timeouts, queue_ms=4_000)
    id = store.create(request).workload_id
    with pytest.raises(WorkloadError) as refused:
        store.claim(id, "a", CAPABILITIES, now=14, lease_ms=10_000)
    assert refused.value.code == "WORKLOAD_TIMED_OUT"
    w = store.get(id)
    assert w.state == WorkloadState.DEAD_LETTER
    assert w.execution_history[-1].evidence["decision"] == "deadline_not_retryable"
    assert not w.attempts

    def overall_deadline(request):
        request.timeouts = msgspec.structs.replace(request.timeouts, overall_ms=10_000)

    store, id, claim = claimed("deadline-overall", overall_deadline)
    store.start(id, claim.claim_id, "a", claim.fencing_token, now=12)
    # Restart: the deadline comes from the committed record.
    store.close()
    store = open_store(new_target("deadline-overall"))
    assert store.enforce_deadlines(19) == []
    assert store.enforce_deadlines(20) == [id]
    assert store.get(id).state == WorkloadState.DEAD_LETTER


def test_deadlines_are_versioned_and_zero_is_refused(store):
    request = make_request()
    request.timeouts = msgspec.structs.replace(request.timeouts, queue_ms=0)
    with pytest.raises(WorkloadError) as refused:
        store.create(request)
    assert refused.value.code == "WORKLOAD_INVALID"
    # A record admitted before deadlines were enforced keeps its contract.
    request = make_request()
    request.timeouts = msgspec.structs.replace(request.timeouts, queue_ms=1_000)
    id = store.create(request).workload_id
    assert store.get(id).contract_version == DEADLINE_CONTRACT_VERSION
    # A copy at contract version 1: the committed record is left as it is.
    legacy = msgspec.structs.replace(store.get(id), contract_version=1)
    assert deadline_breach(legacy, 1_000_000) is None
    assert deadline_breach(store.get(id), 1_000_000) is not None
