"""The HTTP client: :class:`~feltdb.work.store.WorkloadStore`'s operations over ``/v1``.

The caller's identity is its bearer token, so no method takes a requester, worker, decider
or tenant: the server takes them from the verified grant. Answers are the library's own
records, parsed from the server's JSON; refusals :class:`~feltdb.client.refusals.ClientError`
(the server's code, message, details and HTTP status).

Each call is written once (:mod:`feltdb.client.calls`: the requests it makes and what it
makes of their answers) and shared with :class:`~feltdb.client.http_async.AsyncClient`;
:class:`Client` only carries each request over an :class:`httpx.Client`.
"""

from __future__ import annotations

from typing import Any

import httpx

from feltdb.client.calls import Answer, Blocking, Request
from feltdb.client.carrying import Carrier
from feltdb.client.http_audit import HttpAudit
from feltdb.client.http_batches import HttpBatches
from feltdb.client.http_schedules import HttpSchedules
from feltdb.client.http_work import HttpWork
from feltdb.client.http_workers import HttpWorkers
from feltdb.client.limits import HttpLimits
from feltdb.client.protocol import AuditPage, Page, WorkloadClient
from feltdb.client.refusals import ClientError, server_url
from feltdb.client.retention import HttpRetention
from feltdb.client.workflows import HttpWorkflows

__all__ = ["AuditPage", "Client", "ClientError", "HttpCalls", "Page", "server_url"]


class HttpCalls(
    HttpWork,
    HttpWorkers,
    HttpAudit,
    HttpBatches,
    HttpLimits,
    HttpRetention,
    HttpSchedules,
    HttpWorkflows,
    Carrier,
):
    """Every call of the HTTP clients, written once; a client adds how it carries them."""


class Client(Blocking, HttpCalls, WorkloadClient):
    """A client of a feltdb server at ``url``, acting as the grant ``token`` carries.

    ``timeout`` bounds each request in seconds (a long-poll's ``wait_ms`` is added to it).
    Use it as a context manager, or call :meth:`close`. One client may be shared by the
    threads of a process (it holds an :class:`httpx.Client` connection pool).

    Example:
        >>> with Client("http://127.0.0.1:8700", token) as felt:  # doctest: +SKIP
        ...     workload, created = felt.admit(
        ...         environment="production", definition_id="send", definition_revision="r1",
        ...         trigger="manual", input={"to": "ada@example.com"},
        ...         capability_snapshot=["email:send"], idempotency_key="one")
    """

    _http: httpx.Client

    def _open(self, **options: Any) -> httpx.Client:
        return httpx.Client(**options)

    def close(self) -> None:
        """Close the connections."""
        self._http.close()

    def _exchange(self, request: Request) -> Answer:
        outgoing = self._outgoing(request)
        try:
            answer = self._http.request(**outgoing)
        except httpx.TransportError as error:
            raise self._unanswered(error, request) from error
        return self._answer(answer, request)
