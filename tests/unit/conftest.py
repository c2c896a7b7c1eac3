"""Fixtures of the unit tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from feltdb import WorkloadStore


@pytest.fixture
def store(tmp_path: Path) -> Iterator[WorkloadStore]:
    """A store on a fresh embedded file, closed at the end of the test."""
    with WorkloadStore.open(tmp_path / "w.db") as opened:
        yield opened
