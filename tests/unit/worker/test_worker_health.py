"""A worker's health: the pulse's verdict, /healthz's answers and bounds, and systemd's
notifications (feltdb.worker.health, feltdb.worker.supervised)."""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

from feltdb.errors import ErrorCode, WorkloadError
from feltdb.worker.health import (
    MAX_CONNECTIONS,
    MAX_HEAD_BYTES,
    MAX_REASON_CHARS,
    POLL_MARGIN_S,
    HealthServer,
    Pulse,
    answer_for,
    check_bound,
)
from feltdb.worker.supervised import SystemdNotifier

BOUND_S = 60.0


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


def pulse_of(clock: Clock) -> tuple[Pulse, threading.Event]:
    stopping = threading.Event()
    return Pulse(stopping, clock), stopping


def unreachable() -> WorkloadError:
    return WorkloadError(ErrorCode.WORKLOAD_STORAGE_FAILURE, "cannot reach http://127.0.0.1:9")


def test_a_worker_is_unhealthy_until_its_loop_passes_then_healthy_while_it_reaches(clock: Clock):
    pulse, _ = pulse_of(clock)
    assert pulse.verdict(BOUND_S) == "the worker has not started claiming yet"
    pulse.passed()
    pulse.reached()
    assert pulse.verdict(BOUND_S) is None and pulse.ever_reached
    clock.now += 30
    pulse.passed()
    assert pulse.verdict(BOUND_S) is None


def test_failing_to_reach_the_authority_is_unhealthy_past_the_bound_only(clock: Clock):
    pulse, _ = pulse_of(clock)
    pulse.passed()
    pulse.reached()
    pulse.unreached(unreachable())
    clock.now += BOUND_S  # at the bound: still healthy (one slow outage is not yet one)
    pulse.passed()
    pulse.unreached(unreachable())
    assert pulse.verdict(BOUND_S) is None
    clock.now += 1
    pulse.passed()
    reason = pulse.verdict(BOUND_S)
    assert reason == (
        "the authority has not been reached for 61 s (cannot reach http://127.0.0.1:9)"
    )
    pulse.reached()  # back: healthy at once
    assert pulse.verdict(BOUND_S) is None


def test_a_worker_is_unhealthy_until_a_claim_first_reaches_its_authority(clock: Clock):
    # As systemd's READY=1 waits for it: a worker that never reached its server is not
    # ready, from its first pass on, not only once the bound has passed.
    pulse, _ = pulse_of(clock)
    pulse.passed()
    never = "the authority has not been reached yet (no claim has reached it yet)"
    assert pulse.verdict(BOUND_S) == never
    clock.now += BOUND_S + 5
    pulse.unreached(WorkloadError(ErrorCode.WORKLOAD_STORAGE_FAILURE, "connection refused"))
    pulse.passed()
    assert pulse.verdict(BOUND_S) == "the authority has not been reached yet (connection refused)"
    assert not pulse.ever_reached
    pulse.reached()
    assert pulse.verdict(BOUND_S) is None and pulse.ever_reached


def test_a_loop_without_a_pass_past_the_bound_is_unhealthy(clock: Clock):
    pulse, _ = pulse_of(clock)
    pulse.passed()
    pulse.reached()
    clock.now += BOUND_S + 1
    assert pulse.verdict(BOUND_S) == "the claim loop has not passed for 61 s"


def test_a_stopping_worker_is_unhealthy(clock: Clock):
    pulse, stopping = pulse_of(clock)
    pulse.passed()
    pulse.reached()
    assert not pulse.stopping
    stopping.set()
    assert pulse.stopping
    assert pulse.verdict(BOUND_S) == "the worker is stopping: it claims no more work"


