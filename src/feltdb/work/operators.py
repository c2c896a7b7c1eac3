"""The requesters', operators' and approvers' part of a workload's life, as pure edits of a
loaded ``Workload``: cancellation, an operator's timeout and re-arm, approval decisions.
Pure, as :mod:`feltdb.work.lifecycle` is.
"""

from __future__ import annotations

from feltdb.auth import Subject
from feltdb.errors import ErrorCode, WorkloadError
from feltdb.records.workload import ApprovalDecision, Workload
from feltdb.work.lifecycle import fence
from feltdb.work.recovery import apply_retry_decision, end_held_attempt
from feltdb.work.retry import (
    operator_retries,
    operator_timeout_decision,
)
from feltdb.work.states import (
    HELD_STATES,
    ApprovalOutcome,
    AttemptStatus,
    WorkloadState,
)
from feltdb.work.transitions import transition

CANCEL_AT_ONCE = frozenset(
    {
        WorkloadState.READY,
        WorkloadState.CREATED,
        WorkloadState.AWAITING_APPROVAL,
        WorkloadState.FAILED,
        WorkloadState.DEAD_LETTER,
    }
)
"""States cancelled at once: no worker holds the work."""


def cancel(workload: Workload, actor: str, now: int) -> WorkloadState:
    """Cancel: at once when no worker holds the work, otherwise request it of the worker.
    A repeated request changes nothing.

    Raises:
        WorkloadError: ``WORKLOAD_TRANSITION_DENIED`` for finished work.
    """
    if workload.state in CANCEL_AT_ONCE:
        workload.current_claim = None
        transition(workload, WorkloadState.CANCELLED, actor, now)
    elif workload.state in HELD_STATES:
        transition(workload, WorkloadState.CANCELLATION_REQUESTED, actor, now)
    elif workload.state is not WorkloadState.CANCELLATION_REQUESTED:
        raise WorkloadError(
            ErrorCode.WORKLOAD_TRANSITION_DENIED,
            f"a {workload.state.value} workload cannot be cancelled",
            {"state": workload.state.value},
        )
    return workload.state


def confirm_cancel(
    workload: Workload, claim_id: str, worker: str, fencing_token: int, now: int
) -> None:
    """The holding worker confirms a requested cancellation; the attempt ends cancelled.

    Raises:
        WorkloadError: as :func:`fence`; ``WORKLOAD_TRANSITION_DENIED`` when cancellation was
            not requested.
    """
    fence(workload, claim_id, worker, fencing_token, now)
    if workload.state is not WorkloadState.CANCELLATION_REQUESTED:
        raise WorkloadError(ErrorCode.WORKLOAD_TRANSITION_DENIED, "cancellation was not requested")
    if workload.attempts:
        workload.attempts[-1].status = AttemptStatus.CANCELLED
        workload.attempts[-1].ended_at = now
    workload.current_claim = None
    transition(workload, WorkloadState.CANCELLED, worker, now)


def operator_timeout(workload: Workload, actor: str, now: int) -> WorkloadState:
    """An operator's explicit timeout of ready or held work; retried by the policy's
    ``timeout`` rule within the attempt budget, otherwise dead-lettered.

    Raises:
        WorkloadError: ``WORKLOAD_TRANSITION_DENIED`` in any other state.
    """
    if workload.state is not WorkloadState.READY and workload.state not in HELD_STATES:
        raise WorkloadError(
            ErrorCode.WORKLOAD_TRANSITION_DENIED,
            f"a {workload.state.value} workload cannot time out",
            {"state": workload.state.value},
        )
    end_held_attempt(workload, AttemptStatus.TIMED_OUT, now, None)
    workload.current_claim = None
    transition(workload, WorkloadState.TIMED_OUT, actor, now)
    apply_retry_decision(workload, operator_timeout_decision(workload), now)
    return workload.state


RETRYABLE_BY_OPERATOR = frozenset(
    {WorkloadState.FAILED, WorkloadState.DEAD_LETTER, WorkloadState.TIMED_OUT}
)


def operator_retry(workload: Workload, actor: str, now: int, reason: str | None) -> None:
    """An operator's re-arm: one more attempt, recorded with actor and reason, at most
    ``max_attempts`` times. Work never approved waits for a decision again.

    Raises:
        WorkloadError: ``WORKLOAD_TRANSITION_DENIED`` unless failed, dead-lettered or timed
            out; ``WORKLOAD_RETRY_EXHAUSTED`` when every operator retry is used.
    """
    if workload.state not in RETRYABLE_BY_OPERATOR:
        raise WorkloadError(
            ErrorCode.WORKLOAD_TRANSITION_DENIED,
            f"a {workload.state.value} workload is not retryable",
            {"state": workload.state.value},
        )
    previous = operator_retries(workload)
    if previous >= workload.retry_policy.max_attempts:
        raise WorkloadError(
            ErrorCode.WORKLOAD_RETRY_EXHAUSTED,
            "workload has used every operator retry its policy allows",
            {"operator_retries": previous},
        )
    workload.next_attempt_at = now
    workload.current_claim = None
    evidence = {
        "retry": "operator",
        "operator_retry": str(previous + 1),
        "attempt_budget": str(workload.retry_policy.max_attempts + previous + 1),
    }
    if reason is not None:  # the store passes a stripped reason, or None for a blank one
        evidence["reason"] = reason[:256]
    # A re-arm never stands in for approval.
    waiting = workload.approval is not None and not workload.approval.approved()
    transition(
        workload,
        WorkloadState.AWAITING_APPROVAL if waiting else WorkloadState.READY,
        actor,
        now,
        evidence,
    )


def decide(
    workload: Workload,
    decider: Subject,
    outcome: ApprovalOutcome,
    reason: str | None,
    grant_id: str,
    input_hash: str,
    now: int,
) -> ApprovalDecision:
    """Commit a decision on work awaiting approval (the policy checks come first).

    Raises:
        WorkloadError: ``WORKLOAD_CONFLICT`` when a decision is already committed;
            ``WORKLOAD_APPROVAL_NOT_ACTIONABLE`` when no longer awaiting approval.
    """
    approval = workload.approval
    if approval is None or approval.decision is not None:
        raise WorkloadError(
            ErrorCode.WORKLOAD_CONFLICT,
            "another writer committed a decision first; ask again for it",
        )
    if workload.state is not WorkloadState.AWAITING_APPROVAL:
        raise WorkloadError(
            ErrorCode.WORKLOAD_APPROVAL_NOT_ACTIONABLE,
            "the workload is no longer awaiting approval",
            {"state": workload.state.value},
        )
    decision = ApprovalDecision(
        outcome=outcome,
        decided_by=decider,
        decided_at=now,
        reason=reason[:512] if reason is not None else None,
        grant_id=grant_id,
        input_hash=input_hash,
    )
    approval.decision = decision
    evidence = {
        "decided_by": decider.id,
        "decider_kind": decider.kind.value,
        "grant_id": grant_id,
    }
    if decision.reason is not None:
        evidence["reason"] = decision.reason
    to = WorkloadState.READY if outcome is ApprovalOutcome.APPROVED else WorkloadState.REJECTED
    transition(workload, to, decider.id, now, evidence)
    return decision
