"""A worker's health, for what supervises it: ``GET /healthz`` on a port of its own, and
systemd's readiness and watchdog notifications.

A worker serves no HTTP of its own, so something must say whether it is doing its job.
The claim loop tells a :class:`Pulse` as it goes (a pass; a claim answered; a claim that
could not reach the authority), the heartbeat thread tells it the same of its heartbeats
and which attempts hold the handler slots, and :meth:`Pulse.verdict` judges from that alone:

- healthy while the loop runs, has passed within the bound, and has reached its
  authority (the server, or the store with ``--db``) within the bound;
- unhealthy until a claim first reached its authority; once it stops claiming (SIGTERM:
  a draining worker takes no more work); when no pass came for longer than the bound (a
  loop stuck); when its claims and heartbeats have failed to reach the authority for
  longer than the bound (a claim or a heartbeat answered is a reach); and when no claim
  was made for longer than the bound while every attempt holding a slot had been told to
  stop (its lease lost, or its work cancelled) for longer than the bound: handlers that
  do not return.

The bound is the caller's (``feltdb worker --unhealthy-after``, default
:data:`~feltdb.limits.DEFAULT_UNHEALTHY_AFTER_S`, 60 s), longer than an idle claim's
long-poll and :data:`POLL_MARGIN_S` (:func:`check_bound`). While every handler slot is busy
no claim is made: the heartbeats are then what reach the authority, and a handler that runs
on with its lease kept is healthy work, however long it takes.

:class:`HealthServer` answers ``GET``/``HEAD /healthz`` with ``200 {"status": "ok"}`` or
``503 {"status": "unavailable", "reason": …}``, bounded against its clients: at most
:data:`MAX_CONNECTIONS` held at once and :data:`MAX_THREADS` threads (more are closed
unanswered), :data:`MAX_THREADS` more waiting to be accepted, a request head of at most
:data:`MAX_HEAD_BYTES` read within :data:`READ_TIMEOUT_S` in all, no body ever read, one
small answer, then the connection is closed. A connection that has not sent its head
gives way to a newer one when every slot is taken (see :data:`MAX_CONNECTIONS`), so a few
silent connections, renewed before their read time is up, cannot keep a probe out.

:class:`SystemdNotifier` sends ``READY=1`` once the loop first reached its authority,
``WATCHDOG=1`` while the verdict is healthy (every half of ``WATCHDOG_USEC``), and
``STOPPING=1`` once it stops claiming.
"""

from __future__ import annotations

import json
import socket
import socketserver
import threading
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from feltdb.errors import ErrorCode, WorkloadError

if TYPE_CHECKING:
    from feltdb.worker.attempt import Attempt

MAX_CONNECTIONS = 8
"""Connections held at once. With every one taken, a new connection takes the place of the
oldest still waiting for its head (that one is closed unanswered); when none is waiting
(all are being answered), the new one is closed unanswered."""
MAX_THREADS = 2 * MAX_CONNECTIONS
"""Threads serving connections at once: those held, and those closed to make room that
have not ended yet (they end at once); past it, a new connection is closed unanswered."""
MAX_HEAD_BYTES = 8192
"""The most of a request's head (request line and headers) read; past it, ``400``."""
READ_TIMEOUT_S = 2.0
"""How long a client has, in all, to send its request's head."""
MAX_REASON_CHARS = 300
"""An unhealthy answer's reason is cut to this many characters."""
POLL_MARGIN_S = 5.0
"""How much longer than an idle claim's long-poll the bound must be: the time a claim's
answer may take past its wait (a busy server, a commit), so an idle worker does not flap."""


def check_bound(unhealthy_after_s: float, poll_wait_s: float) -> None:
    """Refuse a bound an idle worker's claim loop would cross while it waits for work.

    Raises:
        WorkloadError: ``WORKLOAD_INVALID``, the bound is not longer than ``poll_wait_s``
            and :data:`POLL_MARGIN_S`.
    """
    if unhealthy_after_s <= poll_wait_s + POLL_MARGIN_S:
        raise WorkloadError(
            ErrorCode.WORKLOAD_INVALID,
            f"an unhealthy bound of {unhealthy_after_s:g} s is too short: an idle worker's "
            f"claim waits {poll_wait_s:g} s for work (its poll_wait_s), so give more than "
            f"{poll_wait_s + POLL_MARGIN_S:g} s (the wait and a {POLL_MARGIN_S:g} s margin)",
        )


