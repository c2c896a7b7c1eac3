"""The security suite: each test is an attack that once worked (issue 9), made against a
real ``feltdb serve`` process on each backend (see :mod:`support.server_fixtures`), or
against the library where the hole was the library's.
"""

from collections.abc import Iterator

import pytest
from support.server import Server, serve
from support.server_fixtures import app, backend, http, server

__all__ = ["app", "backend", "http", "lone_server", "server"]


@pytest.fixture(scope="module")
def lone_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """A ``feltdb serve`` of the module's own, on a SQLite file: for attacks that reach no
    storage, or that watch the process (its memory, its log) and must not share it.
    """
    yield from serve(tmp_path_factory.mktemp("lone"))
