"""A backlog of ready no-op workloads, admitted through ``admit_many`` before a drain."""

from __future__ import annotations

import time

from support.factories import make_request

from feltdb import WorkloadStore
from feltdb.work.states import WorkloadState

LOAD_BATCH = 1000
DEFINITION = "send"
"""What the fixture request runs; the workers' no-op handler serves it."""


def requests(n: int, prefix: str = "k") -> list:  # type: ignore[type-arg]
    now = int(time.time())
    return [
        make_request(idempotency_key=f"{prefix}{i}", input={"i": i}, created_at=now)
        for i in range(n)
    ]


def load(target: str, n: int) -> None:
    batch = requests(n)
    with WorkloadStore.open(target) as store:
        for first in range(0, n, LOAD_BATCH):
            answers = store.admit_many(batch[first : first + LOAD_BATCH])
            refused = [a for a in answers if isinstance(a, Exception)]
            if refused:
                raise RuntimeError(f"admission refused: {refused[0]}")


def succeeded(target: str) -> int:
    with WorkloadStore.open(target) as store:
        return store.count_by_state().get(WorkloadState.SUCCEEDED, 0)
