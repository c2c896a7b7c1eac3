"""One real ``feltdb serve`` process for the client's tests (the server package's pattern).

A fresh SQLite store and a keyring written here, on a free loopback port; each test works
in its own application (the ``app`` fixture), so tests sharing the process never see each
other's work. The process is terminated (then killed) at teardown even when a test failed.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from support.server import Server, start_server, stop, wait_until_healthy

from feltdb.auth.tokens import Keyring


@pytest.fixture(scope="package")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    home = tmp_path_factory.mktemp("client-server")
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


@pytest.fixture
def app() -> str:
    """An application of this test alone."""
    return f"app-{uuid.uuid4().hex[:10]}"
