"""Wake-up hints between the processes sharing one PostgreSQL database: ``NOTIFY`` and
``LISTEN`` (the :class:`~feltdb.storage.base.Wakeups` of :mod:`feltdb.storage.postgres`).

A long-polling claimer of one server does not see the commits of another server, or of a
process that admits through the store directly; without a hint it finds their work only
when it looks again (every 0.25 s). With one, it looks as soon as the hint arrives.

Why the commit path never notifies: ``NOTIFY`` serializes the commits that send it (the
notification queue is locked database-wide from before the commit record until the commit
ends). Measured on 2 cores, single-row commits with a ``pg_notify`` in each transaction
against none: 1,556/s against 1,867/s from one thread, 2,165/s against 3,153/s from eight.
So :meth:`PostgresWakeups.announce` only raises a flag, and one thread per process sends
the ``NOTIFY``, in a transaction of its own on a connection of the store's pool, at most
once every :data:`MIN_INTERVAL_S`: a burst of announcements costs one notification, and
while the database is open the last one always has a notification sent after it (a send
that fails is tried again, after 0.5 s, doubling to 30 s). That transaction writes nothing
worth a sync to disk (``NOTIFY`` takes a transaction id, so its commit would wait for
one), so it commits with ``synchronous_commit`` off. It borrows a pooled connection rather
than keeping one of its own, so that a process's connections stay the pool's (under
``max_connections``); when the pool is exhausted a hint waits for a connection, as long as
the pool's timeout, and is then tried again.

A process that subscribes (a server) keeps one more connection, which listens, with TCP
keepalives (a vanished server is noticed in about a minute); a lost one is opened again
(after 0.5 s, doubling to 30 s), and subscribers are called once after each
reconnection, since a notification sent meanwhile was lost. A database object does not
hear its own notifications: its store's commit observers wake its own waiters at once.
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import selectors
import threading
from collections.abc import Callable, Mapping
from typing import Any, Final, LiteralString

import psycopg

__all__ = ["CHANNEL", "MIN_INTERVAL_S", "PostgresWakeups"]

log = logging.getLogger(__name__)

CHANNEL: Final = "feltdb_wakeup"
"""The channel every feltdb process of a database notifies and listens on (spelled in the
statements ``notify_wakeup`` and ``listen_wakeup`` of ``sql/postgres/queries.sql``)."""

MIN_INTERVAL_S: Final = 0.05
"""The shortest time between two notifications one process sends."""

_RETRY_FIRST_S: Final = 0.5
_RETRY_MOST_S: Final = 30.0
_POLL_S: Final = 1.0
"""How long the listener waits on its socket before checking that it should go on."""
_JOIN_S: Final = 5.0
"""How long :meth:`PostgresWakeups.close` waits for each thread to end."""
_KEEPALIVES: Final = {
    "keepalives": 1,
    "keepalives_idle": 30,
    "keepalives_interval": 10,
    "keepalives_count": 3,
}
"""TCP keepalives of the listener's connection: a server that vanished without closing the
connection (a host lost) is noticed in about a minute, not after the system's two hours."""


