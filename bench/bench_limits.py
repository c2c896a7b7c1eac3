"""What concurrency limits cost a drain: workloads per second through ``claim_next`` +
``start`` + ``complete`` (three commits each, one thread) on a store whose work names no
key, against one where half of it names one of ten keys of limit 4, and one where all of
it names one key of limit 4; each drain on a fresh SQLite file (WAL, ``synchronous=FULL``),
or a fresh PostgreSQL database with ``--postgres`` (under ``scripts/with-postgres``).
Rounds alternate the shapes, so a machine's drift falls on each alike; the median of the
rounds is kept. With one worker a key never fills: this measures what taking and
releasing slots costs each claim (the slot row read, written and guarded in the claim's
commit, the holders' rows read), not waiting for one.

Usage: python bench/bench_limits.py [--workloads 2000] [--rounds 3] [--postgres]
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
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
from support.factories import CAPABILITIES, make_request

from feltdb import WorkloadStore

RESULTS = Path(__file__).resolve().parent / "results" / "limits.json"
NOW = 11

Shape = Callable[[int], dict[str, Any]]
SHAPES: dict[str, Shape] = {
    "no key": lambda n: {},
    "half under 10 keys of limit 4": lambda n: (
        {} if n % 2 else {"concurrency_key": f"k{n % 10}", "concurrency_limit": 4}
    ),
    "all under 1 key of limit 4": lambda n: {"concurrency_key": "k", "concurrency_limit": 4},
}


def drain(target: str, count: int, shape: Shape) -> float:
    """Admit ``count`` workloads of ``shape``, then drain them one at a time; per second."""
    with WorkloadStore.open(target) as store:
        requests = [make_request(idempotency_key=f"w{n}", **shape(n)) for n in range(count)]
        for start in range(0, count, 500):
            store.admit_many(requests[start : start + 500])
        started = time.perf_counter()
        for _ in range(count):
            claim = store.claim_next("t", "app", "worker:w", CAPABILITIES, NOW, 600_000)
            assert claim is not None
            store.start(claim.workload_id, claim.claim_id, "worker:w", claim.fencing_token, NOW)
            store.complete(
                claim.workload_id, claim.claim_id, "worker:w", claim.fencing_token,
                f"r-{claim.workload_id}", {"ok": True}, now=NOW,
            )  # fmt: skip
        return count / (time.perf_counter() - started)


def measure(new_target: Callable[[str], str], count: int, rounds: int) -> dict[str, Any]:
    per_second: dict[str, list[float]] = {name: [] for name in SHAPES}
    for round_number in range(rounds):
        for place, (name, shape) in enumerate(SHAPES.items()):
            rate = drain(new_target(f"{round_number}_{place}"), count, shape)
            per_second[name].append(rate)
            print(f"  round {round_number + 1}, {name}: {rate:,.0f}/s", file=sys.stderr)
    medians = {name: round(statistics.median(rates)) for name, rates in per_second.items()}
    base = medians["no key"]
    return {
        "per_second": medians,
        "relative_to_no_key": {name: round(rate / base, 2) for name, rate in medians.items()},
        "rounds": {name: [round(rate) for rate in rates] for name, rates in per_second.items()},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workloads", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--postgres", action="store_true", help="Run on PostgreSQL too.")
    parser.add_argument("--out", type=Path, default=RESULTS, help="Where the JSON goes.")
    args = parser.parse_args()
    runs: dict[str, Any] = {}
    with ExitStack() as stack:
        scratch = Path(stack.enter_context(tempfile.TemporaryDirectory(dir="/var/tmp")))
        print(f"sqlite, {args.workloads:,} workloads a drain", file=sys.stderr)
        runs["sqlite"] = measure(
            lambda name: str(scratch / f"{name}.db"), args.workloads, args.rounds
        )
        admin = pg.admin_url()
        if args.postgres and admin is not None:
            print(f"postgres, {args.workloads:,} workloads a drain", file=sys.stderr)

            def database(name: str) -> str:
                return stack.enter_context(pg.fresh_database(admin, f"limits_{name}"))

            runs["postgres"] = measure(database, args.workloads, args.rounds)
    result = {
        "benchmark": "a drain (claim_next, start, complete; one thread) with and without "
        "concurrency keys",
        "machine": f"{platform.machine()}, CPython {platform.python_version()}",
        "workloads": args.workloads,
        "runs": runs,
    }
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
