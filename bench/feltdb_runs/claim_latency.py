"""``claim_next`` latency against the ready backlog (bulk-loaded as bench_claim_next.py
loads it: 20,000 guarded mutations per commit through the storage protocol).
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path
from typing import Any

from bench_claim_next import load_backlog, time_claims

from feltdb import WorkloadStore
from feltdb_runs.drains import target_for


def store_size_mb(target: str, home: Path) -> float | None:
    if "://" in target:
        return None
    return round(sum(p.stat().st_size for p in home.iterdir()) / 1e6, 1)


def claim_latency(backend: str, size: int, claims: int) -> dict[str, Any]:
    with target_for(backend, f"claim_{size}") as (target, home):
        with WorkloadStore.open(target) as store:
            load_seconds = load_backlog(store, size)
            time_claims(store, 5)  # warm the connection and the caches
            began = time.perf_counter()
            timings = time_claims(store, claims)
            took = time.perf_counter() - began
        size_mb = store_size_mb(target, home)
    ms = sorted(t * 1000 for t in timings)
    return {
        "backend": backend,
        "ready_backlog": size,
        "claims": len(ms),
        "median_ms": statistics.median(ms),
        "p95_ms": ms[max(0, int(len(ms) * 0.95) - 1)],
        "seconds": took,
        "load_seconds": load_seconds,
        "store_mb": size_mb,
    }
