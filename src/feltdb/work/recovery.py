"""What follows an attempt that failed, timed out or lost its worker, as pure edits of a
loaded ``Workload``: the retry decision applied (:func:`apply_retry_decision`, the one
place it takes effect), deadlines enforced, lost leases recovered, spent budgets
dead-lettered. Pure, as :mod:`feltdb.work.lifecycle` is.
"""

from __future__ import annotations

from feltdb.records.workload import Workload
from feltdb.work.events import deadline_evidence
from feltdb.work.retry import (
    RetryDecision,
    attempt_budget,
    deadline_decision,
    recovery_decision,
)
from feltdb.work.states import (
    HELD_STATES,
    AttemptStatus,
    WorkloadState,
)
from feltdb.work.transitions import transition

RECOVERABLE_STATES = HELD_STATES | {WorkloadState.CANCELLATION_REQUESTED}
"""States whose lease expiry ``recover_expired`` acts on."""


def budget_exhausted(workload: Workload) -> bool:
    """A ``READY`` workload that has used its attempt budget must not be claimed again."""
    return workload.state is WorkloadState.READY and workload.attempt_count >= attempt_budget(
        workload
    )


def dead_letter_exhausted(workload: Workload, now: int) -> None:
    """Dead-letter ready work whose budget is spent (instead of claiming it)."""
    transition(
        workload,
        WorkloadState.DEAD_LETTER,
        "feltdb.claim",
        now,
        {
            "reason": "attempt_budget_exhausted",
            "attempts_used": str(workload.attempt_count),
            "attempt_budget": str(attempt_budget(workload)),
        },
    )


def apply_retry_decision(workload: Workload, decision: RetryDecision, now: int) -> None:
    """Move ``workload`` (failed, timed out or recovering) to ``READY`` or ``DEAD_LETTER`` as
    ``decision`` says: the one place a retry decision takes effect.
    """
    evidence = {"decision": decision.reason} if decision.recorded else None
    if not decision.retry:
        transition(workload, WorkloadState.DEAD_LETTER, decision.actor, now, evidence)
        return
    if decision.counted:
        workload.retry_count += 1
    if decision.delay_ms is not None:
        workload.next_attempt_at = now + decision.delay_ms // 1000
    transition(workload, WorkloadState.READY, decision.actor, now, evidence)


def end_held_attempt(
    workload: Workload, status: AttemptStatus, now: int, error: str | None
) -> None:
    """End the attempt in progress of held work with ``status`` (and ``error``, if any)."""
    # A Ready workload has no attempt in progress: the last attempt's recorded outcome is
    # not this timeout's to overwrite.
    if workload.state in HELD_STATES and workload.attempts:
        attempt = workload.attempts[-1]
        attempt.status = status
        attempt.ended_at = now
        if error is not None:
            attempt.error = error


def time_out_past_deadline(workload: Workload, deadline: str, at: int, now: int) -> None:
    """Time out work past ``deadline`` (which fell at ``at``): the attempt ends timed out,
    and the policy decides ``READY`` or ``DEAD_LETTER``.
    """
    lost = workload.current_claim
    end_held_attempt(workload, AttemptStatus.TIMED_OUT, now, f"timeout: {deadline} deadline passed")
    workload.current_claim = None
    evidence = deadline_evidence(deadline, at, lost)
    transition(workload, WorkloadState.TIMED_OUT, "feltdb.deadline", now, evidence)
    apply_retry_decision(workload, deadline_decision(workload, deadline), now)


def lease_lapsed(workload: Workload, now: int) -> bool:
    """Whether ``workload`` is held under a lease that has expired at ``now``."""
    return (
        workload.current_claim is not None
        and workload.current_claim.expires_at <= now
        and workload.state in RECOVERABLE_STATES
    )


def recover(workload: Workload, now: int) -> None:
    """Recover work whose worker was lost (its lease expired): the attempt is recorded as
    lost; requested cancellation completes; otherwise the policy decides ``READY`` or
    ``DEAD_LETTER``.
    """
    lost = workload.current_claim
    workload.current_claim = None
    if workload.attempts:
        attempt = workload.attempts[-1]
        attempt.status = AttemptStatus.WORKER_LOST
        attempt.ended_at = now
        attempt.error = "worker_lost: claim lease expired"
    evidence = {
        "recovery_reason": "lease_expired",
        "attempts_used": str(workload.attempt_count),
        "attempt_budget": str(attempt_budget(workload)),
    }
    if lost is not None:
        evidence["claim_id"] = lost.claim_id
        evidence["worker_id"] = lost.worker_id
        evidence["lease_expired_at"] = str(lost.expires_at)
    if workload.attempts:
        evidence["attempt_id"] = workload.attempts[-1].attempt_id
    if workload.state is WorkloadState.CANCELLATION_REQUESTED:
        transition(workload, WorkloadState.CANCELLED, "feltdb.recovery", now, evidence)
        return
    transition(workload, WorkloadState.RECOVERING, "feltdb.recovery", now, evidence)
    apply_retry_decision(workload, recovery_decision(workload), now)
