"""The `feltdb` command as a user runs it: a real subprocess on a real file."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

from feltdb import DURABLE_WORK_COLLECTION, WorkloadState, WorkloadStore

FELTDB = [sys.executable, "-c", "from feltdb.cli import main; main()"]


def feltdb(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*FELTDB, *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={"COLUMNS": "200", "PATH": "/usr/bin:/bin"},
    )


def test_the_demo_runs_every_workload_to_success_and_prints_each_transition(tmp_path: Path):
    store_file = tmp_path / "demo.sqlite3"
    run = feltdb("demo", "--db", str(store_file))
    assert run.returncode == 0, run.stderr
    for shown in (
        "READY → CLAIMED",
        "AWAITING_APPROVAL → READY",
        "RUNNING → FAILED",
        "CHECKPOINTED → RECOVERING",
        "nothing claimable",
    ):
        assert shown in run.stdout
    with WorkloadStore.open(store_file) as store:
        workloads = [store.get(row.key) for row in store.db.list_rows(DURABLE_WORK_COLLECTION)]
        assert len(workloads) == 5
        assert len({w.application_id for w in workloads}) == 1
        assert {w.state for w in workloads} == {WorkloadState.SUCCEEDED}
        recovered = next(w for w in workloads if w.definition_id == "resize-images")
        assert [a.status.value for a in recovered.attempts] == ["WORKER_LOST", "SUCCEEDED"]


def test_the_demo_prints_the_command_that_lists_its_work_and_that_command_does(tmp_path: Path):
    store_file = tmp_path / "demo.sqlite3"
    run = feltdb("demo", "--db", str(store_file))
    (line,) = [line for line in run.stdout.splitlines() if line.startswith("See this run")]
    command = shlex.split(line.split(": ", 1)[1])
    assert command[:2] == ["feltdb", "ls"]
    listed = feltdb(*command[1:], "--json")
    assert listed.returncode == 0, listed.stderr
    assert len(json.loads(listed.stdout)) == 5


def test_a_second_run_keeps_the_first_runs_work(tmp_path: Path):
    store_file = tmp_path / "demo.sqlite3"
    assert feltdb("demo", "--db", str(store_file)).returncode == 0
    second = feltdb("demo", "--db", str(store_file))
    assert second.returncode == 0, second.stderr
    assert "holds 10 workloads in all" in second.stdout


def test_a_store_that_cannot_be_opened_is_a_clear_error_not_a_traceback(tmp_path: Path):
    not_a_store = tmp_path / "notes.txt"
    not_a_store.write_text("hello")
    run = feltdb("demo", "--db", str(not_a_store))
    assert run.returncode == 1
    assert "WORKLOAD_STORAGE_FAILURE" in run.stderr and "not a SQLite database" in run.stderr
    assert "Traceback" not in run.stderr + run.stdout
    missing = feltdb("demo", "--db", str(tmp_path / "no" / "such" / "dir.db"))
    assert missing.returncode == 1 and "does not exist" in missing.stderr


def test_help_explains_the_command_and_bad_usage_exits_2():
    helped = feltdb("--help")
    assert helped.returncode == 0 and "durable workload authority" in helped.stdout
    assert "demo" in helped.stdout
    assert feltdb("demo", "--bogus").returncode == 2


def test_the_demo_never_writes_the_file_serve_uses(tmp_path: Path):
    # Issue 25: `feltdb demo` once wrote feltdb.sqlite3, which `feltdb serve` then served.
    run = subprocess.run(
        [*FELTDB, "demo"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        env={"COLUMNS": "200", "PATH": "/usr/bin:/bin"},
    )
    assert run.returncode == 0, run.stderr
    assert not (tmp_path / "feltdb.sqlite3").exists()
    assert (tmp_path / "feltdb-demo.sqlite3").exists()
    assert "--db feltdb-demo.sqlite3" in run.stdout
