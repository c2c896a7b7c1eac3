"""Workloads per second through the store's single calls against its batches.

N workloads are admitted (``admit`` each, against ``admit_many`` in batches), claimed and
started (``claim_next`` + ``start`` each, against ``claim_many(start=True)``), then
completed (``complete`` each, against ``complete_many``), on a SQLite file (WAL,
``synchronous=FULL``). One process, one thread: this is the cost of the calls, not of a
worker fleet. (PostgreSQL figures of the storage primitive alone are
``bench/bench_commit_many.py``'s.)

Usage: python bench/bench_batches.py [--workloads 2000] [--batch 100]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from support.factories import CAPABILITIES, make_request

from feltdb import Completion, WorkloadStore

RESULTS = Path(__file__).resolve().parent / "results" / "batches.json"
NOW = 11


def timed(run: Callable[[], None], count: int) -> float:
    started = time.perf_counter()
    run()
    return count / (time.perf_counter() - started)


def singles(store: WorkloadStore, count: int) -> dict[str, float]:
    requests = [make_request(idempotency_key=f"single-{n}") for n in range(count)]
    claims: list[Any] = []

    def claim_and_start() -> None:
        for _ in range(count):
            claim = store.claim_next("t", "app", "worker:w", CAPABILITIES, NOW, 600_000)
            assert claim is not None
            store.start(claim.workload_id, claim.claim_id, "worker:w", claim.fencing_token, NOW)
            claims.append(claim)

    def complete() -> None:
        for c in claims:
            store.complete(
                c.workload_id, c.claim_id, "worker:w", c.fencing_token, f"r-{c.workload_id}",
                {"ok": True}, now=NOW,
            )  # fmt: skip

    return {
        "admit": timed(lambda: [store.admit(r) for r in requests] and None, count),
        "claim+start": timed(claim_and_start, count),
        "complete": timed(complete, count),
    }


def batches(store: WorkloadStore, count: int, size: int) -> dict[str, float]:
    requests = [make_request(idempotency_key=f"batch-{n}") for n in range(count)]
    claims: list[Any] = []

    def admit() -> None:
        for first in range(0, count, size):
            store.admit_many(requests[first : first + size])

    def claim_and_start() -> None:
        while len(claims) < count:
            batch = store.claim_many(
                "t", "app", "worker:w", CAPABILITIES, size, NOW, 600_000, start=True
            )
            assert batch
            claims.extend(batch)

    def complete() -> None:
        for first in range(0, count, size):
            store.complete_many(
                [
                    Completion(c.workload_id, c.claim_id, "worker:w", c.fencing_token,
                               f"r-{c.workload_id}", {"ok": True})
                    for c in claims[first : first + size]
                ],
                now=NOW,
            )  # fmt: skip

    return {
        "admit": timed(admit, count),
        "claim+start": timed(claim_and_start, count),
        "complete": timed(complete, count),
    }


def measure(scratch: Path, count: int, size: int) -> dict[str, dict[str, float]]:
    with WorkloadStore.open(scratch / "single.db") as store:
        one = singles(store, count)
    with WorkloadStore.open(scratch / "batch.db") as store:
        many = batches(store, count, size)
    return {"single": one, f"batch of {size}": many}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", type=int, default=2000)
    parser.add_argument("--batch", type=int, default=100)
    options = parser.parse_args()
    results: dict[str, Any] = {"workloads": options.workloads}
    with tempfile.TemporaryDirectory() as scratch:
        results["sqlite"] = measure(Path(scratch), options.workloads, options.batch)
    for mode, figures in results["sqlite"].items():
        row = ", ".join(f"{name} {rate:,.0f}/s" for name, rate in figures.items())
        print(f"sqlite   {mode:14} {row}")
    RESULTS.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
