"""The three clients of one protocol, for the client contract suite: :class:`Client` and
:class:`AsyncClient` of a real server, and :class:`LocalClient` on its store (opened behind
its back), each as a given grant. An :class:`AsyncClient` is called through
:class:`Awaited`: each of its coroutine methods run to its end on the adapter's own event
loop, so one test body, written against the client protocol, runs over the three clients
(pytest alone, no asyncio plugin).
"""

from __future__ import annotations

import asyncio
import functools
import inspect
from contextlib import ExitStack
from typing import Any

from feltdb import Grant, WorkloadStore
from feltdb.auth.scope import Scope
from feltdb.client import AsyncClient, Client, LocalClient, WorkloadClient
from support.server import Server


class Awaited:
    """``AsyncClient(url, token=token, timeout=timeout)``, each call awaited on one event
    loop of its own (an :class:`httpx.AsyncClient`'s connections belong to the loop that
    opened them); attributes that are not coroutine methods are the client's own.
    """

    def __init__(self, url: str, token: str, *, timeout: float = 30.0) -> None:
        self.client = AsyncClient(url, token=token, timeout=timeout)  # refused: no loop made
        self.loop = asyncio.new_event_loop()

    def __getattr__(self, name: str) -> Any:
        value = getattr(self.client, name)
        if not inspect.iscoroutinefunction(value):
            return value

        @functools.wraps(value)
        def run(*args: Any, **kwargs: Any) -> Any:
            return self.loop.run_until_complete(value(*args, **kwargs))

        return run

    def close(self) -> None:
        """Close the client (its connections, on its loop), then the loop."""
        try:
            self.loop.run_until_complete(self.client.aclose())
        finally:
            self.loop.close()

    def __enter__(self) -> Awaited:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


KINDS = ("http", "async", "local")
"""The three clients, one protocol: over HTTP, over HTTP awaited, in process."""


class Clients:
    """Clients of one ``kind`` as grants of ``server`` (closed with the test)."""

    def __init__(self, kind: str, server: Server, stack: ExitStack) -> None:
        self.kind = kind
        self.server = server
        self._stack = stack
        self._store: WorkloadStore | None = None

    @property
    def over_http(self) -> bool:
        """Whether refusals carry an HTTP status (a ``ClientError``)."""
        return self.kind != "local"

    def __call__(self, application: str, **grant: Any) -> WorkloadClient:
        """A client of ``server.grant(application, **grant)``."""
        return self.of(self.server.grant(application, **grant))

    def of(self, grant: Grant) -> WorkloadClient:
        """A client acting as ``grant``."""
        if self.kind == "local":
            if self._store is None:
                self._store = self._stack.enter_context(WorkloadStore.open(self.server.target))
            evidence = self.server.keyring.evidence(grant)
            return LocalClient(self._store, Scope.of_grant(grant), grant.subject, grant=evidence)
        token = self.server.keyring.sign(grant)
        opened: Any = (Client if self.kind == "http" else Awaited)(
            self.server.url, token, timeout=15.0
        )
        self._stack.callback(opened.close)
        client: WorkloadClient = opened
        return client
