"""Retry policy: attempt budgets, backoff, and the decision after a failure, a timeout or a
lost worker. Each decision is the reference's evidence string; ``"retry"`` means retry.
"""

from __future__ import annotations

from feltdb.work.deadlines import WORK_BOUNDING_DEADLINES
from feltdb.work.models import Workload, WorkloadRetryPolicy
from feltdb.work.states import BackoffPolicy

RETRY = "retry"


def operator_retries(w: Workload) -> int:
    """Operator re-arms recorded in the workload's own history."""
    return sum(1 for event in w.execution_history if event.evidence.get("retry") == "operator")


def attempt_budget(w: Workload) -> int:
    """How many claims the workload may have in total: ``max_attempts``, plus one for each
    operator re-arm (which is what an operator retry grants).
    """
    return w.retry_policy.max_attempts + operator_retries(w)


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


def failure_decision(w: Workload, kind: str, effect: str | None) -> str:
    """After a worker's failure report: retry, or why not.

    An ``unknown`` effect is decided like a lost worker: retried only when the policy
    retries ``worker_failure``, whatever ``kind`` says.
    """
    unknown = effect == "unknown"
    allowed = ("worker_failure" if unknown else kind) in w.retry_policy.retry_on
    if not allowed:
        return "effect_unknown_not_retryable" if unknown else "failure_kind_not_retryable"
    if w.attempt_count >= attempt_budget(w):
        return "attempt_budget_exhausted"
    return RETRY


def deadline_decision(w: Workload, deadline: str) -> str:
    """After a deadline passed: retry, or why not."""
    if deadline in WORK_BOUNDING_DEADLINES:
        return "deadline_not_retryable"
    if "timeout" not in w.retry_policy.retry_on:
        return "timeout_not_retryable"
    if w.attempt_count >= attempt_budget(w):
        return "attempt_budget_exhausted"
    return RETRY


def recovery_decision(w: Workload) -> str:
    """After a lost worker (lease expired): retry, or why not.

    Whether the lost attempt had effects is unknown, so a retry re-executes it:
    at-least-once, never exactly-once.
    """
    if "worker_failure" not in w.retry_policy.retry_on:
        return "worker_failure_not_retryable"
    if w.attempt_count >= attempt_budget(w):
        return "attempt_budget_exhausted"
    return RETRY
