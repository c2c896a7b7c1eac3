"""Admission throughput: ``admit`` one at a time against ``admit_many`` in batches."""

from __future__ import annotations

import time
from typing import Any

from feltdb import WorkloadStore
from feltdb_runs import backlog
from feltdb_runs.drains import target_for

SINGLE_CAP = 2000
"""Single admissions are one fsync'd commit each: at most this many are timed."""


def admit_rates(backend: str, n: int, batches: tuple[int, ...] = (100, 1000)) -> dict[str, Any]:
    rates: dict[str, Any] = {}
    singles = min(n, SINGLE_CAP)
    with target_for(backend, "admit_single") as (target, _), WorkloadStore.open(target) as store:
        requests = backlog.requests(singles)
        began = time.perf_counter()
        for request in requests:
            store.admit(request)
        rates["admit"] = {"workloads": singles, "per_s": singles / (time.perf_counter() - began)}
    for size in batches:
        count = max(n, size)
        with target_for(backend, f"admit_{size}") as (target, _):
            with WorkloadStore.open(target) as store:
                requests = backlog.requests(count)
                began = time.perf_counter()
                for first in range(0, count, size):
                    store.admit_many(requests[first : first + size])
                took = time.perf_counter() - began
        rates[f"admit_many({size})"] = {"workloads": count, "per_s": count / took}
    return rates
