"""What a handler is given: its work, its progress so far, and a way to commit more.

One :class:`Context` per attempt. Its state is shared with the runtime's heartbeat
thread (which sets :attr:`Context.cancelled`), so everything here is safe across threads.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from feltdb.records.workload import Workload, WorkloadCheckpoint, WorkloadClaim

CheckpointCall = Callable[[Any], WorkloadCheckpoint]
"""Commits a checkpoint for the attempt (the runtime's, with its retries and fencing)."""
OutputsCall = Callable[[], dict[str, Any]]
"""Reads what the attempt's dependencies produced (the execution context's outputs)."""


class Flag:
    """A flag one thread sets and others read: :class:`threading.Event`'s ``set`` and
    ``is_set`` without its lock and condition, for flags nothing waits on (each attempt
    makes three; an Event costs about 1.4 µs to make, measured).
    """

    __slots__ = ("_set",)

    def __init__(self) -> None:
        self._set = False

    def set(self) -> None:
        """Set the flag (for good: nothing clears it)."""
        self._set = True  # one store of a reference: atomic under the interpreter lock

    def is_set(self) -> bool:
        """Whether the flag was set."""
        return self._set


class Context:
    """The running attempt, as its handler sees it.

    Attributes:
        workload: the workload as committed when this attempt claimed it.
        claim: this worker's claim (its fencing token fences every report).
        input: the workload's input.
        checkpoints: every checkpoint committed so far, by this and earlier attempts, in
            order; empty on a first run. Resume from ``checkpoints[-1].state``.
        cancelled: set when the authority asks this attempt to stop (an operator
            cancelled the work) or this worker lost the work (a deadline passed, the lease
            was lost, the worker is shutting down). A long handler should look at it between
            steps and return; what it returns then is not recorded as a result.
    """

    def __init__(
        self,
        workload: Workload,
        claim: WorkloadClaim,
        input: Any,
        checkpoints: list[WorkloadCheckpoint],
        commit_checkpoint: CheckpointCall,
        read_outputs: OutputsCall | None = None,
    ) -> None:
        self.workload = workload
        self.claim = claim
        self.input = input
        self.checkpoints = list(checkpoints)
        self.cancelled = threading.Event()
        self._commit_checkpoint = commit_checkpoint
        self._read_outputs = read_outputs
        self._outputs: dict[str, Any] | None = None
        self._side_effects = Flag()

    @property
    def workload_id(self) -> str:
        """The workload's id."""
        return self.workload.workload_id

    @property
    def definition_id(self) -> str:
        """The definition the workload runs (the handler's name)."""
        return self.workload.definition_id

    @property
    def attempt(self) -> int:
        """Which attempt this is: 1 for the first claim, 2 for the next one, and so on."""
        return self.workload.attempt_count

    @property
    def last_checkpoint(self) -> Any:
        """The state of the latest committed checkpoint, or ``None`` when there is none."""
        return self.checkpoints[-1].state if self.checkpoints else None

    @property
    def dependency_outputs(self) -> dict[str, Any]:
        """What the work this workload depends on produced: each dependency that succeeded,
        its output by workload id (``self.workload.dependencies`` names them). Read from the
        authority on first use, one call; ``{}`` for work without dependencies.

        Raises:
            WorkloadError: the authority refused the read (this worker no longer holds
                the work: its fence is stale or its lease expired).
        """
        if self._outputs is None:
            read = self._read_outputs
            depends = bool(self.workload.dependencies) and read is not None
            self._outputs = read() if read is not None and depends else {}
        return self._outputs

    def checkpoint(self, state: Any) -> WorkloadCheckpoint:
        """Commit ``state`` as this attempt's progress; a later attempt resumes from it.

        Blocks until the authority has committed it (in an ``async`` handler too: a
        checkpoint is one short call). After it, an exception from the handler is reported
        with effect ``unknown``: the work had begun.

        Raises:
            LeaseLost: this worker no longer holds the work; let it propagate.
            WorkloadError: the authority refused the state (``WORKLOAD_SECRET_REJECTED``,
                ``WORKLOAD_INVALID``), or cancellation was requested
                (``WORKLOAD_TRANSITION_DENIED``; :attr:`cancelled` is then set).
        """
        saved = self._commit_checkpoint(state)
        self.checkpoints.append(saved)
        self._side_effects.set()
        return saved

    def mark_side_effect(self) -> None:
        """Say that the handler is about to change something outside feltdb (send, write,
        charge). From then on an unexpected exception reports effect ``unknown`` (decided
        like a lost worker) instead of ``none``: the authority must not assume nothing
        happened.
        """
        self._side_effects.set()

    @property
    def progressed(self) -> bool:
        """Whether a checkpoint was committed or a side effect marked in this attempt."""
        return self._side_effects.is_set()
