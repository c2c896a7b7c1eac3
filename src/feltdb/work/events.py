"""Typed views of a workload's committed history: what its events mean, as values.

A :class:`~feltdb.work.models.WorkloadEvent` keeps the reference's shape: a transition,
who made it, when, and an ``evidence`` map of strings. What that evidence says is written
and read here only: the transitions that record a failure or a deadline build their
evidence with :func:`failure_evidence` and :func:`deadline_evidence`, and whoever asks
what happened (the dashboard, the metrics, a replayed report) asks for an
:class:`AttemptFailed` or a :class:`DeadlinePassed`, never for a key of the map.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from feltdb.records.workload import Workload, WorkloadClaim, WorkloadEvent
from feltdb.work.states import WorkloadState

APPROVAL_DEADLINE = "approval"
"""The deadline of work awaiting approval (``timeouts.approval_ms``)."""


@dataclass(frozen=True, slots=True)
class AttemptFailed:
    """A worker reported its attempt failed (an event to ``FAILED``)."""

    sequence: int
    at: int
    attempt_id: str
    kind: str
    """The failure kind the worker gave (the retry policy's ``retry_on`` decides on it)."""
    effect: str | None
    """What the worker said of external effects: ``"none"``, ``"unknown"``, or nothing."""


@dataclass(frozen=True, slots=True)
class DeadlinePassed:
    """The authority timed the work out because one of its deadlines passed."""

    sequence: int
    at: int
    """When the timeout was committed."""
    deadline: str
    """Which deadline: ``queue``, ``claim``, ``execution``, ``heartbeat``, ``overall`` or
    ``approval``."""
    deadline_at: int
    """When the deadline fell."""
    claim_id: str | None
    """The claim it ended, if a worker held the work."""
    worker_id: str | None


def failure_evidence(kind: str, attempt_id: str, effect: str | None) -> dict[str, str]:
    """The evidence of a failure report's event (read back by :func:`attempt_failed`)."""
    evidence = {"failure_kind": kind, "attempt_id": attempt_id}
    if effect is not None:
        evidence["effect"] = effect
    return evidence


def deadline_evidence(
    deadline: str, deadline_at: int, lost: WorkloadClaim | None
) -> dict[str, str]:
    """The evidence of a deadline's timeout (read back by :func:`deadline_passed`)."""
    evidence = {"deadline": deadline, "deadline_at": str(deadline_at)}
    if lost is not None:
        evidence["claim_id"] = lost.claim_id
        evidence["worker_id"] = lost.worker_id
    return evidence


def attempt_failed(event: WorkloadEvent) -> AttemptFailed | None:
    """``event`` as a failure report, or ``None`` when it is none."""
    evidence = event.evidence
    kind, attempt_id = evidence.get("failure_kind"), evidence.get("attempt_id")
    if event.to is not WorkloadState.FAILED or kind is None or attempt_id is None:
        return None
    return AttemptFailed(event.sequence, event.at, attempt_id, kind, evidence.get("effect"))


def deadline_passed(event: WorkloadEvent) -> DeadlinePassed | None:
    """``event`` as a deadline's timeout, or ``None`` when it is none."""
    evidence = event.evidence
    deadline, deadline_at = evidence.get("deadline"), evidence.get("deadline_at")
    if event.to is not WorkloadState.TIMED_OUT or deadline is None or deadline_at is None:
        return None
    try:
        fell = int(deadline_at)
    except ValueError:  # a record of an older writer may hold anything here
        return None
    return DeadlinePassed(
        event.sequence, event.at, deadline, fell, evidence.get("claim_id"),
        evidence.get("worker_id"),
    )  # fmt: skip


def failures(workload: Workload) -> Iterator[AttemptFailed]:
    """The workload's failure reports, newest first."""
    for event in reversed(workload.execution_history):
        failed = attempt_failed(event)
        if failed is not None:
            yield failed


def deadlines_passed(workload: Workload) -> Iterator[DeadlinePassed]:
    """The workload's timeouts by a deadline, newest first."""
    for event in reversed(workload.execution_history):
        passed = deadline_passed(event)
        if passed is not None:
            yield passed


def approval_expired(workload: Workload) -> DeadlinePassed | None:
    """The last time the work's approval expired (its wait timed out), if it did."""
    return next((d for d in deadlines_passed(workload) if d.deadline == APPROVAL_DEADLINE), None)


def last_effect(workload: Workload) -> str | None:
    """What the last attempt did to the world, as its worker said (``"none"``,
    ``"unknown"``), or ``"unknown"`` for one that started and said nothing (lost, timed
    out); ``None`` when there was no attempt. Never an earlier attempt's word.
    """
    if not workload.attempts:
        return None
    last = workload.attempts[-1]
    said = next((f.effect for f in failures(workload) if f.attempt_id == last.attempt_id), None)
    if said is not None:
        return said
    return "none" if last.started_at is None else "unknown"
