"""One real ``feltdb serve`` process for every test of this package.

It serves a fresh SQLite store and a keyring written here, on a free loopback port. Tests
mint their tokens with the same keyring, each in its own application (the ``app`` fixture),
so the tests sharing the process never see each other's work. The process is terminated
(then killed) at teardown even when a test failed.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import httpx
import pytest
from support.server import Server, start_server, stop, wait_until_healthy

from feltdb.auth.tokens import Keyring


@pytest.fixture(scope="package")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    home = tmp_path_factory.mktemp("server")
    keyring = Keyring.generate()
    keyring.save(home / "keyring.json")
    process, url, log = start_server(
        home, "--db", str(home / "work.db"), "--keyring", str(home / "keyring.json")
    )
    try:
        wait_until_healthy(url, process, log)
        yield Server(url, keyring, process, log)
    finally:
        stop(process)


@pytest.fixture(scope="package")
def http(server: Server) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, timeout=15.0) as client:
        yield client


@pytest.fixture
def app() -> str:
    """An application of this test alone."""
    return f"app-{uuid.uuid4().hex[:10]}"
