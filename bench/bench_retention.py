"""Retention on a big store: what pruning N finished workloads costs, what it does to claims,
and what it does to the file.

A SQLite store (WAL, ``synchronous=FULL``) is loaded with N finished (SUCCEEDED) workloads,
each a real record cloned from one run through admit, claim, start and complete (varied in
id, idempotency key, creation and finish time), committed in bulk through the storage
protocol as ``bench_claim_next.py`` loads its backlog (running a million workloads through
claims one batch at a time would take over an hour on 2 cores); plus a ready backlog of
``--ready`` workloads to claim from. Then:

1. ``claim_next`` latency, before pruning (``--claims`` calls);
2. the file made ``auto_vacuum = INCREMENTAL`` (``PRAGMA auto_vacuum``, then ``VACUUM``:
   the one-off conversion an existing store needs, timed);
3. every finished workload pruned, one ``store.retention`` pass after another (500 a pass):
   each pass's read (``due``) and write (``delete_due``, the write transaction) timed apart;
4. ``claim_next`` latency again, then ``PRAGMA incremental_vacuum`` (timed, the store
   closed) and the file's size before and after it;
5. ``claim_next`` latency once more, on the shrunk file.

Usage: python bench/bench_retention.py [--finished 50000] [--ready 10000] [--claims 300]
"""

from __future__ import annotations

import argparse
import json
import platform
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import msgspec

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from bench_claim_next import load_backlog, time_claims
from support.finished import finish_one

from feltdb import DURABLE_WORK_COLLECTION, Workload, WorkloadStore
from feltdb.storage.base import Mutation, Precondition
from feltdb.work.pruning import PRUNE_BATCH, delete_due
from feltdb.work.retention import DAY, RetentionPolicy
from feltdb.work.rows import stored_text_of, workload_of
from feltdb.work.scheduling import row_index

RESULTS = Path(__file__).resolve().parent / "results" / "retention.json"
LOAD_BATCH = 20_000
FINISHED_AT = 1_000
PRUNE_AT = FINISHED_AT + 31 * DAY


def finished_template(scratch: Path) -> Workload:
    """One workload run to success through the authority, as stored."""
    with WorkloadStore.open(scratch / "template.db") as store:
        workload_id = finish_one(store, "template", FINISHED_AT)
        row = store.db.get_row(DURABLE_WORK_COLLECTION, workload_id)
        assert row is not None
        return workload_of(row)


def load_finished(store: WorkloadStore, template: Workload, count: int) -> float:
    """Commit ``count`` clones of ``template``, ``LOAD_BATCH`` a commit; seconds taken."""
    started = time.perf_counter()
    for first in range(0, count, LOAD_BATCH):
        mutations, guards = [], []
        for i in range(first, min(first + LOAD_BATCH, count)):
            workload = msgspec.structs.replace(
                template,
                workload_id=f"workload_f{i:023d}",
                idempotency_key=f"finished-{i}",
                created_at=10 + i // 100,
                updated_at=FINISHED_AT + i // 100,
            )
            key = workload.workload_id
            text = stored_text_of(workload)
            mutations.append(
                Mutation(DURABLE_WORK_COLLECTION, key, None, row_index(workload), text)
            )
            guards.append(Precondition(DURABLE_WORK_COLLECTION, key, require_absent=True))
        store.db.commit(f"bench-finished-{first}", mutations, guards, {"kind": "bench.load"})
        done = min(first + LOAD_BATCH, count)
        print(f"\r  finished {done:>9,}/{count:,}", end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)
    return time.perf_counter() - started


def file_bytes(path: Path) -> dict[str, int]:
    """The store file's size after a full checkpoint (the WAL folded in), and its free
    pages."""
    connection = sqlite3.connect(path, isolation_level=None)
    try:
        connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        page = connection.execute("PRAGMA page_size").fetchone()[0]
        free = connection.execute("PRAGMA freelist_count").fetchone()[0]
    finally:
        connection.close()
    return {"file": path.stat().st_size, "free": free * page}


