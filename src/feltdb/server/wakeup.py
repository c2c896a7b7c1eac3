"""Long-poll wake-ups: a commit that may have made work claimable wakes the waiting claims.

The app subscribes :meth:`Wakeup.on_commit` to its store's commit observer
(``WorkloadStore.observe``), so every commit of this server (a route's or a maintenance
pass's) is judged by one rule, :func:`may_unblock`. Commits of other servers on the same
database are not seen: a long-poll also looks again every ``RECHECK_S`` for those.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading

from feltdb.work.changes import WorkloadChange
from feltdb.work.states import HELD_STATES, WorkloadState

QUIET_STATES = HELD_STATES | {WorkloadState.CANCELLATION_REQUESTED}
"""States a worker holds work in: entering one makes nothing claimable (a claim, a start,
a checkpoint, a cancellation request), so those commits wake no one."""


def may_unblock(change: WorkloadChange) -> bool:
    """Whether ``change`` may have made some work claimable: it leaves work READY (an
    admission, a retry, an approval, a recovery), or moves it to a state no worker holds
    (SUCCEEDED, FAILED, DEAD_LETTER, REJECTED, CANCELLED, TIMED_OUT…), which a dependent
    may require.
    """
    state = change.workload.state
    if state is WorkloadState.READY:
        return True
    return change.previous is not state and state not in QUIET_STATES


class Wakeup:
    """Wakes long-polling claims when this server commits something that may have made work
    claimable (:func:`may_unblock`).

    Commits happen on threadpool and maintenance threads; waiters are coroutines on the
    event loop, so :meth:`notify` hands the wake-up to the loop thread-safely.
    """

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._event = asyncio.Event()
        self._lock = threading.Lock()

    def bind(self, loop: asyncio.AbstractEventLoop) -> None:
        """Deliver wake-ups to ``loop`` (the loop the waiters run on)."""
        with self._lock:
            self._loop = loop

    def unbind(self) -> None:
        """Stop delivering wake-ups (the loop is shutting down)."""
        with self._lock:
            self._loop = None

    def signal(self) -> asyncio.Event:
        """The event the next :meth:`notify` sets. Take it *before* looking for work, so a
        commit between the look and the wait is not missed.
        """
        return self._event

    def on_commit(self, change: WorkloadChange) -> None:
        """The store's commit observer: wake the waiters when ``change`` may unblock work."""
        if may_unblock(change):
            self.notify()

    def notify(self) -> None:
        """Wake every current waiter; safe from any thread."""
        with self._lock:
            loop = self._loop
        if loop is None:
            return
        with contextlib.suppress(RuntimeError):  # the loop closed: nobody is waiting
            loop.call_soon_threadsafe(self._fire)

    def _fire(self) -> None:
        event, self._event = self._event, asyncio.Event()
        event.set()
