"""Reading the audit (issue 25, point 7), each through a real ``feltdb`` process at 80
columns: a line names the operation and who acted as ``KIND:ID`` (an admission its
requester), ``--workload`` keeps one workload's transactions, and a closed pipe ends a
command quietly.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import time
from pathlib import Path

import pytest
from test_newcomer import FELTDB, default_snapshot, feltdb, submit

from feltdb import Subject, WorkloadStore
from feltdb.auth.policy import worker_name

PIPE_CLOSED = 141
"""What ``feltdb`` exits with when its stdout's reader went away: 128 + SIGPIPE."""


def audit_lines(db: str, *args: str) -> list[list[str]]:
    """``feltdb audit`` of the store at ``db``, each line split into its fields."""
    run = feltdb("audit", *args, "--db", db, columns=80)
    assert run.returncode == 0, run.stderr
    return [line.split("\t") for line in run.stdout.splitlines()]


def test_a_heartbeat_is_named_and_credited_to_the_worker_holding_the_claim(tmp_path: Path):
    db = str(tmp_path / "work.db")
    work = submit(["--db", db, "--as", "service:billing-api"], "send")["workload_id"]
    worker = worker_name(Subject.worker("w1"))  # the name the authority records for it
    with WorkloadStore.open(db) as store:  # the setup only: the reading is the CLI's
        claim = store.claim(work, worker, set())
        store.start(work, claim.claim_id, worker, claim.fencing_token)
    # An operator's request comes between: the heartbeat adds no event of its own.
    cancelled = feltdb("cancel", work, "--db", db, "--as", "human:ops")
    assert cancelled.returncode == 0, cancelled.stderr
    with WorkloadStore.open(db) as store:
        store.heartbeat(work, claim.claim_id, worker, claim.fencing_token)

    lines = audit_lines(db)
    beats = [fields for fields in lines if fields[3].startswith("heartbeat")]
    assert len(beats) == 1, lines
    (_, _, who, what, workload) = beats[0]
    assert (who, what, workload) == ("worker:w1", "heartbeat → CANCELLATION_REQUESTED", work)
    assert [fields[2:4] for fields in lines] == [
        ["service:billing-api", "admit → READY"],
        ["worker:w1", "claim → CLAIMED"],
        ["worker:w1", "start → RUNNING"],
        ["human:ops", "cancel → CANCELLATION_REQUESTED"],
        ["worker:w1", "heartbeat → CANCELLATION_REQUESTED"],
    ]


def test_a_failure_is_credited_to_the_worker_that_reported_it(tmp_path: Path):
    # Its last event is the retry policy's decision (feltdb.retry); the worker reported it.
    db = str(tmp_path / "work.db")
    work = submit(["--db", db], "send", "--max-attempts", "1")["workload_id"]
    worker = worker_name(Subject.worker("w1"))
    with WorkloadStore.open(db) as store:
        claim = store.claim(work, worker, set())
        store.start(work, claim.claim_id, worker, claim.fencing_token)
        store.fail(work, claim.claim_id, worker, claim.fencing_token, "permanent", "no")
    failed = [fields for fields in audit_lines(db) if fields[3].startswith("fail")]
    assert [fields[2:4] for fields in failed] == [["worker:w1", "fail → DEAD_LETTER"]]


def test_an_admission_is_credited_to_its_requester_by_kind_and_id(tmp_path: Path):
    db = str(tmp_path / "work.db")
    by_service = submit(["--db", db, "--as", "service:ada"], "send")["workload_id"]
    by_human = submit(["--db", db, "--as", "human:ada"], "send")["workload_id"]
    credited = {fields[4]: (fields[2], fields[3]) for fields in audit_lines(db)}
    assert credited == {
        by_service: ("service:ada", "admit → READY"),
        by_human: ("human:ada", "admit → READY"),
    }


