"""The asynchronous HTTP client: :class:`AsyncClient`, every call of
:class:`~feltdb.client.Client` (the same names, arguments, records and refusals), each a
coroutine, over an :class:`httpx.AsyncClient`.

The calls are :class:`~feltdb.client.http.HttpCalls`', written once for both clients
(:mod:`feltdb.client.calls`); this module only awaits each request's answer. An async
handler of the worker runtime may use one (``AsyncClient(url, token=token)``, the worker's
server and a token of its own), as any asyncio code may.
"""

from __future__ import annotations

from types import TracebackType
from typing import Any

import httpx

from feltdb.client.calls import Answer, Awaiting, Request
from feltdb.client.http import HttpCalls

__all__ = ["AsyncClient"]


class AsyncClient(Awaiting, HttpCalls):
    """A client of a feltdb server at ``url`` whose calls are awaited, acting as the grant
    ``token`` carries.

    ``timeout`` bounds each request in seconds (a long-poll's ``wait_ms`` is added to it).
    Use it as an async context manager, or await :meth:`aclose`. One client may be shared
    by the tasks of one event loop (it holds an :class:`httpx.AsyncClient` connection
    pool).

    Example:
        >>> async with AsyncClient(url, token=token) as client:  # doctest: +SKIP
        ...     workload, created = await client.admit(
        ...         definition_id="send-email", input={"to": "ada@example.com"},
        ...         idempotency_key="k1")
    """

    _http: httpx.AsyncClient

    def _open(self, **options: Any) -> httpx.AsyncClient:
        return httpx.AsyncClient(**options)

    async def aclose(self) -> None:
        """Close the connections."""
        await self._http.aclose()

    async def close(self) -> None:
        """:meth:`aclose`, under :class:`~feltdb.client.Client`'s name."""
        await self.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def _exchange(self, request: Request) -> Answer:
        outgoing = self._outgoing(request)
        try:
            answer = await self._http.request(**outgoing)
        except httpx.TransportError as error:
            raise self._unanswered(error, request) from error
        return self._answer(answer, request)
