"""Fixtures shared by every kind of test."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest


@pytest.fixture(autouse=True)
def clean_feltdb_environment(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No test sees FELTDB_* settings from the developer's shell."""
    for name in list(os.environ):
        if name.startswith("FELTDB_"):
            monkeypatch.delenv(name)
    yield
