"""What limits and fairness cost a drain, and what fairness buys a small tenant.

Drains: workloads per second through a claim + ``start`` + ``complete`` (three commits
each, one thread) on a store whose work names no key; where half of it names one of ten
concurrency keys of limit 4; where all of it names one key of limit 4; where it is spread
over 100 fairness keys of one application; and where it is spread over 100 tenants,
claimed by ``store.tenants.claim_many`` (each claim from the next tenant in turn). With
one worker a key never fills: this measures what taking and releasing slots, and taking
turns, costs each claim, not waiting for one.

Time to first claim: a backlog of N workloads of one key (or tenant) is admitted, then ten
of another; one worker drains, and the figure is how many claims, and how long, until the
first of the ten is claimed: without fairness (no keys: claim order, the backlog first),
with fairness keys, and with tenants in turn.

Each drain on a fresh SQLite file (WAL, ``synchronous=FULL``), or a fresh PostgreSQL
database with ``--postgres`` (under ``scripts/with-postgres``). Rounds alternate the
shapes, so a machine's drift falls on each alike; the median of the rounds is kept.

Usage: python bench/bench_limits.py [--workloads 2000] [--rounds 3] [--postgres]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness.backends import on_backends, write_runs
from support.factories import CAPABILITIES, SIGNER, make_grant, make_request

from feltdb import CreateWorkload, WorkloadClaim, WorkloadStore

RESULTS = Path(__file__).resolve().parent / "results" / "limits.json"
NOW = 11
TENANTS = 100
WORKER = "worker:w"

Shape = Callable[[int], dict[str, Any]]
SHAPES: dict[str, Shape] = {
    "no key": lambda n: {},
    "half under 10 keys of limit 4": lambda n: (
        {} if n % 2 else {"concurrency_key": f"k{n % 10}", "concurrency_limit": 4}
    ),
    "all under 1 key of limit 4": lambda n: {"concurrency_key": "k", "concurrency_limit": 4},
    "100 fairness keys": lambda n: {"fairness_key": f"c{n % TENANTS}"},
    "100 tenants in turn": lambda n: {
        "tenant_id": f"t{n % TENANTS}",
        "authorization_snapshot": SIGNER.sign(make_grant(tenant_id=f"t{n % TENANTS}")),
    },
}
SCOPES = [(f"t{n}", "app") for n in range(TENANTS)]


def claim_one(store: WorkloadStore, tenants: bool) -> WorkloadClaim | None:
    """The next claim, of one application or (``tenants``) of the next tenant in turn."""
    if not tenants:
        return store.claim_next("t", "app", WORKER, CAPABILITIES, NOW, 600_000)
    found = store.tenants.claim_many(SCOPES, WORKER, CAPABILITIES, 1, NOW, 600_000, start=False)
    return found[0].claim if found else None


def finish(store: WorkloadStore, claim: WorkloadClaim) -> None:
    """Start and complete the claimed work (two commits)."""
    store.start(claim.workload_id, claim.claim_id, WORKER, claim.fencing_token, NOW)
    store.complete(
        claim.workload_id, claim.claim_id, WORKER, claim.fencing_token,
        f"r-{claim.workload_id}", {"ok": True}, now=NOW,
    )  # fmt: skip


def admit(store: WorkloadStore, requests: list[CreateWorkload]) -> None:
    for start in range(0, len(requests), 500):
        store.admit_many(requests[start : start + 500])


def drain(target: str, count: int, name: str) -> float:
    """Admit ``count`` workloads of shape ``name``, then drain them one at a time; per second."""
    shape, tenants = SHAPES[name], name == "100 tenants in turn"
    with WorkloadStore.open(target) as store:
        admit(store, [make_request(idempotency_key=f"w{n}", **shape(n)) for n in range(count)])
        started = time.perf_counter()
        for _ in range(count):
            claim = claim_one(store, tenants)
            assert claim is not None
            finish(store, claim)
        return count / (time.perf_counter() - started)


FIRST_CLAIM: dict[str, Callable[[str], dict[str, Any]]] = {
    "no fairness (claim order)": lambda who: {},
    "fairness keys": lambda who: {"fairness_key": who},
    "tenants in turn": lambda who: {
        "tenant_id": who, "authorization_snapshot": SIGNER.sign(make_grant(tenant_id=who)),
    },
}  # fmt: skip


def first_claim(target: str, backlog: int, name: str) -> tuple[int, float]:
    """Admit ``backlog`` workloads of a large key (or tenant), then ten of a small one; one
    worker drains: the claims made, and the seconds, until the small one's first claim.
    """
    fields = FIRST_CLAIM[name]
    tenants = name == "tenants in turn"
    with WorkloadStore.open(target) as store:
        large = [
            make_request(idempotency_key=f"l{n}", created_at=1, **fields("t"))
            for n in range(backlog)
        ]
        admit(store, large)
        small = store.admit_many(
            [make_request(idempotency_key=f"s{n}", created_at=2, **fields("t0")) for n in range(10)]
        )
        wanted = {answer[0].workload_id for answer in small if isinstance(answer, tuple)}
        scopes = [("t", "app"), ("t0", "app")]
        started, claims = time.perf_counter(), 0
        while True:
            if tenants:
                found = store.tenants.claim_many(
                    scopes, WORKER, CAPABILITIES, 1, NOW, 600_000, start=False
                )
                claim = found[0].claim if found else None
            else:
                claim = store.claim_next("t", "app", WORKER, CAPABILITIES, NOW, 600_000)
            assert claim is not None
            claims += 1
            finish(store, claim)
            if claim.workload_id in wanted:
                return claims, time.perf_counter() - started


def measure(new_target: Callable[[str], str], count: int, rounds: int) -> dict[str, Any]:
    per_second: dict[str, list[float]] = {name: [] for name in SHAPES}
    waits: dict[str, list[tuple[int, float]]] = {name: [] for name in FIRST_CLAIM}
    for round_number in range(rounds):
        for place, name in enumerate(SHAPES):
            rate = drain(new_target(f"{round_number}_{place}"), count, name)
            per_second[name].append(rate)
            print(f"  round {round_number + 1}, {name}: {rate:,.0f}/s", file=sys.stderr)
        for place, name in enumerate(FIRST_CLAIM):
            claims, seconds = first_claim(new_target(f"{round_number}_f{place}"), count, name)
            waits[name].append((claims, seconds))
            print(f"  round {round_number + 1}, first claim, {name}: {claims} claims, "
                  f"{seconds * 1000:,.1f} ms", file=sys.stderr)  # fmt: skip
    medians = {name: round(statistics.median(rates)) for name, rates in per_second.items()}
    base = medians["no key"]
    return {
        "per_second": medians,
        "relative_to_no_key": {name: round(rate / base, 2) for name, rate in medians.items()},
        "rounds": {name: [round(rate) for rate in rates] for name, rates in per_second.items()},
        "first_claim": {
            name: {
                "claims": statistics.median(claims for claims, _ in found),
                "ms": round(statistics.median(seconds for _, seconds in found) * 1000, 1),
            }
            for name, found in waits.items()
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workloads", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--postgres", action="store_true", help="Run on PostgreSQL too.")
    parser.add_argument("--out", type=Path, default=RESULTS, help="Where the JSON goes.")
    args = parser.parse_args()
    print(f"{args.workloads:,} workloads a drain", file=sys.stderr)
    runs = on_backends(
        lambda target: measure(target, args.workloads, args.rounds),
        postgres=args.postgres,
        label="limits",
    )
    write_runs(
        args.out,
        "a drain (a claim, start, complete; one thread) with and without concurrency keys, "
        "fairness keys and tenants in turn; the time to a small key's first claim behind a "
        "backlog",
        runs,
        date=time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        rounds=args.rounds,
        workloads=args.workloads,
    )


if __name__ == "__main__":
    main()
