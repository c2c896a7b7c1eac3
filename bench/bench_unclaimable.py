"""Does ready work nobody may take stall a claim, or another tenant's admission?

A hostile submitter's backlog: B ready workloads at the highest priority needing a
capability no worker holds (``sms:send``), bulk-loaded as bench_claim_next.py loads its
backlog. Behind it, measured on a fresh store per size:

- ``claim_ms``: ``claim_next`` of a worker holding ``email:send`` that finds one workload it
  may take (admitted just before each claim, not timed), median of the calls;
- ``idle_claim_ms``: the same claim when nothing it may take is ready (an idle long-poll
  looks so every 0.25 s);
- ``admit_ms``: while a thread claims in a loop behind the backlog, the latency of a
  single admission by another tenant, median and worst.

The ratio that matters is each figure behind the backlog against the same figure on an
empty store (B = 0), in the same run.

Usage: python bench/bench_unclaimable.py [--sizes 0,5000,15000] [--claims 50]
       [--backends sqlite,postgres]   (postgres needs FELTDB_TEST_PG)
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

import msgspec

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_claim_next import load_backlog
from feltdb_runs.drains import target_for
from harness import machine
from support.factories import CAPABILITIES, SIGNER, make_request

from feltdb import CreateWorkload, WorkloadStore

TOP_PRIORITY = 2**31 - 1


def load_unclaimable(store: WorkloadStore, size: int) -> float:
    """Commit ``size`` ready workloads at the top priority needing ``sms:send``."""
    request = make_request(capability_snapshot={"sms:send"}, priority=TOP_PRIORITY)
    return load_backlog(store, size, request, varied=False)


def of_tenant(tenant: str, key: str) -> CreateWorkload:
    """The fixture request, by an agent whose grant is of ``tenant``."""
    grant = msgspec.structs.replace(make_request().authorization_snapshot.grant, tenant_id=tenant)
    return make_request(
        tenant_id=tenant, idempotency_key=key, authorization_snapshot=SIGNER.sign(grant)
    )


def median_ms(seconds: list[float]) -> float:
    return round(statistics.median(seconds) * 1000, 3)


def claims(store: WorkloadStore, calls: int, label: str) -> tuple[list[float], list[float]]:
    """Seconds per claim that finds one workload, and per claim that finds none."""
    found, idle = [], []
    for n in range(calls):
        store.create(make_request(idempotency_key=f"{label}-{n}", created_at=10 + n))
        began = time.perf_counter()
        claim = store.claim_next("t", "app", "worker", CAPABILITIES, now=10_000)
        found.append(time.perf_counter() - began)
        assert claim is not None, "the claimable workload was not claimed"
        began = time.perf_counter()
        nothing = store.claim_next("t", "app", "worker", CAPABILITIES, now=10_000)
        idle.append(time.perf_counter() - began)
        assert nothing is None
    return found, idle


def admissions_during_claims(store: WorkloadStore, admissions: int) -> list[float]:
    """Seconds per admission of another tenant while a thread claims behind the backlog."""
    stop = threading.Event()

    def claim_loop() -> None:
        while not stop.is_set():
            store.claim_next("t", "app", "looper", CAPABILITIES, now=10_000)

    looper = threading.Thread(target=claim_loop, daemon=True)
    looper.start()
    timings = []
    try:
        time.sleep(0.05)
        for n in range(admissions):
            began = time.perf_counter()
            store.create(of_tenant("other", f"theirs-{n}"))
            timings.append(time.perf_counter() - began)
            time.sleep(0.005)
    finally:
        stop.set()
        looper.join(timeout=600)
    return timings


def measure(backend: str, size: int, calls: int) -> dict[str, Any]:
    with target_for(backend, f"unclaimable_{size}") as (target, _home):
        with WorkloadStore.open(target) as store:
            load_s = load_unclaimable(store, size)
            claims(store, 3, "warm")  # the connection and the caches
            found, idle = claims(store, calls, "mine")
            admitted = admissions_during_claims(store, max(10, calls // 2))
    row = {
        "backend": backend,
        "unclaimable": size,
        "claim_ms": median_ms(found),
        "idle_claim_ms": median_ms(idle),
        "admit_ms": median_ms(admitted),
        "admit_max_ms": round(max(admitted) * 1000, 3),
        "load_seconds": round(load_s, 1),
    }
    print(json.dumps(row), file=sys.stderr)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="0,5000,15000")
    parser.add_argument("--claims", type=int, default=50)
    parser.add_argument("--backends", default="sqlite,postgres")
    parser.add_argument(
        "--out", default=str(Path(__file__).parent / "results" / "unclaimable.json")
    )
    args = parser.parse_args()
    backends = [
        b for b in args.backends.split(",") if b != "postgres" or os.environ.get("FELTDB_TEST_PG")
    ]
    rows = [
        measure(backend, int(size), args.claims)
        for backend in backends
        for size in args.sizes.split(",")
    ]
    for row in rows:
        empty = next(r for r in rows if r["backend"] == row["backend"] and r["unclaimable"] == 0)
        row["claim_vs_empty"] = round(row["claim_ms"] / empty["claim_ms"], 2)
        row["idle_claim_vs_empty"] = round(row["idle_claim_ms"] / empty["idle_claim_ms"], 2)
    Path(args.out).write_text(
        json.dumps(
            {
                "benchmark": "claims and another tenant's admissions behind unclaimable work",
                "machine": machine.describe(),
                "results": rows,
            },
            indent=2,
        )
        + "\n"
    )


if __name__ == "__main__":
    main()
