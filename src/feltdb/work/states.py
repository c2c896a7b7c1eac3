"""The states of a workload and of an attempt, and who moves work out of each."""

from __future__ import annotations

import enum


class WorkloadState(enum.StrEnum):
    """Where a workload stands. Values are the reference's serialized spellings."""

    CREATED = "CREATED"
    """Being admitted; never committed in this state (admission moves it on at once)."""
    READY = "READY"
    """Claimable once ``next_attempt_at`` has passed. Out: a worker's claim, a cancel, the
    queue or overall deadline (maintenance), or dead-lettering of a spent budget."""
    CLAIMED = "CLAIMED"
    """Held by a worker under a lease, not yet started. Out: start, fail, cancel request, the
    claim/heartbeat deadline, or lease expiry (``recover_expired``)."""
    RUNNING = "RUNNING"
    """Started by its worker. Out: checkpoint, complete, fail, cancel request, the execution/
    heartbeat deadline, or lease expiry (``recover_expired``)."""
    CHECKPOINTED = "CHECKPOINTED"
    """Running with at least one committed checkpoint; the same exits as ``RUNNING``."""
    RECOVERING = "RECOVERING"
    """Its worker was lost; recovery decides at once: back to ``READY`` or ``DEAD_LETTER``."""
    CANCELLATION_REQUESTED = "CANCELLATION_REQUESTED"
    """Cancelled while held: the worker confirms, or lease expiry completes the cancel."""
    SUCCEEDED = "SUCCEEDED"
    """Final: completed with a result."""
    FAILED = "FAILED"
    """A worker reported failure; the retry policy decides at once: ``READY`` or
    ``DEAD_LETTER``. Operators may re-arm or cancel it."""
    CANCELLED = "CANCELLED"
    """Final: cancelled."""
    TIMED_OUT = "TIMED_OUT"
    """A deadline passed; the policy decides at once: ``READY`` or ``DEAD_LETTER``."""
    DEAD_LETTER = "DEAD_LETTER"
    """Will not run again on its own. Out: an operator's retry, or a cancel."""
    AWAITING_APPROVAL = "AWAITING_APPROVAL"
    """Admitted with an approval policy and not yet decided: not claimable. Out: a decision,
    a cancel, or the approval deadline (maintenance)."""
    REJECTED = "REJECTED"
    """Final: an authorized approver rejected it; never claimable."""


TERMINAL_STATES = frozenset(
    {WorkloadState.SUCCEEDED, WorkloadState.CANCELLED, WorkloadState.REJECTED}
)
"""States no transition leaves."""

HELD_STATES = frozenset({WorkloadState.CLAIMED, WorkloadState.RUNNING, WorkloadState.CHECKPOINTED})
"""States in which a worker holds the workload under a lease and an attempt is open."""


class AttemptStatus(enum.StrEnum):
    """How one attempt (one claim) ended, or how far it got."""

    CLAIMED = "CLAIMED"
    RUNNING = "RUNNING"
    CHECKPOINTED = "CHECKPOINTED"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    TIMED_OUT = "TIMED_OUT"
    CANCELLED = "CANCELLED"
    WORKER_LOST = "WORKER_LOST"


class BackoffPolicy(enum.StrEnum):
    """How the delay between automatic retries grows."""

    FIXED = "fixed"
    EXPONENTIAL = "exponential"


class ApprovalOutcome(enum.StrEnum):
    """An approver's decision."""

    APPROVED = "approved"
    REJECTED = "rejected"