class Pulse:
    """What a worker's claim loop last told, judged by :meth:`verdict`. ``stopping`` is the
    worker's own event, set while it does not claim (before a run, and from a stop on).
    """

    def __init__(
        self, stopping: threading.Event, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._stopping = stopping
        self._clock = clock
        self._lock = threading.Lock()
        self._last_pass: float | None = None
        self._unreached_since: float | None = None
        self._unreached_by = ""
        self._claimed: float | None = None
        self._stopped_since: dict[str, float | None] = {}
        """The attempts holding slots, each with when it was first seen told to stop."""
        self.ever_reached = False
        """Whether a claim or a heartbeat of this process ever reached the authority."""

    def passed(self) -> None:
        """A pass of the claim loop began (the first one starts the clock of reaching)."""
        with self._lock:
            if self._last_pass is None:
                self._unreached_since = self._claimed = self._clock()
                self._unreached_by = "no claim has reached it yet"
            self._last_pass = self._clock()

    def reached(self) -> None:
        """A claim was answered by the authority."""
        self.beat(None, claim=True)

    def unreached(self, error: WorkloadError) -> None:
        """A claim failed without an answer (a transient failure: the loop tries again)."""
        self.beat(error, claim=True)

    def beat(self, error: WorkloadError | None, *, claim: bool = False) -> None:
        """A heartbeat (or with ``claim``, a claim) was answered (``error`` ``None``), or
        failed without an answer (``error``, a transient failure).
        """
        with self._lock:
            if claim:
                self._claimed = self._clock()
            if error is None:
                self._unreached_since = None
                self.ever_reached = True
            else:
                if self._unreached_since is None:
                    self._unreached_since = self._clock()
                self._unreached_by = error.message

    def holding(self, attempts: Iterable[Attempt]) -> None:
        """The attempts holding the handler slots now (told by the heartbeat thread)."""
        now = self._clock()
        with self._lock:
            before, self._stopped_since = self._stopped_since, {}
            for attempt in attempts:
                since = before.get(attempt.workload_id)
                stopped = attempt.lost.is_set() or attempt.cancel_requested.is_set()
                self._stopped_since[attempt.workload_id] = (
                    (now if since is None else since) if stopped else None
                )

    @property
    def stopping(self) -> bool:
        """Whether the loop has run and no longer claims."""
        return self._last_pass is not None and self._stopping.is_set()

    def verdict(self, unhealthy_after_s: float) -> str | None:
        """``None`` when healthy, else why not (see the module's rules)."""
        with self._lock:
            now = self._clock()
            if self._last_pass is None:
                return "the worker has not started claiming yet"
            if self._stopping.is_set():
                return "the worker is stopping: it claims no more work"
            if not self.ever_reached:  # as systemd's READY=1 waits for it
                return f"the authority has not been reached yet ({self._unreached_by})"
            if now - self._last_pass > unhealthy_after_s:
                return f"the claim loop has not passed for {now - self._last_pass:.0f} s"
            since = self._unreached_since
            if since is not None and now - since > unhealthy_after_s:
                return (
                    f"the authority has not been reached for {now - since:.0f} s "
                    f"({self._unreached_by})"
                )
            return self._stuck(now, unhealthy_after_s)

    def _stuck(self, now: float, unhealthy_after_s: float) -> str | None:
        """Why handlers told to stop are keeping the worker from work, if they are."""
        told = list(self._stopped_since.values())
        if not told or None in told or self._claimed is None:
            return None
        for_s = now - max(t for t in told if t is not None)
        if for_s <= unhealthy_after_s or now - self._claimed <= unhealthy_after_s:
            return None
        return (
            f"no claim for {now - self._claimed:.0f} s: every handler slot is held by a "
            f"handler told to stop {for_s:.0f} s ago or more (its lease lost or its work "
            "cancelled) that has not returned"
        )


def answer_for(head: bytes, verdict: Callable[[], str | None]) -> tuple[int, bytes]:
    """The status and JSON body answering the request whose head is ``head``."""
    line = head.split(b"\n", 1)[0].decode("latin-1").strip()
    parts = line.split()
    if len(parts) != 3 or not parts[2].startswith("HTTP/"):
        return 400, _json({"status": "bad request"})
    method, target = parts[0], parts[1]
    if target.split("?", 1)[0] != "/healthz":
        return 404, _json({"status": "not found", "reason": "only /healthz is served"})
    if method not in ("GET", "HEAD"):
        return 405, _json({"status": "method not allowed"})
    reason = verdict()
    if reason is None:
        return 200, _json({"status": "ok"})
    return 503, _json({"status": "unavailable", "reason": reason[:MAX_REASON_CHARS]})


def _json(body: dict[str, str]) -> bytes:
    return json.dumps(body).encode()


_Request = socket.socket | tuple[bytes, socket.socket]
"""What socketserver hands a request handler (a stream server: the socket)."""

REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed"}


class _Handler(socketserver.BaseRequestHandler):
    server: HealthServer

    def handle(self) -> None:
        connection: socket.socket = self.request
        head = _read_head(connection)
        if head is None or not self.server.answering(connection):
            return  # too slow, gone, or closed to make room: unanswered
        status, body = answer_for(head, self.server.verdict)
        is_head = head.startswith(b"HEAD ")
        reason = REASONS.get(status, "Service Unavailable")
        lines = [
            f"HTTP/1.1 {status} {reason}",
            "Content-Type: application/json",
            f"Content-Length: {len(body)}",
            "Cache-Control: no-store",
            "Connection: close",
        ]
        if status == 405:
            lines.append("Allow: GET, HEAD")
        answer = ("\r\n".join(lines) + "\r\n\r\n").encode() + (b"" if is_head else body)
        connection.settimeout(READ_TIMEOUT_S)
        try:
            connection.sendall(answer)
        except OSError:
            pass  # the client left; nothing to tell it


def _read_head(connection: socket.socket) -> bytes | None:
    """The request's head (up to :data:`MAX_HEAD_BYTES`), read within
    :data:`READ_TIMEOUT_S` in all; ``None`` when it did not come in time.
    """
    deadline = time.monotonic() + READ_TIMEOUT_S
    head = b""
    while b"\r\n\r\n" not in head and b"\n\n" not in head:
        if len(head) >= MAX_HEAD_BYTES:
            return b""  # answered 400: a head this long is no probe
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return None
        connection.settimeout(remaining)
        try:
            chunk = connection.recv(MAX_HEAD_BYTES - len(head))
        except OSError:
            return None
        if not chunk:
            return head or None
        head += chunk
    return head


class HealthServer(socketserver.ThreadingMixIn, socketserver.TCPServer):
    """``/healthz`` on ``host:port`` (port 0: a free one, see :attr:`port`), answering
    ``verdict()``; served on a daemon thread from :meth:`start` until :meth:`close`.
    """

    daemon_threads = True
    allow_reuse_address = True
    block_on_close = False
    request_queue_size = MAX_THREADS  # socketserver's 5 drops a burst's connections for 1 s

    def __init__(self, host: str, port: int, verdict: Callable[[], str | None]) -> None:
        self.address_family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self.verdict = verdict
        self._lock = threading.Lock()
        self._held: dict[socket.socket, bool] = {}
        """The connections held, oldest first, each with whether it still awaits its head."""
        self._serving_threads = 0
        self._serving = False
        super().__init__((host, port), _Handler)

    @property
    def port(self) -> int:
        """The port listened on."""
        port: int = self.server_address[1]
        return port

    def start(self) -> None:
        """Serve on a daemon thread."""
        self._serving = True
        threading.Thread(
            target=self.serve_forever, kwargs={"poll_interval": 0.25}, name="feltdb-healthz",
            daemon=True,
        ).start()  # fmt: skip

    def close(self) -> None:
        """Stop serving and close the socket."""
        if self._serving:  # shutdown() waits for a loop that was never started forever
            self.shutdown()
        self.server_close()

    def process_request(self, request: _Request, client_address: Any) -> None:
        """Answer on a thread of its own, within :data:`MAX_CONNECTIONS` (making room by
        closing the oldest connection still waiting for its head) and :data:`MAX_THREADS`.
        """
        assert isinstance(request, socket.socket)  # a stream server's request
        with self._lock:
            if not self._make_room():
                self.shutdown_request(request)  # bounded: a flood is not answered
                return
            self._held[request] = True
            self._serving_threads += 1
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._ended(request)
            raise

    def _make_room(self) -> bool:
        """Whether one more connection may be held (under the lock)."""
        if self._serving_threads >= MAX_THREADS:
            return False
        if len(self._held) < MAX_CONNECTIONS:
            return True
        # The oldest still silent gives way: a slow client is served only while no newer
        # one wants its slot (a probe sends its head at once; it is not the oldest).
        silent = next((held for held, waiting in self._held.items() if waiting), None)
        if silent is None:
            return False
        del self._held[silent]
        try:
            silent.shutdown(socket.SHUT_RDWR)  # its thread's read ends now; it closes it
        except OSError:
            pass  # closed already by its thread, which is ending
        return True

    def answering(self, connection: socket.socket) -> bool:
        """Whether ``connection``, its head read, is still held, now to be answered (it no
        longer gives way to a newer one); ``False``: it was closed to make room.
        """
        with self._lock:
            if connection not in self._held:
                return False
            self._held[connection] = False
            return True

    def process_request_thread(self, request: _Request, client_address: Any) -> None:
        """Answer, then give the connection's slot back."""
        try:
            super().process_request_thread(request, client_address)
        finally:
            assert isinstance(request, socket.socket)
            self._ended(request)

    def _ended(self, request: socket.socket) -> None:
        with self._lock:
            self._held.pop(request, None)
            self._serving_threads -= 1
