"""Why work stands where it ended, said as one plain sentence, the same on every surface
(``feltdb dead`` and ``show``, the dashboard's pages, a list's summaries).

:data:`REASONS` is the one table of what each reason a retry decision records means;
:func:`ended_because` tells a workload's end from its committed history, with instants in
the one way feltdb writes a time (:func:`~feltdb.fields.instant_text`) and spans in words:
never a raw epoch, never a reason code alone.
"""

from __future__ import annotations

from typing import Final

from feltdb.fields import instant_text
from feltdb.records.workload import Workload, WorkloadEvent
from feltdb.work.deadlines import deadline_seconds
from feltdb.work.events import APPROVAL_DEADLINE, DeadlinePassed, deadlines_passed
from feltdb.work.states import WorkloadState

REASONS: Final[dict[str, str]] = {
    "retry": "it is retried after the retry policy's backoff",
    "attempt_budget_exhausted": "not retried: it has used every attempt its retry policy allows",
    "deadline_not_retryable": (
        "not retried: another attempt cannot meet a deadline of the work itself (overall,"
        " queue or approval)"
    ),
    "effect_unknown_not_retryable": (
        "not retried: its last attempt may have acted, and its retry policy does not retry"
        " worker_failure"
    ),
    "failure_kind_not_retryable": (
        "not retried: its retry policy does not retry failures of this kind"
    ),
    "timeout_not_retryable": "not retried: its retry policy does not retry timeout",
    "dependency_unmet": "not run: a workload it depends on ended in another state than it awaits",
    "worker_failure_not_retryable": (
        "not retried: its worker was lost, and its retry policy does not retry worker_failure"
    ),
}
"""What each ``decision`` a retry decision records (its evidence) means, in words."""

ENDED_STATES: Final = frozenset(
    {
        WorkloadState.FAILED,
        WorkloadState.TIMED_OUT,
        WorkloadState.DEAD_LETTER,
        WorkloadState.REJECTED,
        WorkloadState.CANCELLED,
    }
)
"""The states :func:`ended_because` explains (work that will not run unless retried)."""


def reason_sentence(code: str) -> str:
    """What the decision ``code`` means (a code the table lacks is named as it is)."""
    return REASONS.get(code, f"decided {code}")


def span_text(seconds: int) -> str:
    """A span in words: ``45 s``, ``10 min``, ``2 h 5 min``, ``3 d 4 h``."""
    whole = max(0, seconds)
    days, rest = divmod(whole, 86_400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days} d {hours} h" if hours else f"{days} d"
    if hours:
        return f"{hours} h {minutes} min" if minutes else f"{hours} h"
    if minutes:
        return f"{minutes} min {secs} s" if secs else f"{minutes} min"
    return f"{secs} s"


def ended_because(workload: Workload) -> str | None:
    """Why ended work (:data:`ENDED_STATES`) will not run on, in one sentence: what
    happened last (a deadline that passed, a failure, a decision) and what the retry
    policy decided of it; ``None`` for work still going.
    """
    if workload.state not in ENDED_STATES:
        return None
    history = workload.execution_history
    last = history[-1] if history else None
    if workload.state is WorkloadState.REJECTED:
        return _rejected(workload)
    if workload.state is WorkloadState.CANCELLED:
        by = f" by {last.actor} at {instant_text(last.at)}" if last is not None else ""
        return f"cancelled{by}"
    unmet = _unmet_dependency(history)
    if unmet is not None:
        return unmet
    what = _what_happened(workload)
    decided = _last_decision(history)
    if decided is None or decided == "retry":
        return what
    return f"{what}; {reason_sentence(decided)}"


def _what_happened(workload: Workload) -> str:
    """The last thing that ended an attempt or the wait: a deadline, else a failure."""
    passed = next(deadlines_passed(workload), None)
    failed_after = passed is None or any(
        event.to is WorkloadState.FAILED and event.sequence > passed.sequence
        for event in workload.execution_history
    )
    if passed is not None and not failed_after:
        return _deadline_sentence(workload, passed)
    if workload.last_failure:
        return f"its last attempt failed: {workload.last_failure}"
    last = workload.execution_history[-1] if workload.execution_history else None
    return "no failure was recorded" if last is None else f"{last.event_type} by {last.actor}"


def _deadline_sentence(workload: Workload, passed: DeadlinePassed) -> str:
    fell = instant_text(passed.deadline_at)
    if passed.deadline == APPROVAL_DEADLINE and workload.timeouts.approval_ms is not None:
        waited = span_text(deadline_seconds(workload.timeouts.approval_ms))
        return f"approval expired at {fell}, {waited} after it was asked, undecided"
    return f"its {passed.deadline} deadline passed at {fell}"


def _rejected(workload: Workload) -> str:
    decision = workload.approval.decision if workload.approval is not None else None
    if decision is None:
        return "rejected"
    said = f": {decision.reason}" if decision.reason else ""
    return f"rejected by {decision.decided_by} at {instant_text(decision.decided_at)}{said}"


def _unmet_dependency(history: list[WorkloadEvent]) -> str | None:
    """Why work dead-lettered for a dependency (its last event) did not run, naming it."""
    last = history[-1] if history else None
    if last is None or last.evidence.get("decision") != "dependency_unmet":
        return None
    said = last.evidence
    return (
        f"not run: its dependency {said.get('dependency')} ended {said.get('dependency_state')},"
        f" not {said.get('awaited_state')} (at {instant_text(last.at)})"
    )


def _last_decision(history: list[WorkloadEvent]) -> str | None:
    """The retry decision the last event that records one records."""
    for event in reversed(history):
        decided = event.evidence.get("decision")
        if decided is not None:
            return decided
    return None
