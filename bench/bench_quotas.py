"""What admission quotas cost admission: workloads admitted per second one at a time (one
thread), by eight threads at once, and by batches of 100, into a tenant without a quota
against one whose quota never refuses (a cap of 1,000,000 and a rate of 1,000,000 a
second: every admission reads, holds and writes the quota row, none is refused); each
shape on a fresh SQLite file (WAL, ``synchronous=FULL``), or a fresh PostgreSQL database
with ``--postgres`` (under ``scripts/with-postgres``). Rounds alternate the two, so a
machine's drift falls on each alike; the median of the rounds is kept.

Usage: python bench/bench_quotas.py [--workloads 600] [--rounds 3] [--postgres]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness.backends import on_backends, write_runs
from support.factories import make_request

from feltdb import WorkloadStore

RESULTS = Path(__file__).resolve().parent / "results" / "quotas.json"
NOW = 100
THREADS = 8


def single(store: WorkloadStore, count: int, prefix: str) -> float:
    started = time.perf_counter()
    for n in range(count):
        store.admit(make_request(idempotency_key=f"{prefix}{n}", created_at=NOW))
    return count / (time.perf_counter() - started)


def threaded(store: WorkloadStore, count: int, prefix: str) -> float:
    def admit(thread: int) -> None:
        for n in range(count // THREADS):
            store.admit(make_request(idempotency_key=f"{prefix}{thread}-{n}", created_at=NOW))

    threads = [threading.Thread(target=admit, args=(t,)) for t in range(THREADS)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return (count // THREADS * THREADS) / (time.perf_counter() - started)


def batches(store: WorkloadStore, count: int, prefix: str) -> float:
    requests = [make_request(idempotency_key=f"{prefix}{n}", created_at=NOW) for n in range(count)]
    started = time.perf_counter()
    for start in range(0, count, 100):
        answers = store.admit_many(requests[start : start + 100])
        assert all(isinstance(answer, tuple) for answer in answers)
    return count / (time.perf_counter() - started)


SHAPES = {"one at a time": single, f"{THREADS} threads": threaded, "batches of 100": batches}


def measure(new_target: Callable[[str], str], count: int, rounds: int) -> dict[str, Any]:
    per_second: dict[str, list[float]] = {}
    for round_number in range(rounds):
        for quota in (False, True):
            with WorkloadStore.open(new_target(f"{round_number}_{int(quota)}")) as store:
                if quota:
                    store.limits.set_quota(
                        "t", max_unfinished=1_000_000, per_second=1_000_000, actor="bench",
                        now=0,
                    )  # fmt: skip
                for name, shape in SHAPES.items():
                    label = f"{name}, {'a quota' if quota else 'no quota'}"
                    rate = shape(store, count, name[:1])
                    per_second.setdefault(label, []).append(rate)
                    print(f"  round {round_number + 1}, {label}: {rate:,.0f}/s", file=sys.stderr)
    medians = {label: round(statistics.median(rates)) for label, rates in per_second.items()}
    relative = {
        name: round(medians[f"{name}, a quota"] / medians[f"{name}, no quota"], 2)
        for name in SHAPES
    }
    return {
        "per_second": medians,
        "quota_relative_to_none": relative,
        "rounds": {label: [round(rate) for rate in rates] for label, rates in per_second.items()},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workloads", type=int, default=600)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--postgres", action="store_true", help="Run on PostgreSQL too.")
    parser.add_argument("--out", type=Path, default=RESULTS, help="Where the JSON goes.")
    args = parser.parse_args()
    runs = on_backends(
        lambda new_target: measure(new_target, args.workloads, args.rounds),
        postgres=args.postgres,
        label="quotas",
    )
    write_runs(
        args.out,
        "admissions (one at a time, 8 threads, batches of 100) into a tenant without a quota "
        "and one whose quota never refuses",
        runs,
        workloads=args.workloads,
    )


if __name__ == "__main__":
    main()
