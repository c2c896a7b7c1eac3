"""One feltdb worker process of a drain (speaks harness.child's protocol).

Modes:
- ``store``: the library loop, ``claim_next`` → ``start`` → ``complete`` on a
  ``WorkloadStore`` (three commits per workload), until nothing is claimable;
- ``batches``: the library's batch calls, ``claim_work`` (claimed and started, 100 at a
  time) → ``complete_many``, until nothing is claimable;
- ``worker``: ``feltdb.worker.Worker(store=WorkloadStore.open(target))`` with a no-op
  handler, ``worker.drain()``;
- ``http``: ``Worker(url, token=…)`` against a ``feltdb serve`` process, ``drain()``.

Every mode settles its heap once set up (``feltdb.heap.settle_heap``), as ``feltdb worker``
and ``feltdb serve`` do, and as a long-running process embedding the store should.

Usage: python -m feltdb_runs.drain_child MODE --target T | --url U (token in FELTDB_TOKEN)
"""

from __future__ import annotations

import argparse
import json
import os
from typing import Any

from harness import child
from support.factories import CAPABILITIES

from feltdb import Completion, WorkloadStore
from feltdb.heap import settle_heap
from feltdb.worker import Context, Worker

TENANT, APPLICATION = "t", "app"


def store_loop(store: WorkloadStore, me: str) -> int:
    done = 0
    while True:
        claim = store.claim_next(TENANT, APPLICATION, me, CAPABILITIES)
        if claim is None:
            return done
        fence = (claim.workload_id, claim.claim_id, me, claim.fencing_token)
        store.start(*fence)
        store.complete(*fence, f"r-{claim.workload_id}", {"ok": True})
        done += 1


BATCH = 100


def batch_loop(store: WorkloadStore, me: str) -> int:
    done = 0
    while True:
        claimed = store.claim_work(TENANT, APPLICATION, me, CAPABILITIES, BATCH)
        if not claimed:
            return done
        answers = store.complete_many(
            [
                Completion(
                    work.claim.workload_id,
                    work.claim.claim_id,
                    me,
                    work.claim.fencing_token,
                    f"r-{work.claim.workload_id}",
                    {"ok": True},
                )
                for work in claimed
            ]
        )
        done += sum(not isinstance(answer, Exception) for answer in answers)


def make_worker(mode: str, options: argparse.Namespace, extra: dict[str, Any]) -> Worker:
    if mode == "worker":
        worker = Worker(
            store=WorkloadStore.open(options.target),
            tenant=TENANT,
            application=APPLICATION,
            capabilities=CAPABILITIES,
            concurrency=options.concurrency,
            **extra,
        )
    else:
        worker = Worker(
            options.url,
            token=os.environ["FELTDB_TOKEN"],
            capabilities=CAPABILITIES,
            concurrency=options.concurrency,
            **extra,
        )

    @worker.handler("send")
    def noop(ctx: Context) -> dict[str, bool]:
        return {"ok": True}

    return worker


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=("store", "batches", "worker", "http"))
    parser.add_argument("--target")
    parser.add_argument("--url")
    parser.add_argument("--concurrency", type=int, default=1)
    parser.add_argument("--index", type=int, default=0)
    parser.add_argument("--worker-options", default="auto", help="JSON, or 'auto'")
    options = parser.parse_args()
    if options.mode in ("store", "batches"):
        store = WorkloadStore.open(options.target)
        loop = store_loop if options.mode == "store" else batch_loop
        settle_heap()
        at_go = child.wait_for_go()
        done = loop(store, f"worker:bench-{options.index}")
        child.report(done, at_go)
        store.close()
        return
    # "auto": the Worker's defaults, which batch claims (one per free slot) and
    # completions (bench/README.md); JSON to set others, e.g. '{"completion_batch": 1}'.
    extra = {} if options.worker_options == "auto" else json.loads(options.worker_options)
    worker = make_worker(options.mode, options, extra)
    settle_heap()
    at_go = child.wait_for_go()
    done = worker.drain()
    child.report(done, at_go, worker_options=extra)


if __name__ == "__main__":
    main()
