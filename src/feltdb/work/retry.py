"""Retry policy: attempt budgets, backoff, and the decision after a failure, a timeout or a
lost worker.

Each decision is a :class:`RetryDecision`, made here and applied by one function
(:func:`feltdb.work.lifecycle.apply_retry_decision`). Its ``reason`` is the reference's
evidence string: ``"retry"``, or why not.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from feltdb.records.workload import Workload, WorkloadRetryPolicy
from feltdb.work.deadlines import WORK_BOUNDING_DEADLINES
from feltdb.work.states import BackoffPolicy

RETRY = "retry"


@dataclass(frozen=True, slots=True)
class RetryDecision:
    """What follows an attempt that failed, timed out or lost its worker: ``READY`` again
    (``retry``) or ``DEAD_LETTER``.
    """

    retry: bool
    reason: str
    """``"retry"``, or why not (``"attempt_budget_exhausted"``…): the event's evidence."""
    actor: str
    """Who the ``READY`` or ``DEAD_LETTER`` event names (``feltdb.retry``…)."""
    delay_ms: int | None = None
    """On a retry, how long before the next attempt (``None``: eligibility unchanged)."""
    counted: bool = True
    """On a retry, whether it counts as an automatic retry (``retry_count``)."""
    recorded: bool = True
    """Whether the event's evidence records ``reason`` (``{"decision": reason}``)."""


def _decision(
    reason: str, actor: str, *, delay_ms: int | None = None, counted: bool = True
) -> RetryDecision:
    return RetryDecision(reason == RETRY, reason, actor, delay_ms, counted)


def operator_retries(workload: Workload) -> int:
    """Operator re-arms recorded in the workload's own history."""
    return sum(
        1 for event in workload.execution_history if event.evidence.get("retry") == "operator"
    )


def attempt_budget(workload: Workload) -> int:
    """How many claims the workload may have in total: ``max_attempts``, plus one for each
    operator re-arm (which is what an operator retry grants).
    """
    return workload.retry_policy.max_attempts + operator_retries(workload)


def backoff_delay_ms(policy: WorkloadRetryPolicy, retry_count: int) -> int:
    """The delay before automatic retry number ``retry_count`` (1-based).

    Exponential doubles from ``initial_delay_ms``; fixed repeats it; both are capped at
    ``max_delay_ms``.
    """
    multiplier = 1
    if policy.backoff is BackoffPolicy.EXPONENTIAL:
        # Bounded exponent: the cap applies long before 2**64, and an unbounded power of two
        # would only burn memory for the same answer.
        multiplier = 2 ** min(max(retry_count - 1, 0), 64)
    return min(policy.initial_delay_ms * multiplier, policy.max_delay_ms)


def failure_decision(workload: Workload, kind: str, effect: str | None) -> RetryDecision:
    """After a worker's failure report: retry after the policy's backoff, or why not.

    An ``unknown`` effect is decided like a lost worker: retried only when the policy
    retries ``worker_failure``, whatever ``kind`` says.
    """
    unknown = effect == "unknown"
    allowed = ("worker_failure" if unknown else kind) in workload.retry_policy.retry_on
    if not allowed:
        reason = "effect_unknown_not_retryable" if unknown else "failure_kind_not_retryable"
    elif workload.attempt_count >= attempt_budget(workload):
        reason = "attempt_budget_exhausted"
    else:
        reason = RETRY
    delay_ms = backoff_delay_ms(workload.retry_policy, workload.retry_count + 1)
    return _decision(reason, "feltdb.retry", delay_ms=delay_ms)


def deadline_decision(workload: Workload, deadline: str) -> RetryDecision:
    """After ``deadline`` passed: retry after the policy's initial delay, or why not."""
    if deadline in WORK_BOUNDING_DEADLINES:
        reason = "deadline_not_retryable"
    elif "timeout" not in workload.retry_policy.retry_on:
        reason = "timeout_not_retryable"
    elif workload.attempt_count >= attempt_budget(workload):
        reason = "attempt_budget_exhausted"
    else:
        reason = RETRY
    return _decision(reason, "feltdb.deadline", delay_ms=workload.retry_policy.initial_delay_ms)


def operator_timeout_decision(workload: Workload) -> RetryDecision:
    """After an operator timed work out: retried by the policy's ``timeout`` rule within
    the attempt budget, after its initial delay; otherwise dead-lettered. The reference
    records no evidence of this decision, and names ``feltdb.retry`` for a retry and
    ``feltdb.timeout`` for a dead letter.
    """
    if "timeout" not in workload.retry_policy.retry_on:
        decided = _decision("timeout_not_retryable", "feltdb.timeout")
    elif workload.attempt_count >= attempt_budget(workload):
        decided = _decision("attempt_budget_exhausted", "feltdb.timeout")
    else:
        decided = _decision(RETRY, "feltdb.retry", delay_ms=workload.retry_policy.initial_delay_ms)
    return replace(decided, recorded=False)


def recovery_decision(workload: Workload) -> RetryDecision:
    """After a lost worker (lease expired): ready again at once, or why not. A recovery is
    not an automatic retry: ``retry_count`` and eligibility stay as they are.

    Whether the lost attempt had effects is unknown, so a retry re-executes it:
    at-least-once, never exactly-once.
    """
    if "worker_failure" not in workload.retry_policy.retry_on:
        reason = "worker_failure_not_retryable"
    elif workload.attempt_count >= attempt_budget(workload):
        reason = "attempt_budget_exhausted"
    else:
        reason = RETRY
    return _decision(reason, "feltdb.recovery", counted=False)