class PostgresWakeups:
    """:class:`~feltdb.storage.wakeups.Wakeups` over ``LISTEN``/``NOTIFY`` on ``CHANNEL``.

    Its two threads (the announcer, the listener) start with the first announcement and
    the first subscription; :meth:`close` stops both and closes the listener's connection.
    The object, not the process, is what does not hear itself: two stores of one process
    over two database objects hear each other's hints.
    """

    def __init__(
        self,
        target: str,
        conninfo: str,
        kwargs: Mapping[str, Any],
        send: Callable[[str], None],
        listen: LiteralString,
    ) -> None:
        """Hints of the database at ``conninfo``; ``send(payload)`` notifies ``CHANNEL``
        with ``payload`` in a transaction of its own (raising when it cannot), and the
        listener connects with ``kwargs`` and runs ``listen``.
        """
        self.target = target
        self._conninfo = conninfo
        self._kwargs = {**kwargs, **_KEEPALIVES, "autocommit": True}
        self._kwargs["application_name"] = "feltdb wakeups"
        self._send = send
        self._listen = listen
        self._token = secrets.token_hex(8)
        """This object's notifications carry it: the listener drops them as its own."""
        self._lock = threading.Lock()
        self._closed = False
        self._stop = threading.Event()
        self._announced = threading.Event()
        self._sending = False
        self._announcer: threading.Thread | None = None
        self._subscribers: tuple[Callable[[], None], ...] = ()
        self._listener: threading.Thread | None = None
        self._wake_listener: int | None = None
        """The write end of the listener's pipe: close() writes to it, so the thread, which
        waits on its socket and on the pipe's read end, ends at once."""
        self.sent = 0
        """Notifications this object has sent."""
        self.received = 0
        """Notifications of others this object's listener has received and delivered."""

    @property
    def idle(self) -> bool:
        """Whether no announcement waits to be sent or is on its way."""
        return not self._sending and not self._announced.is_set()

    # --- announcing -------------------------------------------------------------------

    def announce(self) -> None:
        """See :meth:`Wakeups.announce`. After :meth:`close`, nothing."""
        if self._closed:
            return
        self._announced.set()
        if self._announcer is None:
            with self._lock:
                if self._announcer is None and not self._closed:
                    self._announcer = _started(self._announce_loop, "feltdb wakeup announcer")

    def _announce_loop(self) -> None:
        failures = 0
        while not self._stop.is_set():
            self._announced.wait()
            self._sending = True
            # Cleared before the send: an announcement made while this one is on its way
            # sends another after it.
            self._announced.clear()
            if self._closed:
                return
            try:
                self._send(self._token)
                self.sent += 1
                failures = 0
            except Exception as error:  # a hint must never end the thread
                failures += 1
                log.warning("wake-up hint not sent on %s: %s", self.target, error)
                self._announced.set()  # sent again later: one must follow the last
            finally:
                self._sending = False
            pause = MIN_INTERVAL_S if not failures else _backoff(failures)
            self._stop.wait(pause)

    # --- listening --------------------------------------------------------------------

    def subscribe(self, callback: Callable[[], None]) -> Callable[[], None]:
        """See :meth:`Wakeups.subscribe`."""
        with self._lock:
            self._subscribers = (*self._subscribers, callback)
            if self._listener is None and not self._closed:
                read_end, self._wake_listener = os.pipe()
                self._listener = _started(
                    lambda: self._listen_loop(read_end), "feltdb wakeup listener"
                )

        def unsubscribe() -> None:
            with self._lock:
                self._subscribers = tuple(s for s in self._subscribers if s is not callback)

        return unsubscribe

    def _deliver(self) -> None:
        for callback in self._subscribers:
            try:
                callback()
            except Exception:
                log.exception("wake-up subscriber %r failed", callback)

    def _listen_loop(self, read_end: int) -> None:
        """Listen (again after each loss, with back-off) until :meth:`close`; the thread
        owns ``read_end`` and closes it when it ends, so no other file takes its number
        while it may still wait on it.
        """
        failures = 0
        try:
            while not self._closed:
                try:
                    with psycopg.connect(self._conninfo, **self._kwargs) as connection:
                        connection.execute(self._listen)
                        failures = 0
                        self._deliver()  # what was announced while not listening was lost
                        self._receive(connection, read_end)
                except Exception as error:  # a lost connection must never end the thread
                    if self._closed:
                        return
                    failures += 1
                    log.warning(
                        "wake-up listener of %s lost its connection: %s", self.target, error
                    )
                if self._stop.wait(_backoff(max(failures, 1))):
                    return
        finally:
            os.close(read_end)

    def _receive(self, connection: psycopg.Connection[Any], read_end: int) -> None:
        """Deliver each notification of others that ``connection`` receives, until
        :meth:`close` (a selector, not ``select()``: a busy server's descriptors pass 1024).
        """
        with selectors.DefaultSelector() as selector:
            selector.register(connection.fileno(), selectors.EVENT_READ, "connection")
            selector.register(read_end, selectors.EVENT_READ, "stop")
            while not self._closed:
                ready = {key.data for key, _ in selector.select(_POLL_S)}
                if "stop" in ready:
                    return
                if ready:
                    for notification in connection.notifies(timeout=0):
                        if notification.payload != self._token:
                            self._deliver()
                            self.received += 1

    # --- both -------------------------------------------------------------------------

    def close(self) -> None:
        """Stop both threads (the listener closes its connection); closing twice is
        harmless. An announcement not yet sent is dropped.
        """
        with self._lock:
            if self._closed:
                return
            self._closed = True
            threads = [t for t in (self._announcer, self._listener) if t is not None]
            wake = self._wake_listener
        self._stop.set()
        self._announced.set()
        if wake is not None:
            with contextlib.suppress(OSError):
                os.write(wake, b"x")
            os.close(wake)
        for thread in threads:
            thread.join(timeout=_JOIN_S)


def _backoff(failures: int) -> float:
    """Seconds to wait after ``failures`` failures in a row: 0.5 s, doubling, up to 30 s."""
    return float(min(_RETRY_FIRST_S * 2 ** (failures - 1), _RETRY_MOST_S))


def _started(loop: Callable[[], None], name: str) -> threading.Thread:
    thread = threading.Thread(target=loop, name=name, daemon=True)
    thread.start()
    return thread