def timed_sql(path: Path, script: str) -> float:
    """Run ``script`` on a connection of its own; seconds. As a script: ``sqlite3``'s
    ``execute`` steps a statement once, and ``PRAGMA incremental_vacuum`` frees one page a
    step."""
    connection = sqlite3.connect(path, isolation_level=None)
    try:
        started = time.perf_counter()
        connection.executescript(script)
        return time.perf_counter() - started
    finally:
        connection.close()


def prune_all(store: WorkloadStore, expected: int) -> dict[str, Any]:
    """Prune every due workload a pass at a time; the passes' read and write times."""
    policy = RetentionPolicy()
    reads, writes, pruned = [], [], 0
    started = time.perf_counter()
    while True:
        began = time.perf_counter()
        found = store.retention.due(policy, PRUNE_AT, limit=PRUNE_BATCH)
        read = time.perf_counter()
        if not found:
            break
        pruned += len(delete_due(store.db, found, "bench", PRUNE_AT))
        reads.append(read - began)
        writes.append(time.perf_counter() - read)
        print(f"\r  pruned {pruned:>9,}/{expected:,}", end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)
    total = time.perf_counter() - started
    assert pruned == expected, (pruned, expected)
    return {
        "pruned": pruned,
        "passes": len(writes),
        "seconds": round(total, 1),
        "per_second": round(pruned / total),
        "read_ms": summary(reads),
        "write_ms": summary(writes),
    }


def summary(seconds: list[float]) -> dict[str, float]:
    ms = sorted(s * 1000 for s in seconds)
    return {
        "median": round(statistics.median(ms), 2),
        "p99": round(ms[max(0, int(len(ms) * 0.99) - 1)], 2),
        "max": round(ms[-1], 2),
    }


def measure(scratch: Path, finished: int, ready: int, claims: int) -> dict[str, Any]:
    path = scratch / "bench.db"
    template = finished_template(scratch)
    with WorkloadStore.open(path) as store:
        load_s = load_finished(store, template, finished)
        load_backlog(store, ready)
        before = summary(time_claims(store, claims))
    loaded = file_bytes(path)
    convert_s = timed_sql(path, "PRAGMA auto_vacuum = INCREMENTAL; VACUUM;")
    converted = file_bytes(path)
    with WorkloadStore.open(path) as store:
        pruning = prune_all(store, finished)
        after_prune = summary(time_claims(store, claims))
    pruned = file_bytes(path)
    vacuum_s = timed_sql(path, "PRAGMA incremental_vacuum;")
    vacuumed = file_bytes(path)
    with WorkloadStore.open(path) as store:
        after_vacuum = summary(time_claims(store, claims))
    return {
        "finished": finished,
        "ready": ready,
        "load_seconds": round(load_s, 1),
        "claim_ms_before": before,
        "claim_ms_after_prune": after_prune,
        "claim_ms_after_vacuum": after_vacuum,
        "prune": pruning,
        "convert_to_incremental_seconds": round(convert_s, 1),
        "incremental_vacuum_seconds": round(vacuum_s, 2),
        "mb": {
            name: round(sizes["file"] / 1e6, 1)
            for name, sizes in (
                ("loaded", loaded),
                ("converted", converted),
                ("pruned", pruned),
                ("vacuumed", vacuumed),
            )
        },
        "free_mb_after_prune": round(pruned["free"] / 1e6, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--finished", type=int, default=50_000)
    parser.add_argument("--ready", type=int, default=10_000)
    parser.add_argument("--claims", type=int, default=300)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=Path(__file__).parent) as scratch:
        result = measure(Path(scratch), options.finished, options.ready, options.claims)
    print(json.dumps(result, indent=2))
    previous: dict[str, Any] = {}
    if RESULTS.exists():
        previous = json.loads(RESULTS.read_text())
    runs = {str(run["finished"]): run for run in previous.get("runs", [])}
    runs[str(options.finished)] = result
    RESULTS.write_text(
        json.dumps(
            {
                "benchmark": "retention on embedded SQLite (WAL, synchronous=FULL)",
                "machine": f"{platform.machine()}, {platform.python_implementation()} "
                f"{platform.python_version()}",
                "runs": sorted(runs.values(), key=lambda run: run["finished"]),
            },
            indent=2,
        )
        + "\n"
    )


if __name__ == "__main__":
    main()
