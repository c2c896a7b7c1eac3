"""Pruning the log itself: what ``store.audit.prune_log`` costs, step by step, on a store of
N finished workloads (each admitted, claimed and completed by the batch paths: about three
log entries a workload), and what it frees.

Steps timed apart (from the progress the pruning reports as each step ends): the whole
chain's check, writing again every row (N workloads, :data:`~feltdb.work.log_carry.CARRY_BATCH`
a commit, each checked against its writer's hash), the second check, the export, and the
mark with the deletions (5,000 entries a transaction). Then
``audit verify`` again (the pruned range walked as links alone). On SQLite, the file's
size before and after, and its free pages (reused by later writes). On PostgreSQL (with
``--postgres``, under ``scripts/with-postgres``), the log table's size before and after.

Usage: python bench/bench_log_pruning.py [--workloads 20000] [--postgres]
"""

from __future__ import annotations

import argparse
import json
import platform
import sqlite3
import sys
import tempfile
import time
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import pg
from support.finished import finish_many

from feltdb import WorkloadStore

RESULTS = Path(__file__).resolve().parent / "results" / "log_pruning.json"


def steps_timer() -> tuple[Callable[[str], None], list[tuple[str, float]]]:
    """A progress callback that notes each step's line and the seconds since the last."""
    noted: list[tuple[str, float]] = []
    last = [time.perf_counter()]

    def said(line: str) -> None:
        now = time.perf_counter()
        noted.append((line, round(now - last[0], 2)))
        last[0] = now
        print(f"  {line} ({noted[-1][1]} s)", file=sys.stderr, flush=True)

    return said, noted


def sqlite_sizes(path: Path) -> dict[str, float]:
    connection = sqlite3.connect(path)
    try:
        page = connection.execute("PRAGMA page_size").fetchone()[0]
        pages = connection.execute("PRAGMA page_count").fetchone()[0]
        free = connection.execute("PRAGMA freelist_count").fetchone()[0]
    finally:
        connection.close()
    return {"mb": round(pages * page / 1e6, 1), "free_mb": round(free * page / 1e6, 1)}


def log_mb(url: str) -> float:
    return round(pg.scalar(url, "SELECT pg_total_relation_size('transactions')") / 1e6, 1)


def run(target: str, workloads: int, scratch: Path, sizes: Callable[[], Any]) -> dict[str, Any]:
    with WorkloadStore.open(target) as store:
        started = time.perf_counter()
        finish_many(store, workloads, 100)
        load = time.perf_counter() - started
        before = sizes()
        said, noted = steps_timer()
        started = time.perf_counter()
        report = store.audit.prune_log(
            scratch / "log.jsonl", None, actor="human:bench", progress=said
        )
        total = time.perf_counter() - started
        started = time.perf_counter()
        verified = store.audit.verify()
        verify_after = time.perf_counter() - started
    assert verified.ok and report.export is not None
    steps = [seconds for _, seconds in noted]
    return {
        "workloads": workloads,
        "load_seconds": round(load, 1),
        "prune_seconds": round(total, 1),
        "check_seconds": steps[0],
        "carry_seconds": steps[1],
        "carried_rows": report.carried,
        "carry_rows_per_second": round(report.carried / max(steps[1], 1e-9)),
        "check_again_seconds": steps[2],
        "export_seconds": steps[3],
        "export_mb": round(report.export.size / 1e6, 1),
        "mark_and_delete_seconds": round(total - sum(steps), 2),
        "deleted": report.deleted,
        "verify_after_seconds": round(verify_after, 2),
        "before": before,
        "after": sizes(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workloads", type=int, default=20_000)
    parser.add_argument("--postgres", action="store_true", help="Run on PostgreSQL too.")
    parser.add_argument("--out", type=Path, default=RESULTS, help="Where the JSON goes.")
    args = parser.parse_args()
    runs: dict[str, Any] = {}
    with ExitStack() as stack:
        scratch = Path(stack.enter_context(tempfile.TemporaryDirectory(dir="/var/tmp")))
        path = scratch / "store.db"
        print(f"sqlite, {args.workloads:,} workloads", file=sys.stderr)
        runs["sqlite"] = run(str(path), args.workloads, scratch, lambda: sqlite_sizes(path))
        admin = pg.admin_url()
        if args.postgres and admin is not None:
            url = stack.enter_context(pg.fresh_database(admin, "log_pruning"))
            (scratch / "log.jsonl").unlink()
            print(f"postgres, {args.workloads:,} workloads", file=sys.stderr)
            runs["postgres"] = run(url, args.workloads, scratch, lambda: {"log_mb": log_mb(url)})
    result = {
        "benchmark": "pruning the log (store.audit.prune_log up to the head)",
        "machine": f"{platform.machine()}, CPython {platform.python_version()}",
        "runs": runs,
    }
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
