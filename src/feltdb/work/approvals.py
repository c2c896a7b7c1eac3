"""The approval gate's rules: valid policies, who may decide, and answers to re-decisions."""

from __future__ import annotations

from feltdb.auth import Subject
from feltdb.errors import ErrorCode, WorkloadError
from feltdb.records.summary import WorkloadSummary
from feltdb.records.workload import ApprovalDecision, ApprovalPolicy, Workload
from feltdb.work.states import ApprovalOutcome, WorkloadState

APPROVER_KINDS = frozenset({"human", "service"})
"""The only kinds of subject that may ever decide. Agents, workers, workloads and
connections never approve: an agent's output is not a person's or a service's consent."""


def validate_approval_policy(policy: ApprovalPolicy) -> None:
    """Refuse a policy that names no permitted kind, a kind that may never decide, or an
    approver of a kind the policy does not permit.

    Raises:
        WorkloadError: ``WORKLOAD_INVALID``.
    """
    if not policy.approver_kinds or not policy.approver_kinds <= APPROVER_KINDS:
        raise WorkloadError(
            ErrorCode.WORKLOAD_INVALID,
            'approval.approver_kinds must be one or both of "human" and "service"',
            {"fields": ["approval.approver_kinds"]},
        )
    if any(subject.kind.value not in policy.approver_kinds for subject in policy.approvers):
        raise WorkloadError(
            ErrorCode.WORKLOAD_INVALID,
            "every listed approver must be of a permitted approver kind",
            {"fields": ["approval.approvers"]},
        )


def may_decide(workload: Workload | WorkloadSummary, decider: Subject) -> bool:
    """Whether ``decider`` may decide ``workload``'s approval now: it awaits a decision and
    :func:`ensure_approver_permitted` lets ``decider`` make it (what an approval inbox
    offers; the store decides again when the decision is made).
    """
    approval = workload.approval
    if workload.state is not WorkloadState.AWAITING_APPROVAL or approval is None:
        return False
    try:
        ensure_approver_permitted(approval.policy, workload.requested_by, decider)
    except WorkloadError:
        return False
    return True


def ensure_approver_permitted(
    policy: ApprovalPolicy, requested_by: Subject, decider: Subject
) -> None:
    """Whether ``decider`` may decide under ``policy``: a permitted kind, listed when the
    policy lists approvers, and never the requester itself.

    Raises:
        WorkloadError: ``WORKLOAD_APPROVER_NOT_PERMITTED`` saying which rule refused.
    """
    if decider.kind.value not in policy.approver_kinds:
        reason = "this kind of subject may not approve this workload"
    elif policy.approvers and decider not in policy.approvers:
        reason = "the decider is not one of this workload's approvers"
    elif decider == requested_by:
        reason = "the requester may not decide its own work"
    else:
        return
    raise WorkloadError(ErrorCode.WORKLOAD_APPROVER_NOT_PERMITTED, reason)


def decided_answer(
    decided: ApprovalDecision, outcome: ApprovalOutcome
) -> tuple[ApprovalDecision, bool]:
    """The answer to a decision on work already decided: the same outcome replays the
    committed decision (``True``: a replay); the opposite one is refused.

    Raises:
        WorkloadError: ``WORKLOAD_APPROVAL_DECIDED`` with the committed decision's outcome,
            decider and time in ``details``.
    """
    if decided.outcome is outcome:
        return decided, True
    raise WorkloadError(
        ErrorCode.WORKLOAD_APPROVAL_DECIDED,
        "a different decision was already committed",
        {
            "outcome": decided.outcome.value,
            "decided_by": decided.decided_by.to_json(),
            "decided_at": decided.decided_at,
        },
    )
