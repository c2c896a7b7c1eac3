"""Wake-up hints between processes on PostgreSQL (``LISTEN``/``NOTIFY``): what they cost
the committing side and how soon the other side hears them.

(a) Cost: T threads admit N workloads through one store (group commit on), with the
    hints announced (each admission may make work claimable) against with ``announce``
    disabled, alternating rounds; admissions per second of each.
(b) Latency: a second database object (another process's, as far as PostgreSQL knows)
    subscribes; one workload is admitted every 2 x MIN_INTERVAL_S (apart, so that the
    announcer's throttle never delays one) and the time from the admission's return to
    the subscriber's call is recorded; median and 95th percentile. Under load a hint may
    wait up to MIN_INTERVAL_S behind the previous one: that is the throttle's price.

Usage: scripts/with-postgres .venv/bin/python bench/bench_wakeups.py [--workloads 2000]
       [--threads 4] [--rounds 3] [--samples 200]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from support.factories import make_request

from feltdb import WorkloadStore
from feltdb.storage.postgres import PostgresDatabase
from feltdb.storage.postgres_wakeups import MIN_INTERVAL_S

RESULTS = Path(__file__).resolve().parent / "results" / "wakeups.json"


@contextmanager
def scratch_database(admin_url: str) -> Iterator[str]:
    """A new database on the server of ``admin_url``, dropped afterwards; its URL."""
    name = f"bench_wakeups_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(admin_url, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    url = psycopg.conninfo.make_conninfo(admin_url, dbname=name)
    try:
        yield url
    finally:
        with psycopg.connect(admin_url, autocommit=True) as admin:
            admin.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(name)))


def admissions_per_s(url: str, count: int, threads: int, hints: bool, run: str) -> float:
    db = PostgresDatabase(url, max_size=threads + 2)
    if not hints:
        db.wakeups.announce = lambda: None  # type: ignore[method-assign]
    store = WorkloadStore(db)
    each = count // threads

    def admit(worker: int) -> None:
        for n in range(each):
            store.admit(make_request(idempotency_key=f"{run}-{worker}-{n}"))

    started = time.perf_counter()
    running = [threading.Thread(target=admit, args=(w,)) for w in range(threads)]
    for thread in running:
        thread.start()
    for thread in running:
        thread.join()
    elapsed = time.perf_counter() - started
    db.close()
    return each * threads / elapsed


def hint_latencies_ms(url: str, samples: int) -> list[float]:
    one, two = PostgresDatabase(url), PostgresDatabase(url)
    heard = threading.Event()
    two.wakeups.subscribe(heard.set)
    heard.wait(30)  # the listener's first call: it listens
    store = WorkloadStore(one)
    latencies: list[float] = []
    for n in range(samples):
        heard.clear()
        store.admit(make_request(idempotency_key=f"latency-{n}"))
        returned = time.perf_counter()
        if heard.wait(10):
            latencies.append((time.perf_counter() - returned) * 1000)
        time.sleep(2 * MIN_INTERVAL_S)
    one.close()
    two.close()
    return latencies


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", type=int, default=2000)
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--samples", type=int, default=200)
    options = parser.parse_args()
    admin_url = os.environ["FELTDB_TEST_PG"]
    rates: dict[str, list[float]] = {"hints on": [], "hints off": []}
    with scratch_database(admin_url) as url:
        for round_ in range(options.rounds):
            for label in (
                ("hints on", "hints off") if round_ % 2 == 0 else ("hints off", "hints on")
            ):
                rate = admissions_per_s(
                    url, options.workloads, options.threads, label == "hints on",
                    f"r{round_}-{label.replace(' ', '')}",
                )  # fmt: skip
                rates[label].append(rate)
                print(f"round {round_ + 1} {label:9}: {rate:,.0f} admissions/s", flush=True)
        latencies = hint_latencies_ms(url, options.samples)
    ordered = sorted(latencies)
    results: dict[str, Any] = {
        "workloads": options.workloads,
        "threads": options.threads,
        "admissions_per_s": rates,
        "median_admissions_per_s": {k: statistics.median(v) for k, v in rates.items()},
        "hint_latency_ms": {
            "samples": len(ordered),
            "lost": options.samples - len(ordered),
            "median": statistics.median(ordered) if ordered else None,
            "p95": ordered[int(len(ordered) * 0.95) - 1] if ordered else None,
        },
    }
    for label, median in results["median_admissions_per_s"].items():
        print(f"median {label:9}: {median:,.0f} admissions/s")
    print(f"hint latency: {results['hint_latency_ms']}")
    RESULTS.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
