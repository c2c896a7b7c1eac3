"""``feltdb worker MODULE:OBJECT``: refusals of a bad target are usage errors (exit 2), and
a worker process on a store (``--db``, no server) runs submitted work and stops on SIGTERM.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.cli import invoke

from feltdb import WorkloadState, WorkloadStore

TASKS = """
from feltdb.worker import Worker

worker = Worker(capabilities={"email:send"}, poll_wait_s=0.5)
not_a_worker = 42

@worker.handler("send-email")
def send(ctx):
    return {"sent_to": ctx.input["to"]}
"""


@pytest.fixture
def tasks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "cli_tasks.py").write_text(TASKS)
    monkeypatch.chdir(tmp_path)  # the command imports from the working directory
    return tmp_path


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ("no-colon", "expected MODULE:OBJECT"),
        ("feltdb_no_such_module:worker", "cannot import 'feltdb_no_such_module'"),
        ("cli_tasks:missing", "cli_tasks:missing is missing, not a feltdb.worker.Worker"),
        ("cli_tasks:not_a_worker", "is an instance of int, not a feltdb.worker.Worker"),
    ],
)
def test_a_bad_target_is_a_usage_error(tasks: Path, target: str, message: str) -> None:
    result = invoke("worker", target, "--db", str(tasks / "w.db"))
    assert result.exit_code == 2, result.output
    assert message in " ".join(result.output.split())


def test_a_worker_without_an_authority_is_a_usage_error(tasks: Path) -> None:
    result = invoke("worker", "cli_tasks:worker", env={"FELTDB_URL": "", "FELTDB_TOKEN": ""})
    assert result.exit_code == 2, result.output
    assert "no authority to work for" in result.output


@pytest.mark.multiprocess
def test_a_worker_process_on_a_store_runs_submitted_work_and_stops_on_sigterm(
    tasks: Path,
) -> None:
    store_path = tasks / "w.db"
    submitted = invoke(
        "submit",
        "send-email",
        "--input",
        '{"to": "ada@example.com"}',
        "--capability",
        "email:send",
        "--db",
        str(store_path),
        "--json",
    )
    assert submitted.exit_code == 0, submitted.output
    workload_id = json.loads(submitted.stdout)["workload"]["workload_id"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("FELTDB_")}
    log = tasks / "worker.log"
    with log.open("wb") as output:
        worker = subprocess.Popen(
            [sys.executable, "-c", "from feltdb.cli import main; main()", "worker",
             "cli_tasks:worker", "--db", str(store_path)],
            stdout=output, stderr=subprocess.STDOUT, env=env, cwd=tasks,
        )  # fmt: skip
    try:
        with WorkloadStore.open(store_path) as store:
            deadline = time.monotonic() + 30
            while store.get(workload_id).state is not WorkloadState.SUCCEEDED:
                assert worker.poll() is None, log.read_text()
                assert time.monotonic() < deadline, log.read_text()
                time.sleep(0.1)
            done = store.get(workload_id)
        assert done.result is not None and done.result.output == {"sent_to": "ada@example.com"}
        worker.send_signal(signal.SIGTERM)
        assert worker.wait(timeout=20) == 0, log.read_text()
        assert "SIGTERM" in log.read_text()
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait(timeout=10)


@pytest.mark.parametrize("command", [["serve"], ["worker", "cli_tasks:worker"]])
def test_an_unknown_log_level_is_a_usage_error(tasks: Path, command: list[str]) -> None:
    result = invoke(*command, "--log-level", "loud", "--db", str(tasks / "w.db"))
    assert result.exit_code == 2, result.output
    assert "'loud' is not one of" in " ".join(result.output.split())
    assert not (tasks / "w.db").exists()  # refused before anything started
