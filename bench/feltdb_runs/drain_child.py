"""One feltdb worker process of a drain (speaks harness.child's protocol).

Modes:
- ``store``: the library loop, ``claim_next`` → ``start`` → ``complete`` on a
  ``WorkloadStore`` (three commits per workload), until nothing is claimable;
- ``worker``: ``feltdb.worker.Worker(store=WorkloadStore.open(target))`` with a no-op
  handler, ``worker.drain()``;
- ``http``: ``Worker(url, token=…)`` against a ``feltdb serve`` process, ``drain()``.

Usage: python -m feltdb_runs.drain_child MODE --target T | --url U (token in FELTDB_TOKEN)
"""

from __future__ import annotations

import argparse
import json
import os
from typing import Any

from harness import child
from support.factories import CAPABILITIES

from feltdb import WorkloadStore
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
    parser.add_argument("mode", choices=("store", "worker", "http"))
    parser.add_argument("--target")
    parser.add_argument("--url")
    parser.add_argument("--concurrency", type=int, default=1)
    parser.add_argument("--index", type=int, default=0)
    parser.add_argument("--worker-options", default="auto", help="JSON, or 'auto'")
    options = parser.parse_args()
    if options.mode == "store":
        store = WorkloadStore.open(options.target)
        at_go = child.wait_for_go()
        done = store_loop(store, f"worker:bench-{options.index}")
        child.report(done, at_go)
        store.close()
        return
    # "auto": the Worker's defaults, which batch claims (one per free slot) and
    # completions (bench/README.md); JSON to set others, e.g. '{"completion_batch": 1}'.
    extra = {} if options.worker_options == "auto" else json.loads(options.worker_options)
    worker = make_worker(options.mode, options, extra)
    at_go = child.wait_for_go()
    done = worker.drain()
    child.report(done, at_go, worker_options=extra)


if __name__ == "__main__":
    main()
