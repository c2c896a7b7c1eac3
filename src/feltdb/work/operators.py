"""The requesters', operators' and approvers' part of a workload's life, as decisions on a
loaded ``Workload``: cancellation, an operator's timeout and re-arm, approval decisions.
Pure, as :mod:`feltdb.work.lifecycle` is: each answers the decided workload, a new record.
"""

from __future__ import annotations

from msgspec.structs import replace

from feltdb.auth import Subject
from feltdb.errors import ErrorCode, WorkloadError
from feltdb.records.workload import ApprovalDecision, Workload
from feltdb.work.lifecycle import fence
from feltdb.work.outcome import Outcome
from feltdb.work.recovery import apply_retry_decision, ended_held_attempt
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
from feltdb.work.transitions import transition, with_last_attempt

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


def cancel(workload: Workload, actor: str, now: int) -> Workload:
    """Cancel: at once when no worker holds the work, otherwise request it of the worker.
    A repeated request changes nothing.

    Raises:
        WorkloadError: ``WORKLOAD_TRANSITION_DENIED`` for finished work.
    """
    if workload.state in CANCEL_AT_ONCE:
        return transition(workload, WorkloadState.CANCELLED, actor, now, current_claim=None)
    if workload.state in HELD_STATES:
        return transition(workload, WorkloadState.CANCELLATION_REQUESTED, actor, now)
    if workload.state is not WorkloadState.CANCELLATION_REQUESTED:
        raise WorkloadError(
            ErrorCode.WORKLOAD_TRANSITION_DENIED,
            f"a {workload.state.value} workload cannot be cancelled",
            {"state": workload.state.value},
        )
    return workload


def confirm_cancel(
    workload: Workload, claim_id: str, worker: str, fencing_token: int, now: int
) -> Workload:
    """The holding worker confirms a requested cancellation; the attempt ends cancelled.

    Raises:
        WorkloadError: as :func:`fence`; ``WORKLOAD_TRANSITION_DENIED`` when cancellation was
            not requested.
    """
    fence(workload, claim_id, worker, fencing_token, now)
    if workload.state is not WorkloadState.CANCELLATION_REQUESTED:
        raise WorkloadError(ErrorCode.WORKLOAD_TRANSITION_DENIED, "cancellation was not requested")
    attempts = workload.attempts
    if attempts:
        attempts = with_last_attempt(workload, status=AttemptStatus.CANCELLED, ended_at=now)
    return transition(
        workload, WorkloadState.CANCELLED, worker, now, attempts=attempts, current_claim=None
    )


def operator_timeout(workload: Workload, actor: str, now: int) -> Workload:
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
    timed_out = transition(
        workload,
        WorkloadState.TIMED_OUT,
        actor,
        now,
        attempts=ended_held_attempt(workload, AttemptStatus.TIMED_OUT, now, None),
        current_claim=None,
    )
    return apply_retry_decision(timed_out, operator_timeout_decision(timed_out), now)


RETRYABLE_BY_OPERATOR = frozenset(
    {WorkloadState.FAILED, WorkloadState.DEAD_LETTER, WorkloadState.TIMED_OUT}
)


def operator_retry(workload: Workload, actor: str, now: int, reason: str | None) -> Workload:
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
    evidence = {
        "retry": "operator",
        "operator_retry": str(previous + 1),
        "attempt_budget": str(workload.retry_policy.max_attempts + previous + 1),
    }
    if reason is not None:  # the store passes a stripped reason, or None for a blank one
        evidence["reason"] = reason[:256]
    # A re-arm never stands in for approval.
    waiting = workload.approval is not None and not workload.approval.approved()
    return transition(
        workload,
        WorkloadState.AWAITING_APPROVAL if waiting else WorkloadState.READY,
        actor,
        now,
        evidence,
        next_attempt_at=now,
        current_claim=None,
    )


def decide(
    workload: Workload,
    decider: Subject,
    outcome: ApprovalOutcome,
    reason: str | None,
    grant_id: str,
    input_hash: str,
    now: int,
) -> Outcome[ApprovalDecision]:
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
    evidence = {
        "decided_by": str(decider),
        "decider_kind": decider.kind.value,
        "grant_id": grant_id,
    }
    if decision.reason is not None:
        evidence["reason"] = decision.reason
    to = WorkloadState.READY if outcome is ApprovalOutcome.APPROVED else WorkloadState.REJECTED
    decided = transition(
        workload, to, str(decider), now, evidence, approval=replace(approval, decision=decision)
    )
    return Outcome(decided, decision)