def test_audit_workload_shows_only_the_transactions_of_that_workload(tmp_path: Path):
    db = str(tmp_path / "work.db")
    target = ["--db", db, "--as", "service:api"]
    one = submit(target, "send")["workload_id"]
    other = submit(target, "send")["workload_id"]
    assert feltdb("cancel", one, "--db", db).returncode == 0
    assert feltdb("cancel", other, "--db", db).returncode == 0

    lines = audit_lines(db, "--workload", one)
    assert [(fields[3], fields[4]) for fields in lines] == [
        ("admit → READY", one),
        ("cancel → CANCELLED", one),
    ]
    run = feltdb("audit", "--workload", other, "--json", "--db", db)
    assert [json.loads(line)["work_id"] for line in run.stdout.splitlines()] == [other, other]
    assert audit_lines(db, "--workload", "workload_of_nobody") == []
    help_text = " ".join(feltdb("audit", "--help", columns=80).stdout.split())
    assert "--workload ID Only the transactions that touched workload ID" in help_text
    assert "every transaction after --since" in help_text


def wait_for(path: Path, text: str, process: subprocess.Popen[bytes]) -> str:
    deadline = time.monotonic() + 20
    while text not in path.read_text():
        assert time.monotonic() < deadline, f"{text!r} never appeared in {path.read_text()}"
        assert process.poll() is None, path.read_text()
        time.sleep(0.05)
    return path.read_text()


@pytest.mark.multiprocess  # a second OS process reads the store while we write
def test_audit_workload_follow_prints_that_workloads_new_transactions_only(tmp_path: Path):
    db = str(tmp_path / "work.db")
    target = ["--db", db, "--as", "service:api"]
    one, other = (submit(target, "send")["workload_id"] for _ in range(2))
    out = tmp_path / "follow.out"
    env = {k: v for k, v in os.environ.items() if not k.startswith("FELTDB_")}
    with out.open("wb") as stdout:
        follower = subprocess.Popen(
            [*FELTDB, "audit", "--follow", "--interval", "0.1", "--workload", one, "--db", db],
            stdout=stdout,
            stderr=subprocess.DEVNULL,
            env={**env, "COLUMNS": "80"},
        )
    try:
        wait_for(out, "admit → READY", follower)
        assert feltdb("cancel", other, "--db", db).returncode == 0
        assert feltdb("cancel", one, "--db", db).returncode == 0
        followed = wait_for(out, "cancel → CANCELLED", follower)
    finally:
        follower.terminate()
        follower.wait(timeout=10)
    assert [line.split("\t")[4] for line in followed.splitlines()] == [one, one]


def test_audit_json_into_head_prints_one_line_and_nothing_on_stderr(tmp_path: Path):
    db = str(tmp_path / "work.db")
    with WorkloadStore.open(db) as store:  # more than a pipe holds: head leaves the rest
        from support.factories import make_request

        for n in range(200):
            store.create(
                make_request(
                    tenant_id="default",
                    application_id="default",
                    authorization_snapshot=default_snapshot(),
                    idempotency_key=f"k{n}",
                )
            )
    command = shlex.join([*FELTDB, "audit", "--json", "--db", db])
    env = {k: v for k, v in os.environ.items() if not k.startswith("FELTDB_")}
    for shell in (f"{command} | head -1", f"set -o pipefail; {command} | head -1"):
        run = subprocess.run(
            ["bash", "-c", shell], capture_output=True, text=True, timeout=60, env=env
        )
        (line,) = run.stdout.splitlines()
        assert json.loads(line)["commit_revision"] == 1
        assert run.stderr == ""
    assert run.returncode == PIPE_CLOSED  # under pipefail: feltdb's own exit


@pytest.mark.parametrize(
    "command",
    [["audit"], ["audit", "--json"], ["audit", "verify"], ["ls"], ["show", "@"], ["--help"]],
    ids=" ".join,
)
def test_every_command_ends_quietly_when_its_output_has_no_reader(
    tmp_path: Path, command: list[str]
):
    db = str(tmp_path / "work.db")
    work = submit(["--db", db], "send")["workload_id"]
    args = [work if arg == "@" else arg for arg in command]
    if args != ["--help"]:
        args += ["--db", db]
    reader, writer = os.pipe()
    os.close(reader)  # gone before a byte is written: every write meets a broken pipe
    env = {k: v for k, v in os.environ.items() if not k.startswith("FELTDB_")}
    try:
        run = subprocess.run(
            [*FELTDB, *args],
            stdout=writer,
            stderr=subprocess.PIPE,
            text=True,
            timeout=60,
            env={**env, "COLUMNS": "80"},
        )
    finally:
        os.close(writer)
    assert (run.returncode, run.stderr) == (PIPE_CLOSED, "")
