"""The cyclic garbage collector's share of a measured run."""

from __future__ import annotations

import contextlib
import gc
import time
from collections.abc import Iterator
from typing import Any


class CollectorTime:
    """Seconds the collector ran while :func:`collector_time` watched."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self._began: list[float] = []

    def __call__(self, phase: str, _info: dict[str, Any]) -> None:
        if phase == "start":
            self._began.append(time.perf_counter())
        elif self._began:
            self.seconds += time.perf_counter() - self._began.pop()


@contextlib.contextmanager
def collector_time() -> Iterator[CollectorTime]:
    """Time every collection inside the block (``gc.callbacks``)."""
    spent = CollectorTime()
    gc.callbacks.append(spent)
    try:
        yield spent
    finally:
        gc.callbacks.remove(spent)
