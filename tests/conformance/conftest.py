"""Fixtures of the reference's tests: a store on a fresh file per test."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from feltdb import WorkloadStore


@pytest.fixture
def store_path(tmp_path: Path) -> Path:
    """Where this test's store lives (the reference's `store(name)` path)."""
    return tmp_path / "work.db"


@pytest.fixture
def open_store(store_path: Path) -> Iterator[Callable[..., WorkloadStore]]:
    """Open another writer (or a restart) of this test's store; all are closed at the end."""
    opened: list[WorkloadStore] = []

    def opener(path: Path | None = None) -> WorkloadStore:
        store = WorkloadStore.open(path or store_path)
        opened.append(store)
        return store

    yield opener
    for store in opened:
        store.close()


@pytest.fixture
def store(open_store: Callable[..., WorkloadStore]) -> WorkloadStore:
    """The test's store (the reference's `store(name)`)."""
    return open_store()
