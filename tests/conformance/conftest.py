"""Fixtures of the reference's tests: a store on a fresh target per test, on each backend.

Every conformance test runs twice, on SQLite and on PostgreSQL (the ``backend`` fixture of
``tests/conftest.py``): ``store_target`` is where its store lives, ``new_target(name)``
makes another one, and a "restart" is closing a store and opening the target again.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from feltdb import WorkloadStore


@pytest.fixture
def store_target(new_target: Callable[..., str]) -> str:
    """Where this test's store lives (the reference's `store(name)`)."""
    return new_target("work")


@pytest.fixture
def open_store(store_target: str) -> Iterator[Callable[..., WorkloadStore]]:
    """Open another writer (or a restart) of this test's store, or of the store at another
    target; all are closed at the end.
    """
    opened: list[WorkloadStore] = []

    def opener(target: str | None = None) -> WorkloadStore:
        store = WorkloadStore.open(target or store_target)
        opened.append(store)
        return store

    yield opener
    for store in opened:
        store.close()


@pytest.fixture
def store(open_store: Callable[..., WorkloadStore]) -> WorkloadStore:
    """The test's store (the reference's `store(name)`)."""
    return open_store()
