"""End to end with real processes: a ``feltdb serve``, ``feltdb worker`` processes running
``e2e_tasks.py``, and the ``feltdb`` command line, all talking HTTP on loopback.

Each test works in an application of its own, with its own worker processes (their tokens
are for that application), so tests sharing the server never see each other's work.
Every wait is bounded; worker processes are killed at teardown even when a test failed.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from support.server import Server, serve

from feltdb import Subject
from feltdb.auth.policy import CLAIM
from feltdb.client import Client
from feltdb.records.workload import Workload
from feltdb.work.states import AttemptStatus, WorkloadState

pytestmark = pytest.mark.multiprocess

TASKS = Path(__file__).parent
WAIT_S = 60.0
"""The longest any scenario waits for work to settle."""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    # Lost leases are recovered promptly.
    yield from serve(tmp_path_factory.mktemp("e2e"), None, "--maintenance-interval", "0.2")


@pytest.fixture(scope="module")
def pg_server(pg_databases: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """The same, serving a fresh PostgreSQL database (marked ``postgres``)."""
    database = pg_databases.create("e2e")
    try:
        yield from serve(
            tmp_path_factory.mktemp("e2e-pg"),
            pg_databases.url_of(database),
            "--maintenance-interval",
            "0.2",
            backend="postgres",
        )
    finally:
        pg_databases.drop(database)


class Workers:
    """The ``feltdb worker`` processes of one test, and the log their handlers write."""

    def __init__(self, server: Server, application: str, home: Path) -> None:
        self.server = server
        self.application = application
        self.home = home
        self.records = home / "records"
        self.records.mkdir()
        self.processes: dict[str, subprocess.Popen[bytes]] = {}

    def start(self, name: str, *extra: str) -> subprocess.Popen[bytes]:
        """Start ``feltdb worker e2e_tasks:worker`` as worker ``name``; returns once it
        has logged that it is running.
        """
        token = self.server.token(
            self.application, subject=Subject.worker(name), capabilities={CLAIM, "email:send"}
        )
        env = {k: v for k, v in os.environ.items() if not k.startswith("FELTDB_")}
        env.update(
            PYTHONPATH=os.pathsep.join([str(TASKS), env.get("PYTHONPATH", "")]),
            E2E_LOG=str(self.records),
            FELTDB_URL=self.server.url,
            FELTDB_TOKEN=token,
        )
        log = self.home / f"{name}.log"
        with log.open("wb") as output:
            process = subprocess.Popen(
                [*feltdb(), "worker", "e2e_tasks:worker", *extra],
                stdout=output,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=self.home,
            )
        self.processes[name] = process
        wait_for(
            lambda: f"worker worker:{name}:" in log.read_text(), f"worker {name} to start", log
        )
        return process

    def log(self, name: str) -> str:
        return (self.home / f"{name}.log").read_text()

    def records_by_process(self) -> dict[int, list[tuple[str, str, int]]]:
        """Each worker process's handler records: (what, workload id, attempt)."""
        found: dict[int, list[tuple[str, str, int]]] = {}
        for path in self.records.glob("*.log"):
            lines = [line.split() for line in path.read_text().splitlines()]
            found[int(path.stem)] = [(what, wid, int(n)) for what, wid, n in lines]
        return found

    def began(self, workload_id: str) -> bool:
        return any(
            what == "begin" and wid == workload_id
            for records in self.records_by_process().values()
            for what, wid, _ in records
        )

    def close(self) -> None:
        for process in self.processes.values():
            if process.poll() is None:
                process.kill()
            process.wait(timeout=10)


@pytest.fixture
def app() -> str:
    return f"e2e-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def workers(server: Server, app: str, tmp_path: Path) -> Iterator[Workers]:
    running = Workers(server, app, tmp_path)
    try:
        yield running
    finally:
        running.close()


@pytest.fixture
def operator(server: Server, app: str) -> Iterator[Client]:
    with Client(server.url, server.token(app, subject=Subject.human("ops"))) as client:
        yield client


def feltdb() -> list[str]:
    """The ``feltdb`` command, with this interpreter."""
    return [sys.executable, "-c", "from feltdb.cli import main; main()"]


