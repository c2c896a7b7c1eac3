"""Where the CPU of one workload's lifecycle goes, on the library's batch path.

One process, embedded SQLite on a RAM disk when there is one (/dev/shm), so the disk's
sync is not what is measured: ``admit_many`` → ``claim_work`` (claimed and started) →
``complete_many``, 100 workloads a batch, the requests built before the clock starts.

- ``cpu_us``: process CPU per lifecycle (``time.process_time``), with the heap settled as
  ``feltdb worker`` settles it (``feltdb.heap.settle_heap``) and, beside it, without;
- ``worker_cpu_us``: the same lifecycles with the worker runtime doing the claiming and
  completing: ``admit_many`` (100 a batch) then ``Worker(store=…).drain()`` with a no-op
  handler and 32 slots (as `make bench` runs it), the process's CPU over both (every thread's), heap
  settled; the same RAM disk, so that the two figures differ by the runtime alone;
- ``gc_us``: of that, the time spent in the cyclic garbage collector (``gc.callbacks``);
- ``buckets_us``: a second run under ``cProfile``, each function's own time (tottime)
  summed by where it is spent (the SQLite driver, pydantic, JSON encoders, hashing,
  feltdb's work/ and storage/ modules, the rest), scaled to the unprofiled ``cpu_us``:
  the profiler's overhead falls on every call alike, so the shares are what to read.

Usage: python bench/bench_cpu_profile.py [--workloads 5000] [--out FILE]
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from harness.collector import collector_time
from support.factories import CAPABILITIES, make_request

from feltdb import Completion, CreateWorkload, WorkloadStore
from feltdb.heap import settle_heap
from feltdb.worker import Context, Worker

BATCH = 100
BUCKETS = (
    ("sqlite", ("sqlite3", "storage/sqlite")),
    ("pydantic", ("pydantic",)),
    ("json", ("json", "orjson", "msgspec", "canonical.py", "records/codec.py")),
    ("hashing", ("_hashlib", "hashlib", "hmac")),
    ("feltdb work/", ("feltdb/work/",)),
    ("feltdb storage/", ("feltdb/storage/",)),
    ("feltdb auth/", ("feltdb/auth/",)),
    ("feltdb records/", ("feltdb/records/",)),
)


def requests(first: int, n: int) -> list[CreateWorkload]:
    return [make_request(idempotency_key=f"k{i}", input={"n": i}) for i in range(first, first + n)]


def lifecycles(store: WorkloadStore, batch: list[CreateWorkload]) -> None:
    for first in range(0, len(batch), BATCH):
        store.admit_many(batch[first : first + BATCH])
        claimed = store.claim_work("t", "app", "w", CAPABILITIES, BATCH, now=11)
        store.complete_many(
            [
                Completion(
                    work.claim.workload_id,
                    work.claim.claim_id,
                    "w",
                    work.claim.fencing_token,
                    f"r-{work.claim.workload_id}",
                    {"ok": 1},
                )
                for work in claimed
            ],
            now=12,
        )


def worker_lifecycles(target: Path, batch: list[CreateWorkload]) -> None:
    store = WorkloadStore.open(target)
    for first in range(0, len(batch), BATCH):
        store.admit_many(batch[first : first + BATCH])
    worker = Worker(
        store=store, tenant="t", application="app", capabilities=CAPABILITIES, concurrency=32
    )

    @worker.handler("send")
    def noop(ctx: Context) -> dict[str, int]:
        return {"ok": 1}

    worker.drain()
    store.close()


def one_worker_run(n: int) -> dict[str, Any]:
    """The worker runtime's CPU per lifecycle, admission included (in a child, as
    :func:`one_run`)."""
    home = "/dev/shm" if os.path.isdir("/dev/shm") else None
    with tempfile.TemporaryDirectory(dir=home) as scratch:
        worker_lifecycles(Path(scratch) / "warm.db", requests(0, 2 * BATCH))
        batch = requests(1_000_000, n)
        settle_heap()
        began = time.process_time()
        worker_lifecycles(Path(scratch) / "work.db", batch)
        cpu = time.process_time() - began
    return {"cpu_us": cpu / n * 1e6}


def bucket_of(filename: str, name: str) -> str:
    where = f"{filename} {name}"
    for bucket, marks in BUCKETS:
        if any(mark in where for mark in marks):
            return bucket
    return "other"


def one_run(n: int, settle: bool, profile: bool) -> dict[str, Any]:
    """One process's figures (run in a child, so each starts from a fresh heap)."""
    home = "/dev/shm" if os.path.isdir("/dev/shm") else None
    with tempfile.TemporaryDirectory(dir=home) as scratch:
        store = WorkloadStore.open(Path(scratch) / "work.db")
        lifecycles(store, requests(0, 2 * BATCH))  # warm
        batch = requests(1_000_000, n)
        if settle:
            settle_heap()
        profiler = cProfile.Profile() if profile else None
        with collector_time() as spent:
            began = time.process_time()
            if profiler is not None:
                profiler.enable()
            lifecycles(store, batch)
            if profiler is not None:
                profiler.disable()
            cpu = time.process_time() - began
        store.close()
    figures: dict[str, Any] = {"cpu_us": cpu / n * 1e6, "gc_us": spent.seconds / n * 1e6}
    if profiler is not None:
        stats = pstats.Stats(profiler).stats  # type: ignore[attr-defined]
        buckets: dict[str, float] = {}
        for (filename, _line, name), (_cc, _nc, tottime, _ct, _callers) in stats.items():
            key = bucket_of(filename, name)
            buckets[key] = buckets.get(key, 0.0) + tottime
        figures["buckets_s"] = buckets
    return figures


