"""Retention on a big store: what pruning N finished workloads costs, what it does to claims,
and what it does to the store's size.

The store is loaded with N finished (SUCCEEDED) workloads, each a real record cloned from
one run through admit, claim, start and complete (varied in id, idempotency key, creation
and finish time), committed in bulk through the storage protocol as ``bench_claim_next.py``
loads its backlog (running a million workloads through claims one batch at a time would
take over an hour on 2 cores); plus a ready backlog of ``--ready`` workloads to claim from.
Then:

1. ``claim_next`` latency, before pruning (``--claims`` calls);
2. every finished workload pruned, one pass after another as ``store.retention.prune``
   runs them (500 a pass): each pass's read (``due``), its write transaction
   (``delete_due``) and, on SQLite, the free pages it then returns to the file system
   (``reclaim_space(RECLAIM_PAGES)``, a write transaction of its own) timed apart;
3. ``claim_next`` latency again, and the store's size.

On SQLite, before step 2, the first N/10 (at most 20,000) are deleted in passes that return
no space, as an older release's did, and ``reclaim_space(RECLAIM_PAGES)`` is timed while a
full bound is free (``reclaim_at_bound``): what one pass's return costs at its largest.

SQLite (the default): a new store file, ``auto_vacuum = INCREMENTAL`` as every store file
is made, WAL and ``synchronous=FULL``; no manual step. PostgreSQL (``--backend postgres``,
:mod:`bench_retention_postgres`): the same load and passes against ``$FELTDB_TEST_PG``,
with autovacuum on, watching the table's dead tuples and size.

Usage: python bench/bench_retention.py [--finished 50000] [--ready 10000] [--claims 300]
       FELTDB_PG_SETTINGS=autovacuum=on scripts/with-postgres \
           python bench/bench_retention.py --backend postgres [--finished N]
"""

from __future__ import annotations

import argparse
import json
import platform
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from bench_claim_next import load_backlog, time_claims
from support.finished import finish_one

from feltdb import DURABLE_WORK_COLLECTION, Workload, WorkloadStore
from feltdb.storage.base import Mutation, Precondition
from feltdb.work.pruning import MAX_PRUNE_BATCH, PRUNE_BATCH, RECLAIM_PAGES, delete_due
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


def load_finished(
    store: WorkloadStore, template: Workload, count: int, *, prefix: str = "f"
) -> float:
    """Commit ``count`` clones of ``template`` (ids ``workload_{prefix}…``), ``LOAD_BATCH``
    a commit; seconds taken."""
    started = time.perf_counter()
    for first in range(0, count, LOAD_BATCH):
        mutations, guards = [], []
        for i in range(first, min(first + LOAD_BATCH, count)):
            workload = msgspec.structs.replace(
                template,
                workload_id=f"workload_{prefix}{i:023d}",
                idempotency_key=f"finished-{prefix}{i}",
                created_at=10 + i // 100,
                updated_at=FINISHED_AT + i // 100,
            )
            key = workload.workload_id
            text = stored_text_of(workload)
            mutations.append(
                Mutation(DURABLE_WORK_COLLECTION, key, None, row_index(workload), text)
            )
            guards.append(Precondition(DURABLE_WORK_COLLECTION, key, require_absent=True))
        store.db.commit(
            f"bench-finished-{prefix}{first}", mutations, guards, {"kind": "bench.load"}
        )
        done = min(first + LOAD_BATCH, count)
        print(f"\r  finished {done:>9,}/{count:,}", end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)
    return time.perf_counter() - started


def wal_bytes(path: Path) -> int:
    """The size of the store's write-ahead log file (it keeps its largest size while open)."""
    wal = Path(f"{path}-wal")
    return wal.stat().st_size if wal.exists() else 0


def file_bytes(path: Path) -> dict[str, int]:
    """The store file's size after a full checkpoint (the WAL folded in), and its free
    pages'."""
    connection = sqlite3.connect(path, isolation_level=None)
    try:
        connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        page = connection.execute("PRAGMA page_size").fetchone()[0]
        free = connection.execute("PRAGMA freelist_count").fetchone()[0]
        incremental = connection.execute("PRAGMA auto_vacuum").fetchone()[0] == 2
    finally:
        connection.close()
    assert incremental, "a store file is made auto_vacuum = INCREMENTAL"
    return {"file": path.stat().st_size, "free": free * page}


