"""How much does ``claim_next`` cost as the ready backlog grows?

Loads N ready workloads into a fresh embedded store, then times ``claim_next`` (which
selects from the scheduling index and commits the claim: one guarded, fsync'd write).
The backlog is loaded in bulk through the storage protocol (many mutations per commit,
each guarded require-absent) because admitting a million workloads one fsync'd commit at
a time would take hours; each document is a real admitted workload (built by the same
code ``admit`` uses), varied in id, priority and creation time.

Usage: python bench/bench_claim_next.py [--sizes 1000,1000000] [--claims 200]
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

import msgspec

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from support.factories import CAPABILITIES, make_request

from feltdb import DURABLE_WORK_COLLECTION, CreateWorkload, WorkloadStore
from feltdb.storage.base import Mutation, Precondition
from feltdb.work.admission import new_workload
from feltdb.work.scheduling import row_index

LOAD_BATCH = 20_000


def load_backlog(
    store: WorkloadStore, size: int, request: CreateWorkload | None = None, *, varied: bool = True
) -> float:
    """Commit ``size`` ready workloads like ``request`` (default: the fixture's), ``varied``
    in priority and creation time; returns seconds taken.
    """
    template = new_workload(request or make_request(), "workload_template")
    started = time.perf_counter()
    for first in range(0, size, LOAD_BATCH):
        mutations, guards = [], []
        for i in range(first, min(first + LOAD_BATCH, size)):
            update: dict[str, object] = {
                "workload_id": f"workload_{i:024d}",
                "idempotency_key": f"bulk-{i}",
            }
            if varied:
                update |= {"priority": i % 10, "created_at": 10 + i // 100}
            workload = msgspec.structs.replace(template, **update)
            mutations.append(
                Mutation(
                    DURABLE_WORK_COLLECTION,
                    workload.workload_id,
                    workload.to_json(),
                    row_index(workload),
                )
            )
            guards.append(Precondition(DURABLE_WORK_COLLECTION, workload.workload_id, True))
        store.db.commit(f"bench-load-{first}", mutations, guards, {"kind": "bench.load"})
        done = min(first + LOAD_BATCH, size)
        print(f"\r  loaded {done:>9,}/{size:,}", end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)
    return time.perf_counter() - started


def time_claims(store: WorkloadStore, claims: int) -> list[float]:
    """Seconds per ``claim_next`` call, each claiming and committing one workload."""
    timings = []
    for n in range(claims):
        started = time.perf_counter()
        claim = store.claim_next("t", "app", f"worker-{n % 4}", CAPABILITIES, now=100)
        timings.append(time.perf_counter() - started)
        assert claim is not None
    return timings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,1000000")
    parser.add_argument("--claims", type=int, default=200)
    parser.add_argument("--out", default=str(Path(__file__).parent / "results/claim_next.json"))
    args = parser.parse_args()
    results = []
    for size in (int(s) for s in args.sizes.split(",")):
        with tempfile.TemporaryDirectory(dir=Path(__file__).parent) as tmp:
            path = Path(tmp) / "bench.db"
            print(f"backlog {size:,}", file=sys.stderr)
            with WorkloadStore.open(path) as store:
                load_seconds = load_backlog(store, size)
                timings = time_claims(store, args.claims)
            file_mb = sum(p.stat().st_size for p in Path(tmp).iterdir()) / 1e6
        ms = sorted(t * 1000 for t in timings)
        row = {
            "ready_backlog": size,
            "claims": len(ms),
            "median_ms": round(statistics.median(ms), 3),
            "p95_ms": round(ms[int(len(ms) * 0.95) - 1], 3),
            "mean_ms": round(statistics.fmean(ms), 3),
            "load_seconds": round(load_seconds, 1),
            "store_mb": round(file_mb, 1),
        }
        results.append(row)
        print(json.dumps(row))
    Path(args.out).write_text(
        json.dumps(
            {
                "benchmark": "claim_next on embedded SQLite (WAL, synchronous=FULL)",
                "machine": f"{platform.machine()}, {platform.python_implementation()} "
                f"{platform.python_version()}",
                "results": results,
            },
            indent=2,
        )
        + "\n"
    )


if __name__ == "__main__":
    main()
