"""One claimed workload on its way through the runtime, and how its calls are sent.

An :class:`Attempt` is shared by its attempt thread, the heartbeat thread and a shutdown;
:meth:`Attempt.take_report` makes sure exactly one of them reports the outcome. :func:`send`
makes one call for an attempt the way every report is made: resent unchanged while no
answer arrives, and given up once the authority says the lease is gone.
"""

from __future__ import annotations

import concurrent.futures
import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from feltdb.errors import WorkloadError
from feltdb.records.workload import Workload, WorkloadClaim
from feltdb.work.states import WorkloadState
from feltdb.worker.context import Context, Flag
from feltdb.worker.failures import is_lease_lost, is_transient

if TYPE_CHECKING:
    from feltdb.tracing import Span

log = logging.getLogger("feltdb.worker")

T = TypeVar("T")

RETRY_DELAYS_S = (0.1, 0.25, 0.5, 1.0, 2.0)
"""Pauses between resends of a report that got no answer (the last one repeats)."""


def heartbeat_interval_s(workload: Workload, lease_ms: int) -> float:
    """How often to heartbeat ``workload`` held under a lease of ``lease_ms``: a third of
    the lease, or of the workload's heartbeat deadline when that is shorter, so two beats
    may be lost before either runs out. At least a quarter second.
    """
    term_ms = lease_ms
    if workload.timeouts.heartbeat_ms is not None:
        term_ms = min(term_ms, workload.timeouts.heartbeat_ms)
    return max(term_ms / 3000, 0.25)


class Attempt:
    """One claimed workload on its way through the runtime; shared by its attempt thread,
    the heartbeat thread and a shutdown. ``take_report`` makes sure exactly one of them
    reports the outcome.
    """

    def __init__(self, claim: WorkloadClaim, workload: Workload) -> None:
        self.claim = claim
        self.workload = workload
        """The workload as the claim's commit left it (the claim's answer carries it)."""
        self.context: Context | None = None
        self.beat_every_s: float | None = None  # set once the attempt runs
        self.next_beat = 0.0
        self.cancel_requested = Flag()
        self.lost = Flag()
        self.lost_by: WorkloadError | None = None  # the refusal that said so
        self.future: concurrent.futures.Future[Any] | None = None
        self.deferred = False
        """Set when its completion was handed to the batch completer: the attempt ends
        (its slot is freed) when the completion is answered, not when its thread returns."""
        self.span: Span | None = None
        """Its ``feltdb.run`` span, when tracing (:mod:`feltdb.tracing`)."""
        self.completing: Span | None = None
        """The ``feltdb.complete`` span of a completion handed to the batch completer."""
        self._reported = False
        self._lock = threading.Lock()

    @property
    def workload_id(self) -> str:
        """The claimed workload's id."""
        return self.claim.workload_id

    @property
    def fence(self) -> tuple[str, str, int]:
        """What a report names its claim by: the workload, the claim id, the fencing token."""
        return self.claim.workload_id, self.claim.claim_id, self.claim.fencing_token

    def take_report(self) -> bool:
        """Whether the caller is the one to report this attempt (first caller only)."""
        with self._lock:
            if self._reported or self.lost.is_set():
                return False
            self._reported = True
            return True

    def stop_handler(self) -> None:
        """Ask the handler to stop: set ``ctx.cancelled``, cancel an async handler's task."""
        if self.context is not None:
            self.context.cancelled.set()
        if self.future is not None:
            self.future.cancel()

    def request_cancel(self) -> None:
        """The authority asked to cancel: stop the handler, confirm when it has stopped."""
        self.cancel_requested.set()
        self.stop_handler()

    def lose(self, error: WorkloadError) -> None:
        """This worker no longer holds the work: stop the handler, report nothing more."""
        if not self.lost.is_set():
            log.warning("lost %s: %s; its handler is stopped", self.workload_id, error)
            self.lost_by = error
        self.lost.set()
        self.stop_handler()


def cancellation_requested(workload: Workload) -> bool:
    """Whether the authority asks the holder of ``workload`` to stop."""
    return workload.state is WorkloadState.CANCELLATION_REQUESTED


def answered(call: Callable[[], None]) -> Callable[[], bool]:
    """``call`` answering ``True`` once it returned: for the calls that answer nothing,
    since :func:`send` answers ``None`` for a lost lease.
    """

    def run() -> bool:
        call()
        return True

    return run


def send(attempt: Attempt, call: Callable[[], T]) -> T | None:
    """``call()`` for ``attempt``: resent while no answer arrives (until the lease runs
    out), ``None`` when the lease is lost (the attempt is then stopped); any other refusal
    is raised.
    """
    delays = Backoff()
    while True:
        try:
            answer = call()
            return answer
        except WorkloadError as error:
            if is_lease_lost(error):
                attempt.lose(error)
                return None
            if not is_transient(error) or attempt.lost.is_set():
                raise
            if time.time() >= attempt.claim.expires_at + 1:
                # Past the lease: the authority will refuse anything now, and recovery
                # owns the work.
                attempt.lose(error)
                return None
            pause = delays.next()
            log.warning("%s: %s; sending again in %.1fs", attempt.workload_id, error, pause)
            time.sleep(pause)


class Backoff:
    """Pauses that grow along :data:`RETRY_DELAYS_S`, then stay at the last."""

    def __init__(self) -> None:
        self._step = 0

    def next(self) -> float:
        """The next pause, in seconds."""
        delay = RETRY_DELAYS_S[min(self._step, len(RETRY_DELAYS_S) - 1)]
        self._step += 1
        return delay

    def reset(self) -> None:
        """Start again from the shortest pause."""
        self._step = 0
