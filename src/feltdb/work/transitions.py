"""The workload state machine: which transitions are legal, and what each is called.

``docs/state_machine.md`` draws the same table; a unit test keeps the two in step.
"""

from __future__ import annotations

from feltdb.work.states import WorkloadState

_S = WorkloadState

LEGAL_TRANSITIONS: frozenset[tuple[WorkloadState, WorkloadState]] = frozenset(
    {
        (_S.CREATED, _S.READY),
        (_S.READY, _S.CLAIMED),
        (_S.CLAIMED, _S.RUNNING),
        (_S.RUNNING, _S.CHECKPOINTED),
        (_S.CHECKPOINTED, _S.CHECKPOINTED),
        (_S.RUNNING, _S.SUCCEEDED),
        (_S.CHECKPOINTED, _S.SUCCEEDED),
        (_S.CLAIMED, _S.CANCELLATION_REQUESTED),
        (_S.RUNNING, _S.CANCELLATION_REQUESTED),
        (_S.CHECKPOINTED, _S.CANCELLATION_REQUESTED),
        (_S.CANCELLATION_REQUESTED, _S.CANCELLED),
        (_S.READY, _S.CANCELLED),
        (_S.CREATED, _S.CANCELLED),
        (_S.FAILED, _S.CANCELLED),
        (_S.DEAD_LETTER, _S.CANCELLED),
        (_S.CLAIMED, _S.FAILED),
        (_S.RUNNING, _S.FAILED),
        (_S.CHECKPOINTED, _S.FAILED),
        (_S.CLAIMED, _S.RECOVERING),
        (_S.RUNNING, _S.RECOVERING),
        (_S.CHECKPOINTED, _S.RECOVERING),
        (_S.RECOVERING, _S.READY),
        (_S.FAILED, _S.READY),
        (_S.TIMED_OUT, _S.READY),
        (_S.DEAD_LETTER, _S.READY),
        (_S.FAILED, _S.DEAD_LETTER),
        (_S.RUNNING, _S.TIMED_OUT),
        (_S.CLAIMED, _S.TIMED_OUT),
        (_S.CHECKPOINTED, _S.TIMED_OUT),
        (_S.READY, _S.TIMED_OUT),
        (_S.TIMED_OUT, _S.DEAD_LETTER),
        (_S.RECOVERING, _S.DEAD_LETTER),
        (_S.READY, _S.DEAD_LETTER),
        (_S.CREATED, _S.AWAITING_APPROVAL),
        (_S.AWAITING_APPROVAL, _S.READY),
        (_S.AWAITING_APPROVAL, _S.REJECTED),
        (_S.AWAITING_APPROVAL, _S.CANCELLED),
        (_S.AWAITING_APPROVAL, _S.TIMED_OUT),
        (_S.TIMED_OUT, _S.AWAITING_APPROVAL),
        (_S.DEAD_LETTER, _S.AWAITING_APPROVAL),
        (_S.FAILED, _S.AWAITING_APPROVAL),
    }
)


def can_transition(from_state: WorkloadState, to_state: WorkloadState) -> bool:
    """Whether the state machine allows moving from ``from_state`` to ``to_state``."""
    return (WorkloadState(from_state), WorkloadState(to_state)) in LEGAL_TRANSITIONS


EVENT_NAMES: dict[WorkloadState, str] = {
    _S.CREATED: "workload.created",
    _S.READY: "workload.ready",
    _S.CLAIMED: "workload.claimed",
    _S.RUNNING: "workload.started",
    _S.CHECKPOINTED: "workload.checkpointed",
    _S.RECOVERING: "workload.recovered",
    _S.CANCELLATION_REQUESTED: "workload.cancellation_requested",
    _S.SUCCEEDED: "workload.completed",
    _S.FAILED: "workload.failed",
    _S.CANCELLED: "workload.cancelled",
    _S.TIMED_OUT: "workload.timed_out",
    _S.DEAD_LETTER: "workload.dead_lettered",
    _S.AWAITING_APPROVAL: "workload.awaiting_approval",
    _S.REJECTED: "workload.rejected",
}
"""The history event type recorded on entering each state."""
