"""Deadlines: when each of a workload's timeouts falls, and which one has passed."""

from __future__ import annotations

from feltdb.records.workload import DEADLINE_CONTRACT_VERSION, Workload
from feltdb.work.states import WorkloadState

DEADLINE_ACTIVE_STATES = frozenset(
    {
        WorkloadState.READY,
        WorkloadState.CLAIMED,
        WorkloadState.RUNNING,
        WorkloadState.CHECKPOINTED,
        WorkloadState.AWAITING_APPROVAL,
    }
)
"""Only work in these states can pass a deadline."""

WORK_BOUNDING_DEADLINES = frozenset({"overall", "queue", "approval"})
"""Deadlines that bound the work, not an attempt: another attempt cannot meet them."""


def deadline_seconds(ms: int) -> int:
    """Seconds a millisecond timeout lasts, rounded up so a deadline is never early."""
    return -(-ms // 1000)


def _entered_at(workload: Workload, state: WorkloadState) -> int:
    for event in reversed(workload.execution_history):
        if event.to is state:
            return event.at
    return workload.created_at


def deadline_instants(workload: Workload) -> list[tuple[str, int]]:
    """Every deadline that applies to ``workload`` in its current state, with when it falls, in the
    order they are checked: approval, overall, queue, claim, execution, heartbeat.

    Measured from: approval — entering ``AWAITING_APPROVAL``; overall — admission; queue —
    becoming ``READY`` (or ``next_attempt_at``, if later); claim — the claim; execution — the
    attempt's start; heartbeat — the last heartbeat (or the claim). Only workloads admitted
    at ``DEADLINE_CONTRACT_VERSION`` or later have deadlines.
    """
    if (
        workload.contract_version < DEADLINE_CONTRACT_VERSION
        or workload.state not in DEADLINE_ACTIVE_STATES
    ):
        return []
    t = workload.timeouts
    claim = workload.current_claim
    instants: list[tuple[str, int]] = []
    if t.approval_ms is not None and workload.state is WorkloadState.AWAITING_APPROVAL:
        instants.append(
            (
                "approval",
                _entered_at(workload, WorkloadState.AWAITING_APPROVAL)
                + deadline_seconds(t.approval_ms),
            )
        )
    if t.overall_ms is not None:
        instants.append(("overall", workload.created_at + deadline_seconds(t.overall_ms)))
    if t.queue_ms is not None and workload.state is WorkloadState.READY:
        ready_since = _entered_at(workload, WorkloadState.READY)
        if workload.next_attempt_at is not None:
            ready_since = max(ready_since, workload.next_attempt_at)
        instants.append(("queue", ready_since + deadline_seconds(t.queue_ms)))
    if t.claim_ms is not None and workload.state is WorkloadState.CLAIMED and claim is not None:
        instants.append(("claim", claim.claimed_at + deadline_seconds(t.claim_ms)))
    if (
        t.execution_ms is not None
        and workload.state in (WorkloadState.RUNNING, WorkloadState.CHECKPOINTED)
        and workload.attempts
    ):
        started = workload.attempts[-1].started_at
        if started is not None:
            instants.append(("execution", started + deadline_seconds(t.execution_ms)))
    if t.heartbeat_ms is not None and claim is not None:
        instants.append(("heartbeat", claim.last_heartbeat + deadline_seconds(t.heartbeat_ms)))
    return instants


def deadline_breach(workload: Workload, now: int) -> tuple[str, int] | None:
    """The first deadline ``workload`` has passed at ``now`` and when it fell, or ``None``.

    A deadline falling exactly at ``now`` has passed.
    """
    for kind, at in deadline_instants(workload):
        if now >= at:
            return (kind, at)
    return None


def next_deadline_at(workload: Workload) -> int | None:
    """The earliest instant at which some deadline of ``workload`` falls, or ``None``.

    Kept in the scheduling index so the maintenance pass finds due work without a scan.
    """
    instants = [at for _, at in deadline_instants(workload)]
    return min(instants) if instants else None