def cli(
    server: Server, app: str, *args: str, subject: str = "ops"
) -> subprocess.CompletedProcess[str]:
    """Run ``feltdb ARGS`` against the server as human ``subject`` of ``app``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("FELTDB_")}
    env.update(
        FELTDB_URL=server.url,
        FELTDB_TOKEN=server.token(app, subject=Subject.human(subject)),
        COLUMNS="200",
    )
    return subprocess.run(
        [*feltdb(), *args], capture_output=True, text=True, env=env, timeout=60, check=False
    )


def wait_for(condition: Callable[[], bool], what: str, log: Path | None = None) -> None:
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.1)
    detail = f"\n{log.read_text()}" if log is not None and log.exists() else ""
    pytest.fail(f"timed out waiting for {what}{detail}")


def submit(client: Client, definition: str, input: Any, key: str | None = None) -> Workload:
    workload, _ = client.admit(
        environment="production",
        definition_id=definition,
        definition_revision="1",
        trigger="e2e",
        input=input,
        capability_snapshot={"email:send"},
        idempotency_key=key or uuid.uuid4().hex,
    )
    return workload


def in_state(client: Client, workload_id: str, *states: WorkloadState) -> Callable[[], bool]:
    return lambda: client.get(workload_id).state in states


def test_two_workers_run_200_workloads_each_exactly_once(
    server: Server, app: str, workers: Workers, operator: Client
) -> None:
    two_workers_run_200_workloads(server, app, workers, operator)


def test_two_workers_run_200_workloads_each_exactly_once_on_postgresql(
    pg_server: Server, app: str, tmp_path: Path
) -> None:
    workers = Workers(pg_server, app, tmp_path)
    token = pg_server.token(app, subject=Subject.human("ops"))
    try:
        with Client(pg_server.url, token) as operator:
            two_workers_run_200_workloads(pg_server, app, workers, operator)
    finally:
        workers.close()


def two_workers_run_200_workloads(
    server: Server, app: str, workers: Workers, operator: Client
) -> None:
    """Two worker processes drain 200 workloads: each succeeds, its handler ran once."""
    workers.start("w1")
    workers.start("w2")
    submitted = {submit(operator, "echo", {"n": n}).workload_id: n for n in range(200)}

    def all_succeeded() -> bool:
        done = 0
        cursor: str | None = None
        while True:
            page = operator.list(state=WorkloadState.SUCCEEDED, limit=200, cursor=cursor)
            done += len(page.items)
            if page.next_cursor is None:
                return done == len(submitted)
            cursor = page.next_cursor

    wait_for(all_succeeded, "200 workloads to succeed")
    for workload_id, n in submitted.items():
        workload = operator.get(workload_id)
        assert workload.state is WorkloadState.SUCCEEDED
        assert workload.result is not None and workload.result.output == {"n": n}
        assert len(workload.attempts) == 1, workload.attempts
    runs = Counter(
        wid
        for records in workers.records_by_process().values()
        for what, wid, _ in records
        if what == "done"
    )
    assert set(runs) == set(submitted)
    assert set(runs.values()) == {1}  # every handler ran exactly once
    # Both processes took part (each claims while the other runs).
    by_worker = Counter(operator.get(wid).attempts[0].worker_id for wid in submitted)
    assert set(by_worker) == {"worker:w1", "worker:w2"}, by_worker
    # The CLI sees the same: 200 succeeded, as JSON for scripts.
    listed = cli(server, app, "ls", "--state", "SUCCEEDED", "--limit", "500", "--json")
    assert listed.returncode == 0, listed.stderr
    assert len(json.loads(listed.stdout)) == 200


def test_work_of_a_killed_worker_is_recovered_and_completed_by_the_other(
    server: Server, app: str, workers: Workers, operator: Client
) -> None:
    doomed = workers.start("w1")
    slow = submit(operator, "slow", {"first": 60, "later": 0.2})
    wait_for(lambda: workers.began(slow.workload_id), "w1 to begin the slow handler")
    workers.start("w2")
    doomed.send_signal(signal.SIGKILL)  # mid-handler: no report, no goodbye
    doomed.wait(timeout=10)

    wait_for(in_state(operator, slow.workload_id, WorkloadState.SUCCEEDED), "recovery by w2")
    workload = operator.get(slow.workload_id)
    assert [a.worker_id for a in workload.attempts] == ["worker:w1", "worker:w2"]
    assert workload.attempts[0].status is AttemptStatus.WORKER_LOST
    assert workload.attempts[1].status is AttemptStatus.SUCCEEDED
    assert workload.result is not None and workload.result.output == {"slept": 0.2}
    recovered = [e for e in workload.execution_history if e.to is WorkloadState.RECOVERING]
    assert recovered and recovered[0].evidence["worker_id"] == "worker:w1"


def test_an_approval_through_the_cli_releases_held_work_and_show_renders_its_timeline(
    server: Server, app: str, workers: Workers, operator: Client
) -> None:
    workers.start("w1")
    submitted = cli(
        server,
        app,
        "submit",
        "echo",
        "--input",
        '{"n": 7}',
        "--capability",
        "email:send",
        "--approval",
        "--approver",
        "human:ops",
        "--json",
        subject="ada",  # a requester may not approve its own work
    )
    assert submitted.returncode == 0, submitted.stderr
    workload_id = json.loads(submitted.stdout)["workload"]["workload_id"]
    time.sleep(1.0)  # the worker is polling: held work must not be claimed meanwhile
    assert operator.get(workload_id).state is WorkloadState.AWAITING_APPROVAL

    inbox = cli(server, app, "inbox", "--json")
    assert inbox.returncode == 0, inbox.stderr
    assert [w["workload_id"] for w in json.loads(inbox.stdout)] == [workload_id]

    approved = cli(server, app, "approve", workload_id, "--reason", "looks right")
    assert approved.returncode == 0, approved.stderr
    wait_for(in_state(operator, workload_id, WorkloadState.SUCCEEDED), "the approved work to run")

    shown = cli(server, app, "show", workload_id)
    assert shown.returncode == 0, shown.stderr
    timeline = shown.stdout
    for state in ("AWAITING_APPROVAL", "READY", "CLAIMED", "RUNNING", "SUCCEEDED"):
        assert state in timeline, timeline
    assert "ops" in timeline  # who approved
    assert timeline.index("AWAITING_APPROVAL") < timeline.rindex("SUCCEEDED")


def test_sigterm_lets_a_running_handler_finish_then_exits(
    server: Server, app: str, workers: Workers, operator: Client
) -> None:
    worker = workers.start("w1", "--grace-period", "20")
    slow = submit(operator, "slow", {"first": 4, "later": 4})
    wait_for(lambda: workers.began(slow.workload_id), "the handler to begin")
    worker.send_signal(signal.SIGTERM)
    wait_for(lambda: "SIGTERM: no more claims" in workers.log("w1"), "the signal to be handled")
    time.sleep(1.5)  # longer than a long-poll (poll_wait_s=1) that was in flight at the signal
    assert worker.poll() is None  # still finishing its handler, with slots free to claim
    later = submit(operator, "echo", {"n": 1})
    assert worker.wait(timeout=30) == 0, workers.log("w1")
    workload = operator.get(slow.workload_id)
    assert workload.state is WorkloadState.SUCCEEDED, workers.log("w1")
    assert workload.result is not None and workload.result.output == {"slept": 4}
    assert len(workload.attempts) == 1
    # Submitted while the worker was still running: it claimed nothing after the signal.
    assert operator.get(later.workload_id).state is WorkloadState.READY


def test_sigterm_reports_a_handler_still_running_after_the_grace_period(
    server: Server, app: str, workers: Workers, operator: Client
) -> None:
    worker = workers.start("w1", "--grace-period", "1")
    slow = submit(operator, "slow", {"first": 60, "later": 60})
    wait_for(lambda: workers.began(slow.workload_id), "the handler to begin")
    began = time.monotonic()
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(timeout=30) == 0, workers.log("w1")
    assert time.monotonic() - began < 15  # the grace period, not the handler, bounded it
    workload = operator.get(slow.workload_id)
    failed = [e for e in workload.execution_history if e.to is WorkloadState.FAILED]
    assert len(failed) == 1, workload.execution_history
    assert failed[0].evidence["failure_kind"] == "worker_failure"
    assert failed[0].evidence["effect"] == "unknown"
    assert workload.attempts[0].status is AttemptStatus.FAILED
    # The default policy retries a worker failure: the work waits for another worker.
    assert workload.state is WorkloadState.READY
