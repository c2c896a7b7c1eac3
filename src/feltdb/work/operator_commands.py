"""What an operator or an approver asks of the authority, decided: cancel, time out, retry,
decide an approval.

As :mod:`feltdb.work.worker_commands`: each function checks the command, loads the
workload it names (under the caller's scope) and answers the step decided on it, which the
unit of work commits. An operator's command is decided whatever the work's deadlines (a
timeout, a retry and a cancellation are what an operator does about them); an approval
decision is not, since the wait it ends may have expired.
"""

from __future__ import annotations

from feltdb.auth import Subject
from feltdb.errors import ErrorCode, WorkloadError
from feltdb.records.workload import ApprovalDecision
from feltdb.work import inputs, operators
from feltdb.work.approvals import decided_answer, ensure_approver_permitted
from feltdb.work.batches import Step
from feltdb.work.changes import Operation
from feltdb.work.safety import ensure_safe_text
from feltdb.work.states import ApprovalOutcome, WorkloadState
from feltdb.work.worker_commands import Load, deadline_step


def cancel(workload_id: str, actor: str, now: int, load: Load) -> Step[WorkloadState]:
    """Cancel: at once when no worker holds the work, otherwise by request to its worker
    (a request already made is answered, and nothing committed).
    """
    actor = inputs.actor(actor)
    loaded = load(workload_id)
    if loaded.state is WorkloadState.CANCELLATION_REQUESTED:
        return Step(answer=loaded.state)
    cancelled = operators.cancel(loaded.workload, actor, now)
    return Step(loaded.decided(cancelled), Operation.CANCEL, cancelled.state)


def timeout(workload_id: str, actor: str, now: int, load: Load) -> Step[WorkloadState]:
    """Time out ready or held work now."""
    actor = inputs.actor(actor)
    loaded = load(workload_id)
    timed_out = operators.operator_timeout(loaded.workload, actor, now)
    return Step(loaded.decided(timed_out), Operation.TIMEOUT, timed_out.state)


def retry(workload_id: str, actor: str, reason: str | None, now: int, load: Load) -> Step[None]:
    """Re-arm failed, dead-lettered or timed-out work for one more attempt."""
    actor = inputs.actor(actor)
    reason = inputs.reason(reason)
    if reason is not None:
        ensure_safe_text(reason, "reasons")
    loaded = load(workload_id)
    rearmed = operators.operator_retry(loaded.workload, actor, now, reason)
    return Step(loaded.decided(rearmed), Operation.RETRY)


def decide(
    workload_id: str,
    decider: Subject,
    verdict: tuple[ApprovalOutcome | str, str | None],
    bound_to: tuple[str, str],
    now: int,
    load: Load,
) -> Step[tuple[ApprovalDecision, bool]]:
    """Decide an approval by ``decider`` (``verdict``: the outcome and the reason), bound
    to ``bound_to`` (the deciding grant's id and the input hash decided on); ``True`` in
    the answer when it replays the committed decision.
    """
    outcome, note = decision_inputs(decider, *verdict)
    grant_id = inputs.identifier(bound_to[0], "grant_id")
    input_hash = bound_to[1]
    loaded = load(workload_id)
    workload = loaded.workload
    if workload.approval is None:
        raise WorkloadError(
            ErrorCode.WORKLOAD_APPROVAL_NOT_REQUIRED,
            "this workload was not admitted with an approval requirement",
        )
    ensure_approver_permitted(workload.approval.policy, workload.requested_by, decider)
    if workload.input_hash != input_hash:
        raise WorkloadError(
            ErrorCode.WORKLOAD_APPROVAL_STALE,
            "the decision names input this workload does not have",
            {"input_hash": workload.input_hash},
        )
    if workload.approval.decision is not None:
        return Step(answer=decided_answer(workload.approval.decision, outcome))
    timed_out = deadline_step(loaded, now)
    if timed_out is not None:
        return timed_out
    decided = operators.decide(workload, decider, outcome, note, grant_id, input_hash, now)
    return Step(loaded.decided(decided.workload), Operation.DECIDE, (decided.answer, False))


def decision_inputs(
    decider: Subject, outcome: ApprovalOutcome | str, reason: str | None
) -> tuple[ApprovalOutcome, str | None]:
    """The checked outcome and reason of a decision by ``decider``.

    Raises:
        WorkloadError: ``WORKLOAD_INVALID`` (a rejection needs a reason),
            ``WORKLOAD_SECRET_REJECTED``.
    """
    try:
        verdict = ApprovalOutcome(outcome)
    except ValueError:
        raise inputs.invalid("outcome", 'must be "approved" or "rejected"') from None
    if not isinstance(decider, Subject):
        raise inputs.invalid("decider", "must be a Subject")
    inputs.identifier(decider.id, "decider.id")
    note = inputs.reason(reason)
    if verdict is ApprovalOutcome.REJECTED and note is None:
        raise WorkloadError(
            ErrorCode.WORKLOAD_INVALID, "a rejection requires a reason", {"fields": ["reason"]}
        )
    if note is not None:
        ensure_safe_text(note, "reasons")
    return verdict, note
