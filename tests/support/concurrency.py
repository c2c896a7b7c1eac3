"""Threads and PostgreSQL sessions for the tests that race writers against each other."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import psycopg

JOIN_TIMEOUT_S = 120
"""How long a test waits for one of its threads before it fails."""
WAIT_TIMEOUT_S = 30


def run_threads(targets: list[Callable[[], None]]) -> None:
    """Run each target in a thread; re-raise the first error any of them raised."""
    errors: list[BaseException] = []

    def guarded(target: Callable[[], None]) -> Callable[[], None]:
        def run() -> None:
            try:
                target()
            except BaseException as error:
                errors.append(error)

        return run

    threads = [threading.Thread(target=guarded(target)) for target in targets]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(JOIN_TIMEOUT_S)
        assert not thread.is_alive(), "a thread did not finish"
    if errors:
        raise errors[0]


def wait_for_lock_waiter(url: str) -> None:
    """Return once some session of the database at ``url`` waits for a lock (polled, with
    a deadline).
    """
    deadline = time.monotonic() + WAIT_TIMEOUT_S
    with psycopg.connect(url, autocommit=True) as connection:
        while time.monotonic() < deadline:
            waiting = connection.execute(
                "SELECT count(*) FROM pg_stat_activity "
                "WHERE datname = current_database() AND wait_event_type = 'Lock'"
            ).fetchall()[0][0]
            if waiting:
                return
            time.sleep(0.005)
    raise AssertionError("no session started waiting for a lock")