def test_heartbeats_that_fail_to_reach_the_authority_count_while_no_claim_is_made(clock: Clock):
    pulse, _ = pulse_of(clock)
    pulse.passed()
    pulse.reached()
    clock.now += 10  # every slot busy from here: the loop passes, but claims nothing
    pulse.passed()
    pulse.beat(None)  # a heartbeat answered: reached
    pulse.beat(unreachable())
    clock.now += BOUND_S
    pulse.passed()
    pulse.beat(unreachable())
    assert pulse.verdict(BOUND_S) is None
    clock.now += 1
    pulse.passed()
    assert pulse.verdict(BOUND_S) == (
        "the authority has not been reached for 61 s (cannot reach http://127.0.0.1:9)"
    )
    pulse.beat(None)
    assert pulse.verdict(BOUND_S) is None


@dataclass
class Held:
    """What the pulse reads of an attempt holding a slot."""

    workload_id: str
    lost: threading.Event = field(default_factory=threading.Event)
    cancel_requested: threading.Event = field(default_factory=threading.Event)


def test_slots_all_held_by_handlers_told_to_stop_are_unhealthy_past_the_bound(clock: Clock):
    pulse, _ = pulse_of(clock)
    pulse.passed()
    pulse.reached()
    lost, cancelled = Held("wl_1"), Held("wl_2")
    pulse.holding([lost, cancelled])
    clock.now += BOUND_S * 2  # running with their leases kept: healthy work, however long
    pulse.passed()
    pulse.beat(None)
    pulse.holding([lost, cancelled])
    assert pulse.verdict(BOUND_S) is None
    lost.lost.set()
    pulse.holding([lost, cancelled])
    clock.now += 10
    cancelled.cancel_requested.set()
    pulse.holding([lost, cancelled])
    clock.now += BOUND_S  # the cancelled one told only 60 s ago
    pulse.passed()
    pulse.holding([lost, cancelled])
    assert pulse.verdict(BOUND_S) is None
    clock.now += 1
    pulse.passed()
    pulse.holding([lost, cancelled])
    assert pulse.verdict(BOUND_S) == (
        "no claim for 191 s: every handler slot is held by a handler told to stop 61 s ago "
        "or more (its lease lost or its work cancelled) that has not returned"
    )
    pulse.holding([lost])  # the cancelled one returned: its slot is free, and claimed from
    pulse.reached()
    assert pulse.verdict(BOUND_S) is None


def test_a_slot_held_by_a_stopped_handler_is_healthy_while_claims_are_made(clock: Clock):
    pulse, _ = pulse_of(clock)
    pulse.passed()
    stuck = Held("wl_1")
    stuck.lost.set()
    pulse.holding([stuck])
    for _ in range(3):  # other slots free: the loop keeps claiming
        clock.now += BOUND_S
        pulse.passed()
        pulse.reached()
        pulse.holding([stuck])
    assert pulse.verdict(BOUND_S) is None


def test_a_bound_an_idle_claim_would_cross_is_refused():
    check_bound(POLL_MARGIN_S + 2.5, 2.0)
    with pytest.raises(WorkloadError) as refused:
        check_bound(POLL_MARGIN_S + 2.0, 2.0)
    assert refused.value.code == ErrorCode.WORKLOAD_INVALID
    assert "claim waits 2 s for work (its poll_wait_s), so give more than 7 s" in str(refused.value)


