"""The handlers the end-to-end tests run in real ``feltdb worker`` processes.

Each handler appends a line to ``$E2E_LOG/<pid>.log`` (``begin``/``done``, the workload
id and the attempt) so that a test can tell which process ran what, and how many times.
"""

from __future__ import annotations

import os
import time
from typing import Any

from feltdb.worker import Context, Worker

worker = Worker(
    capabilities={"email:send"},
    concurrency=4,
    lease_ms=int(os.environ.get("E2E_LEASE_MS", "3000")),
    poll_wait_s=1.0,
)


def record(ctx: Context, what: str) -> None:
    path = os.path.join(os.environ["E2E_LOG"], f"{os.getpid()}.log")
    with open(path, "a", encoding="utf-8") as log:
        log.write(f"{what} {ctx.workload_id} {ctx.attempt}\n")
        log.flush()


@worker.handler("echo")
def echo(ctx: Context) -> dict[str, Any]:
    record(ctx, "done")
    return {"n": ctx.input["n"]}


@worker.handler("slow")
def slow(ctx: Context) -> dict[str, Any]:
    """Sleeps ``input["first"]`` seconds on a first attempt, ``input["later"]`` after."""
    record(ctx, "begin")
    seconds = ctx.input["first"] if ctx.attempt == 1 else ctx.input["later"]
    until = time.monotonic() + seconds
    while time.monotonic() < until:  # deliberately ignores ctx.cancelled: a stubborn handler
        time.sleep(0.05)
    record(ctx, "done")
    return {"slept": seconds}
