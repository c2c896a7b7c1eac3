"""The operator commands' fixtures: one ``feltdb serve`` process for the module, and a
``mode`` that runs each test twice: the CLI on a store file (``--db``), and the CLI against
that server (``--url``/``--token``), each test in an application of its own.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from support.cli import Mode, db_mode, server_mode
from support.server import Server, serve


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    yield from serve(tmp_path_factory.mktemp("cli-server"), None, "--maintenance-interval", "0.2")


@pytest.fixture(params=["db", "server"])
def mode(request: pytest.FixtureRequest, tmp_path: Path) -> Mode:
    if request.param == "db":
        return db_mode(tmp_path)
    return server_mode(request.getfixturevalue("server"))
