"""The threads attempts run on: at most one per handler slot, started as they are first
needed and kept for the rest of the run.

A thread per attempt cost a thread's start and end (a stack mapped and unmapped, a clone)
for every workload: measured on the embedded runtime's drain, about as much system time as
the authority's own work. Each thread takes the name of the attempt it runs
(``feltdb-attempt-<workload id>``), as a thread per attempt had, so logs and stack dumps
still say which workload a handler serves.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable

from feltdb.worker.attempt import Attempt

log = logging.getLogger("feltdb.worker")

IDLE_NAME = "feltdb-attempt-idle"
"""The name of an attempt thread between attempts."""


class AttemptThreads:
    """Runs each attempt handed to :meth:`submit` with ``run`` on one of at most ``size``
    daemon threads (daemon: a handler still running when the grace period ends must not
    keep the process alive; the runtime has reported it failed by then).
    """

    def __init__(self, size: int, run: Callable[[Attempt], None]) -> None:
        self._size = size
        self._run = run
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._threads = 0
        self._busy = 0
        self._closed = False

    def submit(self, attempt: Attempt) -> None:
        """Run ``attempt`` on an idle thread, or on a new one while fewer than ``size`` run.
        The caller never has more than ``size`` attempts running (its handler slots).
        """
        self.later(attempt, lambda: self._run(attempt))

    def later(self, attempt: Attempt, job: Callable[[], None]) -> None:
        """Run ``job``, the rest of ``attempt`` (whose slot it still holds), as
        :meth:`submit` runs an attempt; on a thread of its own once the threads are closed.
        """
        with self._lock:
            closed = self._closed
            if not closed:
                self._busy += 1
                start = self._busy > self._threads and self._threads < self._size
                if start:
                    self._threads += 1
                # Queued under the lock, so before any stop mark a close puts: a job queued
                # after the marks would be left for threads that have ended.
                self._jobs.put((attempt, job))
        if closed:
            threading.Thread(target=job, name=_name(attempt), daemon=True).start()
        elif start:
            threading.Thread(target=self._serve, name=IDLE_NAME, daemon=True).start()

    def close(self) -> None:
        """End every thread once it is idle (one still running an attempt ends after it)."""
        with self._lock:
            threads, self._threads, self._closed = self._threads, 0, True
        for _ in range(threads):
            self._jobs.put(None)

    def _serve(self) -> None:
        current = threading.current_thread()
        while (taken := self._jobs.get()) is not None:
            attempt, job = taken
            current.name = _name(attempt)
            try:
                job()
            except BaseException:
                # The runtime's own failure, or a handler's SystemExit: on this thread it
                # would end only the thread, and with it one slot's thread for the run.
                log.exception("attempt of %s failed inside the runtime", attempt.workload_id)
            finally:
                current.name = IDLE_NAME
                with self._lock:
                    self._busy -= 1


_Job = tuple[Attempt, Callable[[], None]]
"""An attempt, and what to run of it."""


def _name(attempt: Attempt) -> str:
    return f"feltdb-attempt-{attempt.workload_id}"
