"""What follows an attempt that failed, timed out or lost its worker, as decisions on a
loaded ``Workload``, each answering the decided workload (a new record): the retry
decision applied (:func:`apply_retry_decision`, the one place it takes effect), deadlines
enforced, lost leases recovered, spent budgets dead-lettered. Pure, as
:mod:`feltdb.work.lifecycle` is: nothing given is edited.
"""

from __future__ import annotations

from typing import Any

from feltdb.records.workload import Workload, WorkloadAttempt, WorkloadDependency
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
from feltdb.work.transitions import transition, with_last_attempt

RECOVERABLE_STATES = HELD_STATES | {WorkloadState.CANCELLATION_REQUESTED}
"""States whose lease expiry ``recover_expired`` acts on."""


def budget_exhausted(workload: Workload) -> bool:
    """A ``READY`` workload that has used its attempt budget must not be claimed again."""
    return workload.state is WorkloadState.READY and workload.attempt_count >= attempt_budget(
        workload
    )


def dead_letter_exhausted(workload: Workload, now: int) -> Workload:
    """Dead-letter ready work whose budget is spent (instead of claiming it)."""
    return transition(
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


def dead_letter_unmet(
    workload: Workload, dependency: WorkloadDependency, ended: WorkloadState, now: int
) -> Workload:
    """Dead-letter ready work (instead of claiming it) whose ``dependency`` rests in
    ``ended``, a state other than the one it awaits: the evidence names the dependency,
    the state it ended in and the one awaited.
    """
    return transition(
        workload,
        WorkloadState.DEAD_LETTER,
        "feltdb.claim",
        now,
        {
            "decision": "dependency_unmet",
            "dependency": dependency.workload_id,
            "dependency_state": ended.value,
            "awaited_state": dependency.required_state.value,
        },
    )


def apply_retry_decision(workload: Workload, decision: RetryDecision, now: int) -> Workload:
    """``workload`` (failed, timed out or recovering) moved to ``READY`` or ``DEAD_LETTER``
    as ``decision`` says: the one place a retry decision takes effect.
    """
    evidence = {"decision": decision.reason} if decision.recorded else None
    if not decision.retry:
        return transition(workload, WorkloadState.DEAD_LETTER, decision.actor, now, evidence)
    changes: dict[str, Any] = {}
    if decision.counted:
        changes["retry_count"] = workload.retry_count + 1
    if decision.delay_ms is not None:
        changes["next_attempt_at"] = now + decision.delay_ms // 1000
    return transition(workload, WorkloadState.READY, decision.actor, now, evidence, **changes)


def ended_held_attempt(
    workload: Workload, status: AttemptStatus, now: int, error: str | None
) -> list[WorkloadAttempt]:
    """``workload``'s attempts with the one in progress of held work ended with ``status``
    (and ``error``, if any).
    """
    # A Ready workload has no attempt in progress: the last attempt's recorded outcome is
    # not this timeout's to overwrite.
    if workload.state not in HELD_STATES or not workload.attempts:
        return workload.attempts
    if error is None:
        return with_last_attempt(workload, status=status, ended_at=now)
    return with_last_attempt(workload, status=status, ended_at=now, error=error)


def time_out_past_deadline(workload: Workload, deadline: str, at: int, now: int) -> Workload:
    """Time out work past ``deadline`` (which fell at ``at``): the attempt ends timed out,
    and the policy decides ``READY`` or ``DEAD_LETTER``.
    """
    error = f"timeout: {deadline} deadline passed"
    timed_out = transition(
        workload,
        WorkloadState.TIMED_OUT,
        "feltdb.deadline",
        now,
        deadline_evidence(deadline, at, workload.current_claim),
        attempts=ended_held_attempt(workload, AttemptStatus.TIMED_OUT, now, error),
        current_claim=None,
    )
    return apply_retry_decision(timed_out, deadline_decision(timed_out, deadline), now)


def lease_lapsed(workload: Workload, now: int) -> bool:
    """Whether ``workload`` is held under a lease that has expired at ``now``."""
    return (
        workload.current_claim is not None
        and workload.current_claim.expires_at <= now
        and workload.state in RECOVERABLE_STATES
    )


def recover(workload: Workload, now: int) -> Workload:
    """Recover work whose worker was lost (its lease expired): the attempt is recorded as
    lost; requested cancellation completes; otherwise the policy decides ``READY`` or
    ``DEAD_LETTER``.
    """
    lost = workload.current_claim
    changes: dict[str, Any] = {"current_claim": None}
    if workload.attempts:
        changes["attempts"] = with_last_attempt(
            workload,
            status=AttemptStatus.WORKER_LOST,
            ended_at=now,
            error="worker_lost: claim lease expired",
        )
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
        return transition(
            workload, WorkloadState.CANCELLED, "feltdb.recovery", now, evidence, **changes
        )
    recovering = transition(
        workload, WorkloadState.RECOVERING, "feltdb.recovery", now, evidence, **changes
    )
    return apply_retry_decision(recovering, recovery_decision(recovering), now)
