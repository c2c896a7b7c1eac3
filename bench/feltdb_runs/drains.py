"""The driver's side of feltdb's drains: prepare a target, load it, run a fleet, verify.

Systems: ``feltdb-store`` (the library loop), ``feltdb-batches`` (the library's batch calls),
``feltdb-worker`` (the embedded worker runtime), ``feltdb-http`` (worker runtime processes
against a ``feltdb serve`` process).
"""

from __future__ import annotations

import contextlib
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path
from typing import Any

import httpx
from harness import pg
from harness.fleet import run_fleet
from harness.scratch import SCRATCH_PREFIX
from support.server import WORK_CAPABILITY, serve

from feltdb import Subject
from feltdb.auth.policy import CLAIM
from feltdb_runs import backlog

BENCH = Path(__file__).resolve().parents[1]
ROOT = BENCH.parent
MODES = {
    "feltdb-store": "store",
    "feltdb-batches": "batches",
    "feltdb-worker": "worker",
    "feltdb-http": "http",
}
SERVER_ARGS = ("--log-level", "warning")


def child_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FELTDB_")}
    env["PYTHONPATH"] = os.pathsep.join([str(BENCH), str(ROOT / "tests"), str(ROOT / "src")])
    return env


@contextlib.contextmanager
def target_for(backend: str, label: str, under: Path = BENCH) -> Iterator[tuple[str, Path]]:
    """A fresh store location (SQLite file or PostgreSQL database) and a scratch folder,
    made under ``under`` (by default bench/, on the disk the checkout is on).
    """
    with tempfile.TemporaryDirectory(dir=under, prefix=SCRATCH_PREFIX) as scratch:
        home = Path(scratch)
        if backend == "sqlite":
            yield str(home / "work.db"), home
        else:
            admin = pg.admin_url()
            assert admin, "FELTDB_TEST_PG is not set"
            with pg.fresh_database(admin, label) as url:
                yield url, home


def healthz_ms(url: str, calls: int = 30) -> float:
    """The median round trip of ``GET /healthz`` on one kept-alive connection: the floor
    under every request of a drain over HTTP.
    """
    timings = []
    with httpx.Client() as client:
        client.get(f"{url}/healthz")
        for _ in range(calls):
            began = time.perf_counter()
            client.get(f"{url}/healthz")
            timings.append((time.perf_counter() - began) * 1000)
    return statistics.median(timings)


def drain(
    system: str,
    backend: str,
    procs: int,
    n: int,
    concurrency: int,
    worker_options: str,
    under: Path = BENCH,
) -> dict[str, Any]:
    """One drain of ``n`` workloads by ``procs`` processes of ``system``; a SQLite store
    is a file made under ``under`` (see :func:`target_for`).
    """
    mode = MODES[system]
    label = f"{system}_{procs}".replace("-", "_")
    with target_for(backend, label, under) as (target, home):
        backlog.load(target, n)
        base = [
            sys.executable,
            "-m",
            "feltdb_runs.drain_child",
            mode,
            "--concurrency",
            str(concurrency),
            "--worker-options",
            worker_options,
        ]
        env = child_env()
        if mode == "http":
            servers = serve(home, target, *SERVER_ARGS, backend=backend)
            server = next(servers)
            try:
                commands = [[*base, "--url", server.url, "--index", str(i)] for i in range(procs)]
                envs = [
                    {
                        **env,
                        "FELTDB_TOKEN": server.token(
                            "app",
                            subject=Subject.worker(f"bench-{i}"),
                            capabilities={CLAIM, WORK_CAPABILITY},
                        ),
                    }
                    for i in range(procs)
                ]
                floor_ms = healthz_ms(server.url)
                run = run_fleet(commands, env=envs, cwd=BENCH, watched=[server.process.pid])
            finally:
                servers.close()
        else:
            commands = [[*base, "--target", target, "--index", str(i)] for i in range(procs)]
            run = run_fleet(commands, env=env, cwd=BENCH)
        finished = backlog.succeeded(target)
    if finished != n or run.done != n:
        raise RuntimeError(f"{system} on {backend}: {finished} succeeded, {run.done} ran, of {n}")
    figures = asdict(run)
    options = run.per_process[0].get("worker_options")
    figures["worker_options"] = options
    if mode == "http":
        figures["healthz_ms"] = floor_ms
    return figures
