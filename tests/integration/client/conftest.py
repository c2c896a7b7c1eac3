"""One real ``feltdb serve`` process for the client's tests (the server package's pattern).

A fresh SQLite store and a keyring written here, on a free loopback port; each test works
in its own application (the ``app`` fixture), so tests sharing the process never see each
other's work. The process is terminated (then killed) at teardown even when a test failed.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from support.server import Server, serve


@pytest.fixture(scope="package")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    yield from serve(tmp_path_factory.mktemp("client-server"))


@pytest.fixture
def app() -> str:
    """An application of this test alone."""
    return f"app-{uuid.uuid4().hex[:10]}"
