"""One real ``feltdb serve`` process per backend for the tests of a package whose conftest
imports these fixtures (``from support.server_fixtures import app, backend, http, server``).

``backend`` is overridden here at package scope, so every test that uses ``server`` (or
``http``) runs twice: against a server on a fresh SQLite file, and against one on a fresh
PostgreSQL database (``pg_databases`` of tests/conftest.py; skipped without
``FELTDB_TEST_PG``, failed on CI). Being a ``backend`` parameter, the PostgreSQL runs are
marked ``postgres`` by tests/conftest.py like every other test on that backend, and pytest
groups the tests by backend, so each server starts once and stops before the other starts.

Both serve a keyring written here, on a free loopback port. Tests mint their tokens with the
same keyring, each in its own application (the ``app`` fixture), so the tests sharing a
process never see each other's work. The process is terminated (then killed) at teardown
even when a test failed, and its PostgreSQL database dropped.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import httpx
import pytest

from support.server import Server, serve

BACKENDS = ("sqlite", "postgres")


@pytest.fixture(scope="package", params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    """The backend of this run (tests/conftest.py's fixture, widened to the package's scope
    so its server is shared); also what ``new_target`` uses in this package.
    """
    if request.param == "postgres":
        request.getfixturevalue("pg_admin_url")
    name: str = request.param
    return name


@pytest.fixture(scope="package")
def server(
    backend: str, tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[Server]:
    home = tmp_path_factory.mktemp(f"server-{backend}")
    if backend != "postgres":
        yield from serve(home, backend=backend)
        return
    pg_databases = request.getfixturevalue("pg_databases")
    database = pg_databases.create("server")
    try:
        yield from serve(home, pg_databases.url_of(database), backend=backend)
    finally:
        pg_databases.drop(database)


@pytest.fixture(scope="package")
def http(server: Server) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, timeout=15.0) as client:
        yield client


@pytest.fixture
def app() -> str:
    """An application of this test alone."""
    return f"app-{uuid.uuid4().hex[:10]}"
