"""The workload state machine: which transitions are legal, what each is called, and
:func:`transition`, the one function that moves a workload and records the event (answering
a new record: a workload is never edited in place).

``docs/state_machine.md`` draws the same table; a unit test keeps the two in step.
"""

from __future__ import annotations

from typing import Any

from msgspec.structs import replace

from feltdb.errors import ErrorCode, WorkloadError
from feltdb.records.workload import Workload, WorkloadAttempt, WorkloadEvent
from feltdb.work.states import WorkloadState

LEGAL_TRANSITIONS: frozenset[tuple[WorkloadState, WorkloadState]] = frozenset(
    {
        (WorkloadState.CREATED, WorkloadState.READY),
        (WorkloadState.READY, WorkloadState.CLAIMED),
        (WorkloadState.CLAIMED, WorkloadState.RUNNING),
        (WorkloadState.RUNNING, WorkloadState.CHECKPOINTED),
        (WorkloadState.CHECKPOINTED, WorkloadState.CHECKPOINTED),
        (WorkloadState.RUNNING, WorkloadState.SUCCEEDED),
        (WorkloadState.CHECKPOINTED, WorkloadState.SUCCEEDED),
        (WorkloadState.CLAIMED, WorkloadState.CANCELLATION_REQUESTED),
        (WorkloadState.RUNNING, WorkloadState.CANCELLATION_REQUESTED),
        (WorkloadState.CHECKPOINTED, WorkloadState.CANCELLATION_REQUESTED),
        (WorkloadState.CANCELLATION_REQUESTED, WorkloadState.CANCELLED),
        (WorkloadState.READY, WorkloadState.CANCELLED),
        (WorkloadState.CREATED, WorkloadState.CANCELLED),
        (WorkloadState.FAILED, WorkloadState.CANCELLED),
        (WorkloadState.DEAD_LETTER, WorkloadState.CANCELLED),
        (WorkloadState.CLAIMED, WorkloadState.FAILED),
        (WorkloadState.RUNNING, WorkloadState.FAILED),
        (WorkloadState.CHECKPOINTED, WorkloadState.FAILED),
        (WorkloadState.CLAIMED, WorkloadState.RECOVERING),
        (WorkloadState.RUNNING, WorkloadState.RECOVERING),
        (WorkloadState.CHECKPOINTED, WorkloadState.RECOVERING),
        (WorkloadState.RECOVERING, WorkloadState.READY),
        (WorkloadState.FAILED, WorkloadState.READY),
        (WorkloadState.TIMED_OUT, WorkloadState.READY),
        (WorkloadState.DEAD_LETTER, WorkloadState.READY),
        (WorkloadState.FAILED, WorkloadState.DEAD_LETTER),
        (WorkloadState.RUNNING, WorkloadState.TIMED_OUT),
        (WorkloadState.CLAIMED, WorkloadState.TIMED_OUT),
        (WorkloadState.CHECKPOINTED, WorkloadState.TIMED_OUT),
        (WorkloadState.READY, WorkloadState.TIMED_OUT),
        (WorkloadState.TIMED_OUT, WorkloadState.DEAD_LETTER),
        (WorkloadState.RECOVERING, WorkloadState.DEAD_LETTER),
        (WorkloadState.READY, WorkloadState.DEAD_LETTER),
        (WorkloadState.CREATED, WorkloadState.AWAITING_APPROVAL),
        (WorkloadState.AWAITING_APPROVAL, WorkloadState.READY),
        (WorkloadState.AWAITING_APPROVAL, WorkloadState.REJECTED),
        (WorkloadState.AWAITING_APPROVAL, WorkloadState.CANCELLED),
        (WorkloadState.AWAITING_APPROVAL, WorkloadState.TIMED_OUT),
        (WorkloadState.TIMED_OUT, WorkloadState.AWAITING_APPROVAL),
        (WorkloadState.DEAD_LETTER, WorkloadState.AWAITING_APPROVAL),
        (WorkloadState.FAILED, WorkloadState.AWAITING_APPROVAL),
    }
)


def can_transition(from_state: WorkloadState, to_state: WorkloadState) -> bool:
    """Whether the state machine allows moving from ``from_state`` to ``to_state``."""
    return (WorkloadState(from_state), WorkloadState(to_state)) in LEGAL_TRANSITIONS


EVENT_NAMES: dict[WorkloadState, str] = {
    WorkloadState.CREATED: "workload.created",
    WorkloadState.READY: "workload.ready",
    WorkloadState.CLAIMED: "workload.claimed",
    WorkloadState.RUNNING: "workload.started",
    WorkloadState.CHECKPOINTED: "workload.checkpointed",
    WorkloadState.RECOVERING: "workload.recovered",
    WorkloadState.CANCELLATION_REQUESTED: "workload.cancellation_requested",
    WorkloadState.SUCCEEDED: "workload.completed",
    WorkloadState.FAILED: "workload.failed",
    WorkloadState.CANCELLED: "workload.cancelled",
    WorkloadState.TIMED_OUT: "workload.timed_out",
    WorkloadState.DEAD_LETTER: "workload.dead_lettered",
    WorkloadState.AWAITING_APPROVAL: "workload.awaiting_approval",
    WorkloadState.REJECTED: "workload.rejected",
}
"""The history event type recorded on entering each state."""


def transition(
    workload: Workload,
    to: WorkloadState,
    actor: str,
    at: int,
    evidence: dict[str, str] | None = None,
    **changes: Any,
) -> Workload:
    """``workload`` moved to ``to`` with the event recorded (and the other fields named in
    ``changes`` set), if the state machine allows it: a new record; ``workload`` is left as
    it was.

    Raises:
        WorkloadError: ``WORKLOAD_TRANSITION_DENIED``.
    """
    if not can_transition(workload.state, to):
        raise WorkloadError(
            ErrorCode.WORKLOAD_TRANSITION_DENIED,
            f"{workload.state.value} cannot transition to {to.value}",
            {"state": workload.state.value, "to": to.value},
        )
    history = workload.execution_history
    sequence = history[-1].sequence + 1 if history else 1
    event = WorkloadEvent(
        sequence=sequence,
        event_type=EVENT_NAMES[to],
        from_state=workload.state,
        to=to,
        actor=actor,
        at=at,
        evidence=evidence or {},
    )
    return replace(
        workload, state=to, updated_at=at, execution_history=[*history, event], **changes
    )


def with_last_attempt(workload: Workload, **changes: Any) -> list[WorkloadAttempt]:
    """``workload``'s attempts with the last one's fields named in ``changes`` set (a new
    list; the records it shares are left as they were).
    """
    *earlier, last = workload.attempts
    return [*earlier, replace(last, **changes)]