@pytest.mark.parametrize(
    ("head", "status"),
    [
        (b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n", 200),
        (b"HEAD /healthz?probe=1 HTTP/1.0\r\n\r\n", 200),
        (b"GET /readyz HTTP/1.1\r\n\r\n", 404),
        (b"POST /healthz HTTP/1.1\r\nContent-Length: 5\r\n\r\n", 405),
        (b"GET /healthz\r\n\r\n", 400),
        (b"\x16\x03\x01 tls hello", 400),
        (b"", 400),
    ],
)
def test_only_get_and_head_of_healthz_are_answered(head: bytes, status: int):
    assert answer_for(head, lambda: None)[0] == status


def test_an_unhealthy_answer_is_503_with_its_reason_cut_short():
    status, body = answer_for(b"GET /healthz HTTP/1.1\r\n\r\n", lambda: "x" * 1000)
    assert status == 503
    assert body == b'{"status": "unavailable", "reason": "' + b"x" * MAX_REASON_CHARS + b'"}'


@pytest.fixture
def health() -> Iterator[tuple[HealthServer, list[str | None]]]:
    said: list[str | None] = [None]
    server = HealthServer("127.0.0.1", 0, lambda: said[0])
    server.start()
    yield server, said
    server.close()


def test_the_server_answers_the_verdict_of_the_moment(
    health: tuple[HealthServer, list[str | None]],
):
    server, said = health
    url = f"http://127.0.0.1:{server.port}/healthz"
    answer = httpx.get(url, timeout=5)
    assert answer.status_code == 200 and answer.json() == {"status": "ok"}
    assert answer.headers["connection"] == "close"
    said[0] = "the worker is stopping: it claims no more work"
    answer = httpx.get(url, timeout=5)
    assert answer.status_code == 503 and answer.json()["reason"] == said[0]
    assert httpx.head(url, timeout=5).content == b""


def test_a_client_that_sends_no_request_is_closed_unanswered(
    health: tuple[HealthServer, list[str | None]],
):
    server, _ = health
    with socket.create_connection(("127.0.0.1", server.port)) as silent:
        silent.settimeout(30)
        assert silent.recv(100) == b""  # closed by the server once its read time is up


def test_a_head_past_its_bound_is_refused(health: tuple[HealthServer, list[str | None]]):
    server, _ = health
    with socket.create_connection(("127.0.0.1", server.port)) as client:
        client.settimeout(30)
        client.sendall(b"GET /healthz HTTP/1.1\r\nX-Pad: " + b"a" * MAX_HEAD_BYTES)
        assert client.recv(100).startswith(b"HTTP/1.1 400 ")


def test_a_probe_is_answered_while_silent_connections_hold_every_slot(
    health: tuple[HealthServer, list[str | None]],
):
    server, _ = health
    url = f"http://127.0.0.1:{server.port}/healthz"
    silent: list[socket.socket] = []
    try:
        for _ in range(3):  # renewed, as an attacker renews them before their read time
            silent += [socket.create_connection(("127.0.0.1", server.port))
                       for _ in range(MAX_CONNECTIONS)]  # fmt: skip
            # Accepted in order, after every silent one: the oldest waiting make room.
            answer = httpx.get(url, timeout=30)
            assert answer.status_code == 200 and answer.json() == {"status": "ok"}
        oldest = silent[0]
        oldest.settimeout(30)
        assert oldest.recv(100) == b""  # hung up on, unanswered
    finally:
        for connection in silent:
            connection.close()


def test_connections_past_the_bound_are_closed_unanswered_while_all_are_answered():
    # Every slot answering (its verdict held): none waits for its head, so none gives way.
    release = threading.Event()
    asked = threading.Semaphore(0)

    def slow_verdict() -> None:
        asked.release()
        release.wait(30)

    server = HealthServer("127.0.0.1", 0, slow_verdict)
    server.start()
    held = [socket.create_connection(("127.0.0.1", server.port)) for _ in range(MAX_CONNECTIONS)]
    try:
        for connection in held:
            connection.sendall(b"GET /healthz HTTP/1.1\r\n\r\n")
        for _ in held:
            assert asked.acquire(timeout=30)
        with socket.create_connection(("127.0.0.1", server.port)) as extra:
            extra.settimeout(30)
            extra.sendall(b"GET /healthz HTTP/1.1\r\n\r\n")
            assert extra.recv(100) == b""
        release.set()
        for connection in held:
            connection.settimeout(30)
            assert connection.recv(100).startswith(b"HTTP/1.1 200 ")
    finally:
        release.set()
        for connection in held:
            connection.close()
        server.close()


def test_a_port_in_use_is_said_at_once():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        with pytest.raises(OSError):
            HealthServer("127.0.0.1", taken.getsockname()[1], lambda: None)


def test_systemd_is_told_ready_alive_and_stopping(
    tmp_path: Path, clock: Clock, monkeypatch: pytest.MonkeyPatch
):
    address = str(tmp_path / "notify")
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as systemd:
        systemd.bind(address)
        systemd.settimeout(30)
        monkeypatch.setenv("NOTIFY_SOCKET", address)
        monkeypatch.setenv("WATCHDOG_USEC", "200000")
        monkeypatch.setenv("WATCHDOG_PID", str(os.getpid()))
        pulse, stopping = pulse_of(clock)
        notifier = SystemdNotifier.from_environment(pulse, BOUND_S)
        assert notifier is not None
        notifier.start()
        try:
            pulse.passed()
            pulse.reached()
            assert systemd.recv(100) == b"READY=1\nSTATUS=claiming work"
            assert systemd.recv(100) == b"WATCHDOG=1"
            assert systemd.recv(100) == b"WATCHDOG=1"  # again, while healthy
            stopping.set()
            while (said := systemd.recv(100)) == b"WATCHDOG=1":
                pass  # one may have been on its way
            assert said.startswith(b"STOPPING=1\n")
        finally:
            notifier.close()


class WatchedPulse(Pulse):
    """A pulse that counts the verdicts it gave as unhealthy (the notifier asks every tick)."""

    def __init__(self, stopping: threading.Event, clock: Clock) -> None:
        super().__init__(stopping, clock)
        self.unhealthy = 0
        self.asked = threading.Condition()

    def verdict(self, unhealthy_after_s: float) -> str | None:
        reason = super().verdict(unhealthy_after_s)
        with self.asked:
            self.unhealthy += reason is not None
            self.asked.notify_all()
        return reason

    def wait_unhealthy(self, times: int) -> None:
        """Until ``times`` more verdicts were unhealthy."""
        with self.asked:
            until = self.unhealthy + times
            assert self.asked.wait_for(lambda: self.unhealthy >= until, timeout=30)


def test_the_watchdog_is_not_fed_while_the_worker_is_unhealthy(
    tmp_path: Path, clock: Clock, monkeypatch: pytest.MonkeyPatch
):
    address = str(tmp_path / "notify")
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as systemd:
        systemd.bind(address)
        systemd.settimeout(30)
        monkeypatch.setenv("NOTIFY_SOCKET", address)
        monkeypatch.setenv("WATCHDOG_USEC", "200000")  # a beat due at every tick
        monkeypatch.delenv("WATCHDOG_PID", raising=False)
        pulse = WatchedPulse(threading.Event(), clock)
        notifier = SystemdNotifier.from_environment(pulse, BOUND_S)
        assert notifier is not None
        notifier.start()
        try:
            pulse.passed()
            pulse.reached()
            assert systemd.recv(100) == b"READY=1\nSTATUS=claiming work"
            assert systemd.recv(100) == b"WATCHDOG=1"
            pulse.unreached(unreachable())
            clock.now += BOUND_S + 1
            pulse.passed()
            # Once a tick judged it unhealthy, a beat of an earlier tick has been sent: let
            # them go, then several ticks judge it unhealthy and none may feed the watchdog.
            pulse.wait_unhealthy(1)
            systemd.setblocking(False)
            while True:
                try:
                    assert systemd.recv(100) == b"WATCHDOG=1"
                except BlockingIOError:
                    break
            pulse.wait_unhealthy(4)
            with pytest.raises(BlockingIOError):
                systemd.recv(100)
            systemd.settimeout(30)
            pulse.reached()  # the authority back: fed again
            assert systemd.recv(100) == b"WATCHDOG=1"
        finally:
            notifier.close()


def test_no_notifier_without_systemd_and_no_watchdog_for_another_process(
    clock: Clock, monkeypatch: pytest.MonkeyPatch
):
    pulse, _ = pulse_of(clock)
    monkeypatch.delenv("NOTIFY_SOCKET", raising=False)
    assert SystemdNotifier.from_environment(pulse, BOUND_S) is None
    monkeypatch.setenv("NOTIFY_SOCKET", "@feltdb-test")
    monkeypatch.setenv("WATCHDOG_USEC", "200000")
    monkeypatch.setenv("WATCHDOG_PID", str(os.getpid() + 1))
    notifier = SystemdNotifier.from_environment(pulse, BOUND_S)
    assert notifier is not None and notifier.watchdog_s is None
    notifier.close()


def test_a_server_never_started_closes():
    HealthServer("127.0.0.1", 0, lambda: None).close()
