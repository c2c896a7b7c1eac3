"""``feltdb worker --health-port``: a port in use is a usage error, and a worker process
answers ``/healthz`` 200 while it claims, then 503 while it drains after SIGTERM."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from support.cli import invoke
from support.deploy_files import healthz
from support.server import free_port

from feltdb import WorkloadState, WorkloadStore

TASKS = """
import pathlib, time
from feltdb.worker import Worker

worker = Worker(capabilities={"email:send"}, poll_wait_s=0.5)

@worker.handler("send-email")
def send(ctx):
    go = pathlib.Path("go")
    while not go.exists():  # held until the test lets it finish
        time.sleep(0.05)
    return {"sent_to": ctx.input["to"]}
"""


@pytest.fixture
def tasks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "health_tasks.py").write_text(TASKS)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_a_health_port_in_use_is_a_usage_error(tasks: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = invoke(
            "worker", "health_tasks:worker", "--db", str(tasks / "w.db"),
            "--health-port", str(port),
        )  # fmt: skip
    assert result.exit_code == 2, result.output
    assert f"--health-port: cannot listen on 127.0.0.1:{port}" in result.output
    assert "Traceback" not in result.output


@pytest.mark.parametrize("given", [["--unhealthy-after", "5.5"], ["FELTDB_UNHEALTHY_AFTER=2"]])
def test_an_unhealthy_bound_an_idle_claim_would_cross_is_a_usage_error(
    tasks: Path, given: list[str]
) -> None:
    # Its Worker long-polls 0.5 s; the bound must be longer than that and a 5 s margin (when
    # it is used: /healthz served, or under systemd). A process with a timeout: a bound
    # taken would run the worker until stopped.
    env = {k: v for k, v in os.environ.items() if not k.startswith("FELTDB_")}
    env.update(item.split("=", 1) for item in given if "=" in item)
    run = subprocess.run(
        [sys.executable, "-c", "from feltdb.cli import main; main()", "worker",
         "health_tasks:worker", "--db", str(tasks / "w.db"), "--health-port", "0",
         *(item for item in given if "=" not in item)],
        capture_output=True, text=True, env=env, cwd=tasks, timeout=60,
    )  # fmt: skip
    assert run.returncode == 2, (run.stdout, run.stderr)
    said = " ".join(run.stderr.split())
    assert "--unhealthy-after: an unhealthy bound of" in said and "is too short" in said
    assert "so give more than 5.5 s (the wait and a 5 s margin)" in said
    assert "Traceback" not in said


@pytest.mark.multiprocess
def test_a_worker_is_healthy_while_it_claims_and_not_while_it_drains(tasks: Path) -> None:
    store_path = tasks / "w.db"
    submitted = invoke(
        "submit", "send-email", "--input", '{"to": "ada@example.com"}',
        "--capability", "email:send", "--db", str(store_path), "--json",
    )  # fmt: skip
    assert submitted.exit_code == 0, submitted.output
    workload_id = json.loads(submitted.stdout)["workload"]["workload_id"]
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("FELTDB_")}
    env["FELTDB_HEALTH_PORT"] = str(port)  # as a unit's or an image's environment gives it
    log = tasks / "worker.log"
    with log.open("wb") as output:
        worker = subprocess.Popen(
            [sys.executable, "-c", "from feltdb.cli import main; main()", "worker",
             "health_tasks:worker", "--db", str(store_path)],
            stdout=output, stderr=subprocess.STDOUT, env=env, cwd=tasks,
        )  # fmt: skip

    def until(check: Callable[[], bool], what: str) -> None:
        deadline = time.monotonic() + 30
        while not check():
            assert worker.poll() is None and time.monotonic() < deadline, (what, log.read_text())
            time.sleep(0.05)

    try:
        with WorkloadStore.open(store_path) as store:
            until(lambda: store.get(workload_id).state is WorkloadState.RUNNING, "running")
            until(lambda: healthz(port) == (200, {"status": "ok"}), "healthy")
            worker.send_signal(signal.SIGTERM)  # its handler is held: it drains
            until(lambda: healthz(port)[0] == 503, "unhealthy while draining")
            assert healthz(port)[1] == {
                "status": "unavailable",
                "reason": "the worker is stopping: it claims no more work",
            }
            (tasks / "go").touch()
            assert worker.wait(timeout=30) == 0, log.read_text()
            assert store.get(workload_id).state is WorkloadState.SUCCEEDED
        assert healthz(port) == (0, {})  # gone with the worker
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait(timeout=10)
