"""Bounds on the server's connections, so slow or numerous clients cannot exhaust it.

uvicorn closes a connection left idle after a response (its keep-alive timeout), but not
one that never finishes sending a request: a client sending a header line (or a byte of a
body) every few seconds held its connection for minutes, and 20,000 of them used up the
process's file descriptors. :func:`guarded_protocol` makes uvicorn's HTTP/1.1 protocol
class with two bounds:

- **the request's deadline**: from the moment a connection opens, or is ready for its next
  request after a response, the whole request (its line, headers and body) must arrive
  within ``request_timeout_s``; past it the connection is closed. (Bodies are at most 1
  MiB; a request whose body is still arriving after the answer was sent is held to it too.)
- **a cap on open connections**: past ``max_connections``, a new connection takes the place
  of the connection that has waited longest for its request, if it has waited
  :data:`EVICTABLE_AFTER_S` or more (a slow client, or one idle between requests); when
  none has, the new one is answered ``503`` (``Connection: close``) and closed at once,
  before anything is read from it. So clients holding connections without sending a
  request starve nobody: a health check finds a place after at most that long. A request
  that has arrived whole (a long-poll waiting for work) is never closed for another.

Refused connections are counted and said in the log at most once per
:data:`REFUSALS_LOGGED_EVERY_S`, so a flood does not flood the log as well.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections import OrderedDict
from typing import Any, ClassVar

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from feltdb.server.errors import RouteCode, error_body

__all__ = [
    "DEFAULT_MAX_CONNECTIONS",
    "DEFAULT_REQUEST_TIMEOUT_S",
    "REFUSALS_LOGGED_EVERY_S",
    "guarded_protocol",
]

log = logging.getLogger("feltdb.server")

DEFAULT_REQUEST_TIMEOUT_S = 10.0
"""How long a request (line, headers, body) may take to arrive, by default."""

DEFAULT_MAX_CONNECTIONS = 1000
"""How many connections the server keeps open at once, by default."""

EVICTABLE_AFTER_S = 1.0
"""How long a connection must have waited for its request before a newcomer past the cap may
take its place."""

REFUSALS_LOGGED_EVERY_S = 10.0
"""How often, at most, the log says that connections were refused or timed out."""


def _busy_answer(max_connections: int) -> bytes:
    """The whole ``503`` a connection past the cap gets, written before it is closed."""
    body = json.dumps(
        error_body(
            RouteCode.SERVER_BUSY,
            f"the server holds its most connections ({max_connections}); try again shortly",
        )
    ).encode()
    head = (
        "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
        f"Retry-After: 1\r\nConnection: close\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    return head.encode("ascii") + body


class _Tally:
    """Connections refused, closed for a newcomer, and timed out since the log said so."""

    def __init__(self) -> None:
        self.refused = 0
        self.timed_out = 0
        self.evicted = 0
        self._said_at = float("-inf")

    def count(self, *, refused: int = 0, timed_out: int = 0, evicted: int = 0) -> None:
        self.refused += refused
        self.timed_out += timed_out
        self.evicted += evicted
        now = time.monotonic()
        if now - self._said_at < REFUSALS_LOGGED_EVERY_S:
            return
        self._said_at = now
        log.warning(
            "connections: %d refused over the cap, %d closed for a newcomer, %d closed for "
            "a request too slow (said at most every %g s)",
            self.refused,
            self.evicted,
            self.timed_out,
            REFUSALS_LOGGED_EVERY_S,
        )
        self.refused = self.timed_out = self.evicted = 0


_ARRIVING = (h11.IDLE, h11.SEND_BODY)
"""The client's states while its request has not arrived whole: none begun (or its head
arriving), its body arriving."""


class _GuardedH11Protocol(H11Protocol):
    """The HTTP/1.1 protocol of uvicorn, with the module's two bounds (set on a subclass)."""

    request_timeout_s: ClassVar[float] = DEFAULT_REQUEST_TIMEOUT_S
    max_connections: ClassVar[int] = DEFAULT_MAX_CONNECTIONS
    tally: ClassVar[_Tally]
    busy_answer: ClassVar[bytes]
    awaiting: ClassVar[OrderedDict[_GuardedH11Protocol, float]]
    """The connections awaiting a request, oldest wait first, with when the wait began."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        if len(self.connections) >= self.max_connections and not self._evict_one():
            # Set, for connection_lost closes it; never added to the open connections.
            self.transport = transport
            transport.write(self.busy_answer)
            transport.close()
            self.tally.count(refused=1)
            return
        super().connection_made(transport)
        self._watch_request()

    def _evict_one(self) -> bool:
        """Close the connection that has waited longest for its request, if it has waited
        :data:`EVICTABLE_AFTER_S`; whether one was.
        """
        if not self.awaiting:
            return False
        oldest, since = next(iter(self.awaiting.items()))
        if self.loop.time() - since < EVICTABLE_AFTER_S:
            return False
        oldest._stop_deadline()
        oldest.transport.close()
        self.tally.count(evicted=1)
        return True

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_deadline()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        self._watch_request()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._watch_request()

    def _watch_request(self) -> None:
        """Start the request's deadline while a request is awaited, its head or its body
        (once: more bytes do not push it back); stop it once the request has arrived.
        """
        if self.transport is None or self.transport.is_closing():
            return
        if self.conn.their_state not in _ARRIVING:
            self._stop_deadline()
        elif self._deadline is None:
            self._deadline = self.loop.call_later(self.request_timeout_s, self._too_slow)
            self.awaiting[self] = self.loop.time()

    def _stop_deadline(self) -> None:
        self.awaiting.pop(self, None)
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _too_slow(self) -> None:
        self._deadline = None
        self.awaiting.pop(self, None)
        if self.conn.their_state in _ARRIVING and not self.transport.is_closing():
            self.tally.count(timed_out=1)
            self.transport.close()


def guarded_protocol(request_timeout_s: float, max_connections: int) -> type[H11Protocol]:
    """The HTTP/1.1 protocol class for ``uvicorn.Config(http=...)`` that closes a
    connection whose request takes over ``request_timeout_s`` seconds to arrive and keeps at most
    ``max_connections`` open (see the module: a newcomer past it takes the place of the
    longest wait for a request, or is answered ``503``).
    """
    return type(
        "GuardedH11Protocol",
        (_GuardedH11Protocol,),
        {
            "request_timeout_s": request_timeout_s,
            "max_connections": max_connections,
            "tally": _Tally(),
            "awaiting": OrderedDict(),
            "busy_answer": _busy_answer(max_connections),
        },
    )
