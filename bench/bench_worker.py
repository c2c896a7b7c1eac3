"""Worker runtime throughput: workloads per second through ``feltdb.worker.Worker``.

Two set-ups, each draining a backlog of no-op handlers (the runtime's own cost: claim,
read, start, context, complete, and the heartbeat thread's bookkeeping):

- **embedded**: ``Worker(store=…)`` on a SQLite file, ``worker.drain()``, for
  concurrency 1 and 4;
- **http**: a real ``feltdb serve`` process on a SQLite file and one ``feltdb worker``
  process (concurrency 4), timed from the first submission until every workload
  succeeded.

Usage: python bench/bench_worker.py [--backlog 500]
Writes results/worker.json.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from support.factories import make_request
from support.server import serve

from feltdb import Subject, WorkloadStore
from feltdb.auth.policy import CLAIM
from feltdb.client import Client
from feltdb.work.states import WorkloadState
from feltdb.worker import Context, Worker

RESULTS = Path(__file__).parent / "results" / "worker.json"
WORKER_MODULE = """
from feltdb.worker import Worker
worker = Worker(capabilities={"email:send"}, concurrency=4, poll_wait_s=1.0)

@worker.handler("noop")
def noop(ctx):
    return {"ok": True}
"""


def embedded(backlog: int, concurrency: int) -> float:
    """Workloads per second drained by one embedded worker."""
    with tempfile.TemporaryDirectory() as home:
        store = WorkloadStore.open(Path(home) / "w.db")
        now = int(time.time())
        for i in range(backlog):
            store.admit(make_request(definition_id="noop", idempotency_key=f"k{i}", created_at=now))
        worker = Worker(
            store=store,
            tenant="t",
            application="app",
            capabilities={"email:send"},
            concurrency=concurrency,
        )

        @worker.handler("noop")
        def noop(ctx: Context) -> dict[str, bool]:
            return {"ok": True}

        began = time.perf_counter()
        ran = worker.drain()
        took = time.perf_counter() - began
        assert ran == backlog, ran
        assert store.count_by_state().get(WorkloadState.SUCCEEDED) == backlog
        store.close()
        return backlog / took


def over_http(backlog: int) -> float:
    """Workloads per second through a server and one worker process (concurrency 4)."""
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        (home / "bench_tasks.py").write_text(WORKER_MODULE)
        servers = serve(home)
        server = next(servers)
        try:
            token = server.token(
                "bench", subject=Subject.worker("w1"), capabilities={CLAIM, "email:send"}
            )
            env = {k: v for k, v in os.environ.items() if not k.startswith("FELTDB_")}
            env.update(FELTDB_URL=server.url, FELTDB_TOKEN=token, PYTHONPATH=str(home))
            command = [sys.executable, "-c", "from feltdb.cli import main; main()"]
            worker = subprocess.Popen(
                [*command, "worker", "bench_tasks:worker", "--log-level", "warning"],
                env=env,
                cwd=home,
            )
            with Client(server.url, server.token("bench", subject=Subject.human("b"))) as ops:
                time.sleep(2.0)  # the worker process starts and begins polling
                began = time.perf_counter()
                for i in range(backlog):
                    ops.admit(
                        environment="production",
                        definition_id="noop",
                        definition_revision="1",
                        trigger="bench",
                        input={"i": i},
                        capability_snapshot={"email:send"},
                        idempotency_key=f"k{i}",
                    )
                while True:
                    done = ops.list(state=WorkloadState.SUCCEEDED, limit=500)
                    if len(done.items) >= backlog:
                        break
                    time.sleep(0.05)
                took = time.perf_counter() - began
            worker.terminate()
            worker.wait(timeout=60)
        finally:
            servers.close()
        return backlog / took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backlog", type=int, default=500, help="workloads per run (<=500)")
    args = parser.parse_args()
    figures = {
        "backlog": args.backlog,
        "embedded_concurrency_1_per_s": round(embedded(args.backlog, 1), 1),
        "embedded_concurrency_4_per_s": round(embedded(args.backlog, 4), 1),
        "http_one_worker_process_concurrency_4_per_s": round(over_http(args.backlog), 1),
    }
    print(json.dumps(figures, indent=2))
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(figures, indent=2) + "\n")


if __name__ == "__main__":
    main()
