"""Forcing an interleaving: a maintenance sweep held between its read and its write, and a
PostgreSQL row lock that queues writers in a known order.

:class:`SweepPausedAfterRead` wraps a :class:`~feltdb.storage.base.Database` and holds the
first ``rows_due`` read of one column, after the rows are read and before they are
returned, until the test lets it go. ``enforce_deadlines`` and ``recover_expired`` decide
on exactly those rows, so whatever the test commits meanwhile (a completion, a heartbeat,
another writer's recovery and a new claim) lands inside the sweep's read-to-write window:
the window in which River's rescuer (riverqueue/river#1302) overwrote a job that had
completed or been claimed again after its stale read.

:func:`row_locked` and :func:`wait_for_lock_waiters` do the same below the store, on
PostgreSQL: a session holds the workload's row ``FOR UPDATE``, so each writer of it that
has read its version and issued its guarded ``UPDATE`` waits, visibly, in
``pg_stat_activity``; the writers are then let go in the order they queued.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from typing import Any

import psycopg

from feltdb import DURABLE_WORK_COLLECTION
from feltdb.storage.base import Database, StoredRow

WAIT_TIMEOUT_S = 30.0


class SweepPausedAfterRead:
    """``inner``, except that its first non-empty ``rows_due(column)`` read pauses after
    reading: it sets :attr:`paused` and waits for :attr:`resume` before answering.

    Everything else is ``inner``'s (attribute access is delegated).
    """

    def __init__(self, inner: Database, column: str) -> None:
        self.inner = inner
        self.column = column
        self.paused = threading.Event()
        self.resume = threading.Event()
        self.read: list[StoredRow] = []
        """What the paused read answered (the rows the sweep then decides on)."""
        self._held = False

    def rows_due(self, collection: str, column: str, now: int, *, limit: int) -> list[StoredRow]:
        rows = self.inner.rows_due(collection, column, now, limit=limit)
        if column == self.column and rows and not self._held:
            self._held = True
            self.read = list(rows)
            self.paused.set()
            if not self.resume.wait(WAIT_TIMEOUT_S):
                raise AssertionError("the paused sweep was never resumed")
        return rows

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


@contextlib.contextmanager
def row_locked(url: str, workload_id: str) -> Iterator[psycopg.Connection[Any]]:
    """Hold the workload's row ``FOR UPDATE`` in a session of its own until the block
    ends (then rolled back: the row is unchanged).
    """
    with psycopg.connect(url) as connection:
        found = connection.execute(
            "SELECT version FROM rows WHERE collection = %s AND key = %s FOR UPDATE",
            (DURABLE_WORK_COLLECTION, workload_id),
        ).fetchall()
        assert found, f"no row for {workload_id}"
        try:
            yield connection
        finally:
            connection.rollback()


def lock_waiters(url: str) -> int:
    """How many sessions of the database at ``url`` wait for a lock now."""
    with psycopg.connect(url, autocommit=True) as connection:
        return int(
            connection.execute(
                "SELECT count(*) FROM pg_stat_activity "
                "WHERE datname = current_database() AND wait_event_type = 'Lock'"
            ).fetchall()[0][0]
        )


def wait_for_lock_waiters(url: str, count: int) -> None:
    """Return once at least ``count`` sessions of the database wait for a lock."""
    deadline = time.monotonic() + WAIT_TIMEOUT_S
    while time.monotonic() < deadline:
        if lock_waiters(url) >= count:
            return
        time.sleep(0.005)
    raise AssertionError(f"fewer than {count} sessions started waiting for a lock")
