"""Wake-up hints between processes over one PostgreSQL database (``LISTEN``/``NOTIFY``).

Each test opens two :class:`PostgresDatabase` objects on one database, standing for two
processes: what one announces, the other's subscribers hear. Waits are bounded by
:data:`WAIT_S` only so that a broken hint fails the test instead of hanging it; nothing
here asserts how fast a hint arrives.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest
from support.factories import CAPABILITIES, make_request

from feltdb import Completion, WorkloadStore
from feltdb.storage.base import storage_failure
from feltdb.storage.postgres import PostgresDatabase

pytestmark = pytest.mark.postgres

WAIT_S = 30.0
NOW = 11


class Heard:
    """A subscriber that counts its calls and lets a test wait for the next one."""

    def __init__(self) -> None:
        self.calls = 0
        self._condition = threading.Condition()

    def __call__(self) -> None:
        with self._condition:
            self.calls += 1
            self._condition.notify_all()

    def wait_beyond(self, calls: int) -> int:
        """Wait until called more than ``calls`` times; the count then."""
        with self._condition:
            if not self._condition.wait_for(lambda: self.calls > calls, timeout=WAIT_S):
                pytest.fail(f"no wake-up within {WAIT_S} s (called {self.calls} times)")
            return self.calls


def wait_for(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"not within {WAIT_S} s: {what}")
        time.sleep(0.01)


@pytest.fixture
def url(new_pg_url: Callable[..., str]) -> str:
    return new_pg_url("wakeups")


@pytest.fixture
def databases(url: str) -> Iterator[tuple[PostgresDatabase, PostgresDatabase]]:
    one, two = PostgresDatabase(url), PostgresDatabase(url)
    try:
        yield one, two
    finally:
        one.close()
        two.close()


def listening(db: PostgresDatabase) -> Heard:
    """A subscriber of ``db``'s hints, once its listener listens (the listener calls its
    subscribers once when it starts listening, for what it may have missed before)."""
    heard = Heard()
    db.wakeups.subscribe(heard)
    heard.wait_beyond(0)
    return heard


def wakeup_sessions(url: str) -> list[int]:
    with psycopg.connect(url, autocommit=True) as admin:
        rows = admin.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
            "AND application_name = 'feltdb wakeups'"
        ).fetchall()
    return [pid for (pid,) in rows]


def test_work_admitted_by_one_process_wakes_the_subscribers_of_another(databases) -> None:
    one, two = databases
    heard = listening(two)
    before = heard.calls
    WorkloadStore(one).admit(make_request())
    heard.wait_beyond(before)
    wait_for(lambda: two.wakeups.received >= 1, "the hint counted")


def test_only_commits_that_may_make_work_claimable_are_announced(
    databases, monkeypatch: pytest.MonkeyPatch
) -> None:
    one, _ = databases
    announced: list[str] = []
    monkeypatch.setattr(one.wakeups, "announce", lambda: announced.append("hint"))
    store = WorkloadStore(one)
    store.admit(make_request(idempotency_key="a"))
    store.admit(make_request(idempotency_key="b"))
    assert len(announced) == 2  # each admission leaves work READY
    claims = store.claim_many("t", "app", "worker:w", CAPABILITIES, 2, NOW, 60_000, start=True)
    assert len(claims) == 2 and len(announced) == 2  # claims and starts wake nobody
    [held, other] = claims
    store.heartbeat(held.workload_id, held.claim_id, "worker:w", held.fencing_token, NOW)
    assert len(announced) == 2
    store.complete_many(
        [
            Completion(c.workload_id, c.claim_id, "worker:w", c.fencing_token, f"r-{n}", {})
            for n, c in enumerate(claims)
        ],
        now=NOW,
    )
    assert len(announced) == 4  # a success may unblock a dependent
    assert other.workload_id != held.workload_id


def test_a_burst_of_announcements_sends_few_notifications_and_one_after_the_last(
    databases,
) -> None:
    one, two = databases
    heard = listening(two)
    for _ in range(2000):
        one.wakeups.announce()
    # A burst merges into a few notifications (one per 50 ms at most), every one
    # sent is received, and the last announcement is followed by one.
    wait_for(lambda: one.wakeups.sent >= 1 and one.wakeups.idle, "the announcer idle")
    sent = one.wakeups.sent
    assert 1 <= sent < 200
    wait_for(lambda: two.wakeups.received == sent, f"{sent} notifications received")
    wait_for(lambda: heard.calls == 1 + sent, "each delivered")


def test_an_announcement_made_while_one_is_sent_is_sent_after_it(
    databases, monkeypatch: pytest.MonkeyPatch
) -> None:
    one, two = databases
    listening(two)
    sending, release = threading.Event(), threading.Event()
    send = one.wakeups._send

    def held_send(payload: str) -> None:
        sending.set()
        assert release.wait(WAIT_S)
        send(payload)

    monkeypatch.setattr(one.wakeups, "_send", held_send)
    one.wakeups.announce()
    assert sending.wait(WAIT_S)
    one.wakeups.announce()  # while the first is on its way
    release.set()
    wait_for(lambda: one.wakeups.sent == 2 and one.wakeups.idle, "a second notification")
    wait_for(lambda: two.wakeups.received == 2, "both received")


def test_a_database_object_does_not_hear_its_own_announcements(databases) -> None:
    one, two = databases
    own, other = listening(one), listening(two)
    one.wakeups.announce()
    other.wait_beyond(1)
    # Then two announces: one hears it. Notifications of one channel arrive in the order
    # they were committed, so one's own came first and was dropped.
    two.wakeups.announce()
    own.wait_beyond(1)
    wait_for(lambda: one.wakeups.received == 1 == two.wakeups.received, "one hint each")
    assert own.calls == 2


def test_a_listener_whose_connection_is_terminated_listens_again(databases, url: str) -> None:
    one, two = databases
    heard = listening(two)
    [listener] = wakeup_sessions(url)
    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", [listener])
    # Listening again, it tells its subscribers once: a hint may have been lost meanwhile.
    calls = heard.wait_beyond(1)
    wait_for(lambda: wakeup_sessions(url) not in ([], [listener]), "a new listening session")
    one.wakeups.announce()
    heard.wait_beyond(calls)
    wait_for(lambda: two.wakeups.received >= 1, "the hint counted")


def test_closing_ends_the_wake_up_sessions_and_threads(url: str) -> None:
    db = PostgresDatabase(url)
    listening(db)
    db.wakeups.announce()
    wait_for(lambda: db.wakeups.sent >= 1, "a notification sent")
    assert len(wakeup_sessions(url)) == 1  # the listener (the announcer borrows the pool)
    threads: list[Any] = [db.wakeups._listener, db.wakeups._announcer]
    db.close()
    assert all(not thread.is_alive() for thread in threads)
    wait_for(lambda: wakeup_sessions(url) == [], "the wake-up sessions gone")
    # After close nothing starts again, and nothing raises.
    db.wakeups.announce()
    db.wakeups.subscribe(Heard())
    assert [db.wakeups._listener, db.wakeups._announcer] == threads


def test_closing_before_any_thread_started_starts_none(url: str) -> None:
    db = PostgresDatabase(url)
    db.close()
    db.wakeups.announce()
    db.wakeups.subscribe(Heard())
    assert db.wakeups._announcer is None and db.wakeups._listener is None


def test_a_failed_send_is_logged_and_tried_again(
    databases, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    one, two = databases
    heard = listening(two)
    send = one.wakeups._send
    failures = [storage_failure("the pool is exhausted"), RuntimeError("not a driver error")]

    def failing_send(payload: str) -> None:
        if failures:
            raise failures.pop(0)
        send(payload)

    monkeypatch.setattr(one.wakeups, "_send", failing_send)
    with caplog.at_level(logging.WARNING, logger="feltdb.storage.postgres_wakeups"):
        one.wakeups.announce()  # fails twice (any error), then is sent: the thread lives on
        heard.wait_beyond(1)
    # (the notification may arrive before the announcer has counted it as sent)
    wait_for(lambda: one.wakeups.sent == 1, "one notification counted as sent")
    assert not failures
    warnings = [r.getMessage() for r in caplog.records if "not sent" in r.getMessage()]
    assert len(warnings) == 2
    assert "the pool is exhausted" in warnings[0] and "not a driver error" in warnings[1]


def test_a_listener_that_cannot_connect_is_logged_and_tries_again(
    url: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    db = PostgresDatabase(url)
    try:
        monkeypatch.setattr(db.wakeups, "_conninfo", "postgresql://nobody@/x?host=/nonexistent")
        heard = Heard()
        with caplog.at_level(logging.WARNING, logger="feltdb.storage.postgres_wakeups"):
            db.wakeups.subscribe(heard)
            wait_for(
                lambda: any("listener" in r.getMessage() for r in caplog.records),
                "the failed connection logged",
            )
        assert heard.calls == 0
        monkeypatch.setattr(db.wakeups, "_conninfo", url)
        heard.wait_beyond(0)  # listening after the next try
        assert db.wakeups._listener is not None and db.wakeups._listener.is_alive()
    finally:
        db.close()
