"""What the store tells its observers after each durable commit.

An observer (:data:`CommitObserver`) subscribes with ``WorkloadStore.observe`` and is
called, in the committing thread, after each commit of a workload is durable, with a
:class:`WorkloadChange`: the operation, the workload as committed, the state it left and
the events the commit appended. The server's metrics count from it, and its long-poll
wake-ups fire from it; neither wraps the store nor reads the workload again.
:func:`may_unblock` is the rule by which a commit wakes claimers that wait.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass

from feltdb.records.workload import Workload, WorkloadEvent
from feltdb.storage.wakeups import Wakeups
from feltdb.work.states import HELD_STATES, WorkloadState

QUIET_STATES = HELD_STATES | {WorkloadState.CANCELLATION_REQUESTED}
"""States a worker holds work in: entering one makes nothing claimable (a claim, a start,
a checkpoint, a cancellation request)."""


class Operation(enum.StrEnum):
    """The store operation that committed a change."""

    ADMIT = "admit"
    CLAIM = "claim"
    """``claim`` or ``claim_next`` granted a claim."""
    START = "start"
    HEARTBEAT = "heartbeat"
    CHECKPOINT = "checkpoint"
    COMPLETE = "complete"
    FAIL = "fail"
    CANCEL = "cancel"
    CONFIRM_CANCEL = "confirm_cancel"
    TIMEOUT = "timeout"
    """An operator's explicit timeout."""
    RETRY = "retry"
    """An operator's re-arm."""
    DECIDE = "decide"
    DEADLINE = "deadline"
    """A passed deadline timed the work out (the maintenance pass, or a call that found
    it past its deadline)."""
    RECOVER = "recover"
    """The work's lease expired: its worker is presumed lost."""
    EXHAUSTED = "exhausted"
    """Ready work out of attempts was dead-lettered instead of claimed."""
    DEPENDENCY = "dependency"
    """Ready work was dead-lettered instead of claimed: a dependency of it rests in another
    state than it awaits (:func:`~feltdb.work.recovery.dead_letter_unmet`)."""
    REARM = "rearm"
    """Work a dependency's ending had ended was re-armed as an operator retried that
    dependency (:mod:`feltdb.work.rearming`)."""
    MIGRATE = "migrate"
    """A legacy record was imported."""


@dataclass(frozen=True, slots=True)
class WorkloadChange:
    """One durable commit of one workload."""

    operation: Operation
    workload: Workload
    """The workload as committed. Observers read it and never edit it."""
    previous: WorkloadState | None
    """The state it was in before (``None``: the commit admitted it)."""
    events: tuple[WorkloadEvent, ...]
    """The events this commit appended to its history, oldest first."""

    def entered(self, state: WorkloadState) -> bool:
        """Whether this commit moved the workload into ``state`` (on the way or to stay)."""
        return any(event.to is state for event in self.events)


def may_unblock(change: WorkloadChange) -> bool:
    """Whether ``change`` may have made some work claimable: it leaves work READY (an
    admission, a retry, an approval, a recovery), or moves it to a state no worker holds
    (SUCCEEDED, FAILED, DEAD_LETTER, REJECTED, CANCELLED, TIMED_OUT…), which a dependent
    may require. The one rule by which long-polling claimers are woken, in this process
    and (as a hint through the database) in others.
    """
    state = change.workload.state
    if state is WorkloadState.READY:
        return True
    return change.previous is not state and state not in QUIET_STATES


CommitObserver = Callable[[WorkloadChange], None]
"""Called after each durable commit. It must be quick and must not call the store back
(it runs in the committing thread); what it raises is logged and never undoes the commit."""


def announcer(wakeups: Wakeups) -> CommitObserver:
    """The observer by which a store tells the other processes of its database (through
    ``wakeups``) of each commit that :func:`may_unblock` work.
    """

    def announce(change: WorkloadChange) -> None:
        if may_unblock(change):
            wakeups.announce()

    return announce
