"""Long-poll wake-ups: a commit that may have made work claimable wakes the waiting claims.

The app subscribes :meth:`Wakeup.on_commit` to its store's commit observer
(``WorkloadStore.observe``), so every commit of this server (a route's or a maintenance
pass's) is judged by one rule, :func:`may_unblock`. Commits of other processes on the same
database are announced by them as hints where the database carries them (PostgreSQL's
``NOTIFY``, which the app's lifespan subscribes :meth:`Wakeup.notify` to); a hint may be
lost, and SQLite has none, so a long-poll also looks again every ``RECHECK_S``.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading

from feltdb.work.changes import WorkloadChange, may_unblock

__all__ = ["Wakeup", "may_unblock"]


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