def in_child(n: int, settle: bool, profile: bool, runtime: bool = False) -> dict[str, Any]:
    run = f"one_worker_run({n})" if runtime else f"one_run({n}, {settle}, {profile})"
    code = (
        "import json, sys; sys.path.insert(0, 'bench'); "
        f"from bench_cpu_profile import one_run, one_worker_run; print(json.dumps({run}))"
    )
    root = Path(__file__).resolve().parents[1]
    done = subprocess.run(
        [sys.executable, "-c", code], check=True, capture_output=True, text=True, cwd=root
    )
    figures: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--out", default=str(Path(__file__).parent / "results" / "cpu_profile.json")
    )
    args = parser.parse_args()
    settled = [in_child(args.workloads, True, False) for _ in range(args.rounds)]
    unsettled = [in_child(args.workloads, False, False) for _ in range(args.rounds)]
    profiled = in_child(args.workloads, True, True)
    runtime = sorted(
        in_child(args.workloads, True, False, runtime=True)["cpu_us"] for _ in range(args.rounds)
    )
    cpu = sorted(r["cpu_us"] for r in settled)[len(settled) // 2]
    total = sum(profiled["buckets_s"].values())
    result = {
        "workloads": args.workloads,
        "batch": BATCH,
        "cpu_us": round(cpu, 1),
        "cpu_us_rounds": [round(r["cpu_us"], 1) for r in settled],
        "gc_us": round(sorted(r["gc_us"] for r in settled)[len(settled) // 2], 1),
        "unsettled_cpu_us": round(sorted(r["cpu_us"] for r in unsettled)[len(unsettled) // 2], 1),
        "unsettled_gc_us": round(sorted(r["gc_us"] for r in unsettled)[len(unsettled) // 2], 1),
        "worker_cpu_us": round(runtime[len(runtime) // 2], 1),
        "worker_cpu_us_rounds": [round(value, 1) for value in runtime],
        "buckets_us": {
            key: round(value / total * cpu, 1)
            for key, value in sorted(profiled["buckets_s"].items(), key=lambda kv: -kv[1])
        },
    }
    print(json.dumps(result, indent=2))
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