def prune_all(
    store: WorkloadStore, expected: int, each_pass: Callable[[int, int], object] | None = None
) -> dict[str, Any]:
    """Prune every due workload a pass at a time, as ``store.retention.prune`` does (read,
    delete, return free pages), each step timed apart; then the passes a maintenance loop
    runs at once while a bound's worth of free pages is left. ``each_pass`` is called with
    the passes run and the workloads pruned so far, after each pass."""
    policy = RetentionPolicy()
    reads, writes, reclaims, pruned, returned, pages = [], [], [], 0, 0, []
    started = time.perf_counter()
    while True:
        began = time.perf_counter()
        found = store.retention.due(policy, PRUNE_AT, limit=PRUNE_BATCH)
        read = time.perf_counter()
        if found:
            pruned += len(delete_due(store.db, found, "bench", PRUNE_AT))
        written = time.perf_counter()
        space = store.db.reclaim_space(RECLAIM_PAGES)
        done = time.perf_counter()
        if not found and space.left < RECLAIM_PAGES and not space.pages:
            break
        reads.append(read - began)
        writes.append(written - read)
        reclaims.append(done - written)
        returned += space.bytes
        pages.append(space.pages)
        if each_pass is not None:
            each_pass(len(writes), pruned)
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
        "reclaim_ms": summary(reclaims),
        "reclaim_pages_per_pass": {
            "bound": RECLAIM_PAGES,
            "median": statistics.median(pages),
            "max": max(pages),
        },
        "reclaimed_mb": round(returned / 1e6, 1),
    }


def reclaim_at_bound(store: WorkloadStore, deletions: int) -> dict[str, Any]:
    """The cost of a full bound: ``deletions`` workloads deleted in passes that return
    nothing (as an older release's passes did), then ``reclaim_space(RECLAIM_PAGES)``
    timed until fewer than the bound are left (the rest goes in the first passes after)."""
    deleted = 0
    while deleted < deletions:
        found = store.retention.due(RetentionPolicy(), PRUNE_AT, limit=MAX_PRUNE_BATCH)
        deleted += len(delete_due(store.db, found, "bench", PRUNE_AT))
    timings, pages = [], []
    while True:
        started = time.perf_counter()
        space = store.db.reclaim_space(RECLAIM_PAGES)
        timings.append(time.perf_counter() - started)
        pages.append(space.pages)
        if space.left < RECLAIM_PAGES:
            break
    return {
        "deleted_first": deleted,
        "pages": pages,
        "ms": [round(seconds * 1000, 1) for seconds in timings],
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
    with WorkloadStore.open(path) as store:
        bound = reclaim_at_bound(store, min(finished // 10, 20_000))
        pruning = prune_all(store, finished - bound["deleted_first"])
        after_prune = summary(time_claims(store, claims))
        wal = wal_bytes(path)
    pruned = file_bytes(path)
    return {
        "finished": finished,
        "ready": ready,
        "auto_vacuum": "INCREMENTAL (a new store file's default)",
        "load_seconds": round(load_s, 1),
        "claim_ms_before": before,
        "claim_ms_after_prune": after_prune,
        "reclaim_at_bound": bound,
        "prune": pruning,
        "mb": {"loaded": round(loaded["file"] / 1e6, 1), "pruned": round(pruned["file"] / 1e6, 1)},
        "free_mb_after_prune": round(pruned["free"] / 1e6, 1),
        "wal_mb_while_open": round(wal / 1e6, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument("--finished", type=int, default=50_000)
    parser.add_argument("--ready", type=int, default=10_000)
    parser.add_argument("--claims", type=int, default=300)
    options = parser.parse_args()
    previous: dict[str, Any] = {}
    if RESULTS.exists():
        previous = json.loads(RESULTS.read_text())
    if options.backend == "postgres":
        from bench_retention_postgres import measure_postgres

        scratch = Path(tempfile.mkdtemp(dir=Path(__file__).parent))
        try:
            template = finished_template(scratch)
        finally:
            shutil.rmtree(scratch)
        result = measure_postgres(template, options.finished, options.ready, options.claims)
        previous["postgres"] = result
    else:
        with tempfile.TemporaryDirectory(dir=Path(__file__).parent) as scratch_dir:
            result = measure(Path(scratch_dir), options.finished, options.ready, options.claims)
        runs = {str(run["finished"]): run for run in previous.get("runs", [])}
        runs[str(options.finished)] = result
        previous["runs"] = sorted(runs.values(), key=lambda run: run["finished"])
    print(json.dumps(result, indent=2))
    recorded = {
        "benchmark": "retention: embedded SQLite (WAL, synchronous=FULL) in runs; PostgreSQL "
        "15 (autovacuum on) in postgres",
        "machine": f"{platform.machine()}, {platform.python_implementation()} "
        f"{platform.python_version()}",
        "runs": previous.get("runs", []),
    }
    if "postgres" in previous:
        recorded["postgres"] = previous["postgres"]
    RESULTS.write_text(json.dumps(recorded, indent=2) + "\n")


if __name__ == "__main__":
    main()
