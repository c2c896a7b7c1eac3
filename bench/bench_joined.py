"""What admission in the caller's transaction costs: an application that records an order
and admits the work that confirms it, one order at a time (one thread), in three ways:

- ``joined``: one transaction of the application holding the order row and the work
  (``store.admit(request, connection=conn)``), committed by the application;
- ``row, then admit``: the application commits the order row, then admits the work in the
  store's own transaction (two commits, and a crash between them loses the work);
- ``admit alone``: the store's own admission with no row of the application, for scale.

Each on a fresh SQLite file (WAL, ``synchronous=FULL``), or a fresh PostgreSQL database
with ``--postgres`` (under ``scripts/with-postgres``). Rounds run the three in turn on a
store of their own, so a machine's drift falls on each alike; the median of the rounds is
kept.

Usage: python bench/bench_joined.py [--orders 400] [--rounds 3] [--postgres]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness.backends import on_backends, write_runs
from support.app_rows import begin, commit, connect, create_orders, insert_order
from support.factories import make_request

from feltdb import WorkloadStore

RESULTS = Path(__file__).resolve().parent / "results" / "joined.json"
NOW = 100


def orders_and_work(store: WorkloadStore, target: str, count: int, *, together: bool) -> float:
    """Orders with their work a second: in one transaction (``together``) or two commits."""
    connection = connect(target)
    try:
        started = time.perf_counter()
        for n in range(count):
            begin(connection)
            insert_order(connection, f"order-{n}")
            request = make_request(idempotency_key=f"o{n}", created_at=NOW)
            if together:
                store.admit(request, connection=connection)
                commit(connection)
            else:
                commit(connection)
                store.admit(request)
        return count / (time.perf_counter() - started)
    finally:
        connection.close()


def admit_alone(store: WorkloadStore, target: str, count: int) -> float:
    started = time.perf_counter()
    for n in range(count):
        store.admit(make_request(idempotency_key=f"o{n}", created_at=NOW))
    return count / (time.perf_counter() - started)


SHAPES: dict[str, Callable[[WorkloadStore, str, int], float]] = {
    "joined": partial(orders_and_work, together=True),
    "row, then admit": partial(orders_and_work, together=False),
    "admit alone": admit_alone,
}


def measure(new_target: Callable[[str], str], count: int, rounds: int) -> dict[str, Any]:
    per_second: dict[str, list[float]] = {}
    for round_number in range(rounds):
        for place, (name, shape) in enumerate(SHAPES.items()):
            target = new_target(f"{round_number}_{place}")
            create_orders(target)
            with WorkloadStore.open(target) as store:
                rate = shape(store, target, count)
            per_second.setdefault(name, []).append(rate)
            print(f"  round {round_number + 1}, {name}: {rate:,.0f}/s", file=sys.stderr)
    medians = {name: round(statistics.median(rates)) for name, rates in per_second.items()}
    return {
        "per_second": medians,
        "joined_relative_to_row_then_admit": round(
            medians["joined"] / medians["row, then admit"], 2
        ),
        "rounds": {name: [round(rate) for rate in rates] for name, rates in per_second.items()},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--orders", type=int, default=400)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--postgres", action="store_true", help="Run on PostgreSQL too.")
    parser.add_argument("--out", type=Path, default=RESULTS, help="Where the JSON goes.")
    args = parser.parse_args()
    runs = on_backends(
        lambda new_target: measure(new_target, args.orders, args.rounds),
        postgres=args.postgres,
        label="joined",
    )
    write_runs(
        args.out,
        "an order row and the work confirming it, one at a time: in one transaction of the "
        "application (joined), as two commits, and the admission alone",
        runs,
        orders=args.orders,
    )


if __name__ == "__main__":
    main()
