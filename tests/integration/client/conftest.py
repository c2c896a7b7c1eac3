"""The client's tests share one real ``feltdb serve`` per backend (a fresh SQLite file, and
a fresh PostgreSQL database): see :mod:`support.server_fixtures`. Each test works in its own
application (the ``app`` fixture), so tests sharing a process never see each other's work.

``clients`` gives the contract suite its clients of one kind: :class:`Client` and
:class:`AsyncClient` (through :class:`support.client_kinds.Awaited`) of that server, or a
:class:`LocalClient` on its store, opened behind its back, as the same grant.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack

import pytest
from support.client_kinds import KINDS, Clients
from support.server import Server
from support.server_fixtures import app, backend, server

__all__ = ["app", "backend", "clients", "server"]


@pytest.fixture(params=KINDS)
def clients(request: pytest.FixtureRequest, server: Server) -> Iterator[Clients]:
    with ExitStack() as stack:
        yield Clients(request.param, server, stack)
