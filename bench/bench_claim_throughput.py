"""claim_next throughput with 1 and with N worker processes on one store.

Loads a backlog of ready workloads, then P processes each loop ``claim_next`` → ``start``
→ ``complete`` until nothing is left; reports workloads per second for each P. Meant for
PostgreSQL (the target of issue 3) but runs on any target.

Usage: python bench/bench_claim_throughput.py --target postgresql://… [--backlog 2000]
       [--processes 1,4]
       (scripts/with-postgres python bench/bench_claim_throughput.py uses FELTDB_TEST_PG)
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import sys
import time
from pathlib import Path

import msgspec

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from support.factories import CAPABILITIES, make_request

from feltdb import DURABLE_WORK_COLLECTION, WorkloadStore, open_database
from feltdb.storage.base import Mutation, Precondition
from feltdb.work.admission import new_workload
from feltdb.work.scheduling import row_index

LOAD_BATCH = 1000


def load(target: str, backlog: int, run: str) -> None:
    template = new_workload(make_request(application_id=run), "template")
    db = open_database(target)
    try:
        for first in range(0, backlog, LOAD_BATCH):
            mutations, guards = [], []
            for i in range(first, min(first + LOAD_BATCH, backlog)):
                w = msgspec.structs.replace(
                    template, workload_id=f"{run}_{i:08d}", priority=i % 10, created_at=i
                )
                mutations.append(
                    Mutation(DURABLE_WORK_COLLECTION, w.workload_id, w.to_json(), row_index(w))
                )
                guards.append(Precondition(DURABLE_WORK_COLLECTION, w.workload_id, True))
            db.commit(f"load-{run}-{first}", mutations, guards)
    finally:
        db.close()


def drain(target: str, run: str, me: int, start: float) -> int:
    done = 0
    with WorkloadStore.open(target) as store:
        while time.time() < start:
            time.sleep(0.001)
        while True:
            claim = store.claim_next("t", run, f"w{me}", CAPABILITIES, now=10_000)
            if claim is None:
                return done
            fence = (claim.workload_id, claim.claim_id, f"w{me}", claim.fencing_token)
            store.start(*fence, now=10_001)
            store.complete(*fence, f"r-{claim.workload_id}", {"ok": True}, now=10_002)
            done += 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", default=os.environ.get("FELTDB_TEST_PG"))
    parser.add_argument("--backlog", type=int, default=2000)
    parser.add_argument("--processes", default="1,4")
    parser.add_argument("--out", default=str(Path(__file__).parent / "results/throughput.json"))
    args = parser.parse_args()
    if not args.target:
        parser.error("--target (or FELTDB_TEST_PG) is required")
    results = []
    context = multiprocessing.get_context("spawn")
    for processes in (int(p) for p in args.processes.split(",")):
        run = f"bench{processes}p{int(time.time())}"
        load(args.target, args.backlog, run)
        start = time.time() + 2.0  # every process connected before the clock starts
        with context.Pool(processes) as pool:
            counts = pool.starmap(drain, [(args.target, run, n, start) for n in range(processes)])
        seconds = time.time() - start
        assert sum(counts) == args.backlog, counts
        row = {
            "processes": processes,
            "workloads": args.backlog,
            "seconds": round(seconds, 2),
            "workloads_per_second": round(args.backlog / seconds, 1),
            "per_process": counts,
        }
        results.append(row)
        print(json.dumps(row))
    kind = args.target.split(":", 1)[0] if "://" in args.target else "sqlite"
    Path(args.out).write_text(
        json.dumps(
            {
                "benchmark": "claim_next + start + complete per workload, P processes",
                "backend": kind,
                "results": results,
            },
            indent=2,
        )
        + "\n"
    )


if __name__ == "__main__":
    main()
