"""Slow and numerous clients against a real ``feltdb serve`` (issue 24, point 5): a client
trickling a request's headers once held its connection for minutes, and 20,000 of them
exhausted the server's file descriptors.
"""

from __future__ import annotations

import contextlib
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from support.server import Server, serve


@pytest.fixture(scope="module")
def impatient(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """A server that gives a request's head 1 s."""
    yield from serve(tmp_path_factory.mktemp("impatient"), None, "--request-timeout", "1")


@pytest.fixture(scope="module")
def crowded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """A server that keeps 20 connections at most."""
    yield from serve(tmp_path_factory.mktemp("crowded"), None, "--max-connections", "20")


def _connect(server: Server) -> socket.socket:
    host, port = server.url.removeprefix("http://").split(":")
    return socket.create_connection((host, int(port)), timeout=5)


def _closed_within(sock: socket.socket, seconds: float, trickle: bytes = b"") -> float | None:
    """How long until the server closed ``sock`` (``None``: still open after ``seconds``),
    sending ``trickle`` every 0.2 s meanwhile.
    """
    started = time.monotonic()
    sock.settimeout(0.2)
    while time.monotonic() - started < seconds:
        try:
            if trickle:
                sock.sendall(trickle)
            if sock.recv(4096) == b"":
                return time.monotonic() - started
        except TimeoutError:
            continue
        except OSError:  # reset by the server
            return time.monotonic() - started
    return None


def test_a_request_head_trickled_is_cut_off(impatient: Server) -> None:
    with contextlib.ExitStack() as stack:
        socks = [stack.enter_context(_connect(impatient)) for _ in range(10)]
        for sock in socks:
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: feltdb\r\n")
        closed = [_closed_within(sock, 4.0, trickle=b"X-Slow: 1\r\n") for sock in socks]
    assert all(after is not None and after < 3.0 for after in closed), closed
    assert httpx.get(f"{impatient.url}/healthz", timeout=2).status_code == 200


@pytest.mark.parametrize(
    "head",
    [
        b"POST /v1/claims HTTP/1.1\r\nHost: feltdb\r\nContent-Length: 100000\r\n\r\n",
        # Answered before its body is read: the body must still arrive in time.
        b"GET /healthz HTTP/1.1\r\nHost: feltdb\r\nContent-Length: 100000\r\n\r\n",
    ],
    ids=["body-read", "body-unread"],
)
def test_a_request_body_trickled_is_cut_off(impatient: Server, head: bytes) -> None:
    with contextlib.ExitStack() as stack:
        socks = [stack.enter_context(_connect(impatient)) for _ in range(5)]
        for sock in socks:
            sock.sendall(head)
        closed = [_closed_within(sock, 4.0, trickle=b"x") for sock in socks]
    assert all(after is not None and after < 3.0 for after in closed), closed


def test_a_connection_that_sends_nothing_is_cut_off(impatient: Server) -> None:
    with _connect(impatient) as sock:
        after = _closed_within(sock, 4.0)
    assert after is not None and after < 3.0, after


def test_a_kept_alive_connection_must_send_its_next_head_in_time(impatient: Server) -> None:
    with _connect(impatient) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: feltdb\r\n\r\n")
        assert sock.recv(4096).startswith(b"HTTP/1.1 200")
        sock.sendall(b"GET /healthz HTTP/1.1\r\n")
        after = _closed_within(sock, 4.0, trickle=b"X-Slow: 1\r\n")
    assert after is not None and after < 3.0, after


def test_a_request_that_arrives_whole_is_answered(impatient: Server) -> None:
    with httpx.Client(base_url=impatient.url) as http:
        for _ in range(3):
            assert http.get("/healthz").status_code == 200
            time.sleep(0.6)  # kept alive between requests, under the head's deadline


def test_connections_past_the_cap_are_refused_and_said_once(crowded: Server) -> None:
    with contextlib.ExitStack() as stack:
        for _ in range(20):
            stack.enter_context(_connect(crowded))
        time.sleep(0.3)
        answers = []
        for _ in range(30):
            with _connect(crowded) as extra:
                answers.append(_read_all(extra))
    assert all(a.startswith(b"HTTP/1.1 503") and b"SERVER_BUSY" in a for a in answers)
    assert all(b"Retry-After: 1" in a for a in answers)
    deadline = time.monotonic() + 5
    while True:
        try:
            if httpx.get(f"{crowded.url}/healthz", timeout=1).status_code == 200:
                break
        except httpx.TransportError:
            pass
        assert time.monotonic() < deadline, "the server never took connections again"
        time.sleep(0.1)
    said = [line for line in _log(crowded.log) if "refused over the cap" in line]
    assert len(said) == 1, said


def test_past_the_cap_a_newcomer_takes_the_place_of_the_longest_wait(crowded: Server) -> None:
    with contextlib.ExitStack() as stack:
        idle = [stack.enter_context(_connect(crowded)) for _ in range(20)]
        time.sleep(1.5)  # each has waited over a second for a request head
        for _ in range(5):
            assert httpx.get(f"{crowded.url}/healthz", timeout=2).status_code == 200
        closed = [sock for sock in idle if _closed_within(sock, 0.5) is not None]
    # Each newcomer took the place of an idle connection (connections the server had not
    # yet seen end, from the tests before, may count too).
    assert 5 <= len(closed) < 20, len(closed)


def _read_all(sock: socket.socket) -> bytes:
    chunks = []
    while chunk := sock.recv(4096):
        chunks.append(chunk)
    return b"".join(chunks)


def _log(path: Path) -> list[str]:
    return path.read_text().splitlines()
