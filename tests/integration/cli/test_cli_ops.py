"""The operator commands (submit, ls, show, approve, reject, cancel, retry, inbox, dead,
audit, migrate-legacy), run for real: on a store file (``--db``) and against a real
``feltdb serve`` process (``--url``/``--token``); ``audit --follow`` as a real subprocess.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.cli import Mode, invoke
from support.server import Server, free_port

from feltdb import WorkloadState, WorkloadStore

FELTDB = [sys.executable, "-c", "from feltdb.cli import main; main()"]


def shown(mode: Mode, workload_id: str) -> dict:
    return json.loads(mode.ok("show", workload_id, "--json").stdout)


# ------------------------------------------------------------------ submit, ls, show


def test_submit_then_ls_shows_it_and_a_repeated_key_replays(mode: Mode):
    first = mode.ok("submit", "send", "--input", '{"to": "ada"}', "--key", "k1", who="requester")
    assert "submitted workload_" in first.stdout and "READY" in first.stdout
    workload_id = first.stdout.split()[1]
    again = mode.ok("submit", "send", "--input", '{"to": "ada"}', "--key", "k1", who="requester")
    assert again.stdout.startswith("already submitted") and workload_id in again.stdout

    listed = mode.ok("ls")
    assert workload_id in listed.stdout
    assert "send@1" in listed.stdout and "READY" in listed.stdout
    as_json = json.loads(mode.ok("ls", "--json").stdout)
    assert [w["workload_id"] for w in as_json] == [workload_id]
    # A list shows summaries: the input's start, never the input itself.
    assert as_json[0]["input_preview"] == '{"to":"ada"}' and "input" not in as_json[0]
    assert as_json[0]["input_chars"] == len('{"to":"ada"}')


def test_submit_takes_every_option(mode: Mode, tmp_path: Path):
    (tmp_path / "input.json").write_text('{"n": 7}')
    before = int(time.time())
    workload_id = mode.submit(
        "report", "--input", f"@{tmp_path / 'input.json'}", "--priority", "5",
        "--not-before", "+5m", "--capability", "email:send", "--environment", "staging",
        "--revision", "r9", "--trigger", "nightly", "--max-attempts", "4", "--backoff", "fixed",
        "--retry-on", "timeout", "--initial-delay-ms", "10", "--queue-timeout-ms", "60000",
        "--execution-timeout-ms", "5000", "--heartbeat-timeout-ms", "2000",
        "--approver", "human:ada", "--approval-timeout-ms", "90000",
    )  # fmt: skip
    w = shown(mode, workload_id)
    assert w["input"] == {"n": 7}
    assert (w["priority"], w["environment"], w["definition_revision"], w["trigger"]) == (
        5, "staging", "r9", "nightly",
    )  # fmt: skip
    assert w["capability_snapshot"] == ["email:send"]
    assert w["retry_policy"]["max_attempts"] == 4
    assert w["retry_policy"]["backoff"] == "fixed"
    assert w["retry_policy"]["retry_on"] == ["timeout"]
    assert w["timeouts"]["queue_ms"] == 60000
    assert w["timeouts"]["execution_ms"] == 5000
    assert w["timeouts"]["heartbeat_ms"] == 2000
    assert w["timeouts"]["approval_ms"] == 90000
    assert w["approval"]["policy"]["approvers"] == [{"kind": "human", "id": "ada"}]
    assert w["state"] == "AWAITING_APPROVAL"
    assert before + 300 <= w["next_attempt_at"] <= int(time.time()) + 300


def test_ls_filters_by_state_and_definition_and_limits(mode: Mode):
    a = mode.submit("alpha", "--priority", "2")
    b = mode.submit("beta", "--priority", "1")
    held = mode.submit("alpha", "--approval")

    def ids(*args: str) -> list[str]:
        return [w["workload_id"] for w in json.loads(mode.ok("ls", "--json", *args).stdout)]

    assert ids() == [a, b, held]
    assert ids("--definition", "alpha") == [a, held]
    assert ids("--state", "READY") == [a, b]
    assert ids("--state", "AWAITING_APPROVAL", "--definition", "alpha") == [held]
    assert ids("--limit", "2") == [a, b]
    assert ids("--definition", "gamma") == []
    assert "workloads: none" in mode.ok("ls", "--definition", "gamma").stdout


def test_show_renders_the_header_and_the_timeline(mode: Mode):
    workload_id = mode.submit("send", "--input", '{"to": "bob"}', "--approval")
    mode.ok("approve", workload_id, "--reason", "looks right")
    page = mode.ok("show", workload_id).stdout
    assert workload_id in page
    assert "timeline" in page
    assert "workload.awaiting_approval" in page and "workload.ready" in page
    assert "CREATED → AWAITING_APPROVAL" in page
    assert "AWAITING_APPROVAL → READY" in page
    assert f"approved by {mode.operator_subject}" in page
    assert "looks right" in page
    assert '{"to": "bob"}' in page
    assert shown(mode, workload_id)["workload_id"] == workload_id


def test_show_renders_attempts_after_a_failure(mode: Mode):
    workload_id = mode.submit("send")
    assert mode.kill(workload_id) is WorkloadState.DEAD_LETTER
    page = mode.ok("show", workload_id).stdout
    assert "attempts" in page and "FAILED" in page and "boom" in page
    assert "RUNNING → FAILED" in page and "DEAD_LETTER" in page


# ------------------------------------------------------------------ approvals


def test_approve_releases_held_work_and_the_inbox_empties(mode: Mode):
    held = mode.submit("send", "--approval")
    mode.submit("send")  # ready, never in the inbox
    inbox = mode.ok("inbox")
    assert held in inbox.stdout
    assert [w["workload_id"] for w in json.loads(mode.ok("inbox", "--json").stdout)] == [held]

    approved = mode.ok("approve", held)
    assert f"approved {held}" in approved.stdout and "READY" in approved.stdout
    assert shown(mode, held)["state"] == "READY"
    assert json.loads(mode.ok("inbox", "--json").stdout) == []
    assert "awaiting approval: none" in mode.ok("inbox").stdout


def test_reject_needs_a_reason_and_rejects(mode: Mode):
    held = mode.submit("send", "--approval")
    missing = mode.run("reject", held)
    assert missing.exit_code == 2
    assert "--reason" in missing.stderr
    assert shown(mode, held)["state"] == "AWAITING_APPROVAL"

    rejected = mode.ok("reject", held, "--reason", "not today")
    assert "REJECTED" in rejected.stdout
    w = shown(mode, held)
    assert w["state"] == "REJECTED"
    assert w["approval"]["decision"]["reason"] == "not today"


def test_the_requester_cannot_approve_its_own_work(mode: Mode):
    held = mode.submit("send", "--approval")
    refused = mode.run("approve", held, who="requester")
    assert refused.exit_code == 1
    assert "error WORKLOAD_APPROVER_NOT_PERMITTED" in refused.stderr
    assert refused.stdout == ""


# ------------------------------------------------------------------ operating


def test_cancel_cancels_ready_work(mode: Mode):
    workload_id = mode.submit("send")
    assert f"cancel {workload_id}: CANCELLED" in mode.ok("cancel", workload_id).stdout
    assert shown(mode, workload_id)["state"] == "CANCELLED"
    again = mode.run("cancel", workload_id)
    assert again.exit_code == 1
    assert "error WORKLOAD_TRANSITION_DENIED" in again.stderr


def test_dead_lists_dead_letters_and_retry_re_arms_them(mode: Mode):
    workload_id = mode.submit("send")
    mode.submit("other")
    assert mode.kill(workload_id) is WorkloadState.DEAD_LETTER
    assert workload_id in mode.ok("dead").stdout
    assert [w["workload_id"] for w in json.loads(mode.ok("dead", "--json").stdout)] == [workload_id]

    retried = mode.ok("retry", workload_id, "--reason", "fixed the mail server")
    assert f"retry {workload_id}: READY" in retried.stdout
    w = shown(mode, workload_id)
    assert w["state"] == "READY"
    assert "fixed the mail server" in json.dumps(w["execution_history"][-1])
    assert json.loads(mode.ok("dead", "--json").stdout) == []
    assert "dead letters: none" in mode.ok("dead").stdout


# ------------------------------------------------------------------ audit


def test_audit_prints_transactions_after_a_revision(mode: Mode):
    first = mode.submit("send")
    lines = [json.loads(line) for line in mode.ok("audit", "--json").stdout.splitlines()]
    assert [t["work_id"] for t in lines] == [first]
    revision = lines[-1]["commit_revision"]

    second = mode.submit("send", "--approval")
    mode.ok("approve", second)
    after = mode.ok("audit", "--since", str(revision)).stdout.splitlines()
    assert len(after) == 2
    assert all(second in line for line in after)
    assert first not in "\n".join(after)
    assert "AWAITING_APPROVAL" in after[0] and "READY" in after[1]
    assert int(after[0].split("\t")[0]) > revision
    everything = mode.ok("audit").stdout
    assert first in everything and second in everything


def _wait_for(path: Path, text: str, process: subprocess.Popen[bytes]) -> str:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        output = path.read_text()
        if text in output:
            return output
        assert process.poll() is None, output
        time.sleep(0.05)
    raise AssertionError(f"{text!r} never appeared in:\n{path.read_text()}")


@pytest.mark.multiprocess  # a second OS process reads the store (or server) while we write
def test_audit_follow_prints_what_commits_after_it_started_and_ctrl_c_ends_it(
    mode: Mode, tmp_path: Path
):
    before = mode.submit("send")
    out, err = tmp_path / "follow.out", tmp_path / "follow.err"
    with out.open("wb") as stdout, err.open("wb") as stderr:
        follower = subprocess.Popen(
            [*FELTDB, "audit", "--follow", "--interval", "0.1", *mode.operator],
            stdout=stdout,
            stderr=stderr,
            env={"COLUMNS": "200", "PATH": "/usr/bin:/bin"},
        )
    try:
        _wait_for(out, before, follower)  # it is running and has read the log once
        after = mode.submit("send")
        output = _wait_for(out, after, follower)
        assert output.index(before) < output.index(after)
        follower.send_signal(signal.SIGINT)
        assert follower.wait(timeout=10) == 0, err.read_text()
        assert "Traceback" not in err.read_text()
    finally:
        if follower.poll() is None:
            follower.kill()
            follower.wait()


# ------------------------------------------------------------------ errors and usage


def test_a_refusal_exits_1_with_its_code_on_stderr(mode: Mode):
    result = mode.run("show", "workload_nope")
    assert result.exit_code == 1
    assert result.stderr.startswith("error WORKLOAD_NOT_FOUND:")
    assert result.stdout == ""
    assert isinstance(result.exception, SystemExit)  # an exit, not an escaped error


@pytest.mark.parametrize(
    "args",
    [
        pytest.param(["submit", "send", "--input", "{not json"], id="bad-json"),
        pytest.param(["submit", "send", "--input", "@/no/such/file.json"], id="no-input-file"),
        pytest.param(["submit", "send", "--not-before", "soon"], id="bad-not-before"),
        pytest.param(["submit", "send", "--approver", "nobody"], id="bad-approver"),
        pytest.param(["ls", "--state", "SLEEPING"], id="unknown-state"),
        pytest.param(["ls", "--limit", "0"], id="zero-limit"),
    ],
)
def test_bad_options_are_usage_errors(mode: Mode, args: list[str]):
    result = mode.run(*args)
    assert result.exit_code == 2, (result.output, result.stderr)
    assert result.stdout == ""


def test_a_read_of_a_store_that_does_not_exist_is_a_usage_error_and_creates_nothing(
    tmp_path: Path,
):
    missing = tmp_path / "typo.db"
    for args in (["ls"], ["show", "x"], ["inbox"], ["audit"], ["cancel", "x"]):
        result = invoke(*args, "--db", str(missing))
        assert result.exit_code == 2, result.output
        assert f"no store at {missing}" in " ".join(result.stderr.split())
    assert list(tmp_path.iterdir()) == []  # neither a store nor a keyring
    made = invoke("submit", "send", "--db", f"sqlite:///{missing}")  # submit creates it
    assert made.exit_code == 0, made.stderr
    assert missing.exists()
    assert invoke("ls", "--db", str(missing)).exit_code == 0


def test_no_target_is_a_usage_error():
    for args in (["ls"], ["show", "x"], ["submit", "send"], ["audit"]):
        result = invoke(*args)
        assert result.exit_code == 2
        assert "give --url and --token, or --db" in result.stderr
    no_token = invoke("ls", "--url", "http://127.0.0.1:1")
    assert no_token.exit_code == 2
    assert "--token" in no_token.stderr


def test_the_target_may_come_from_the_environment(server: Server, tmp_path: Path):
    token = server.token("env-app")
    env = {"FELTDB_URL": server.url, "FELTDB_TOKEN": token}
    made = invoke("submit", "send", env=env)
    assert made.exit_code == 0, made.stderr
    assert made.stdout.split()[1] in invoke("ls", env=env).stdout
    # --db wins over a server named by the environment.
    WorkloadStore.open(tmp_path / "w.db").close()
    local = invoke("ls", "--json", "--db", str(tmp_path / "w.db"), env=env)
    assert local.exit_code == 0, local.stderr
    assert json.loads(local.stdout) == []


def test_db_mode_acts_in_the_tenant_and_application_it_is_given(tmp_path: Path):
    db = str(tmp_path / "work.db")
    made = invoke("submit", "send", "--db", db, "--tenant", "acme", "--application", "billing")
    assert made.exit_code == 0, made.stderr
    workload_id = made.stdout.split()[1]
    with WorkloadStore.open(db) as store:
        w = store.get(workload_id)
    assert (w.tenant_id, w.application_id) == ("acme", "billing")
    assert w.authorization_snapshot.grant.application_id == "billing"
    # Another application's work is not found, as a server answers it.
    elsewhere = invoke("show", workload_id, "--db", db)
    assert elsewhere.exit_code == 1
    assert "WORKLOAD_NOT_FOUND" in elsewhere.stderr
    env = {"FELTDB_TENANT": "acme", "FELTDB_APPLICATION": "billing"}
    assert invoke("show", workload_id, "--db", db, env=env).exit_code == 0
    assert (tmp_path / "feltdb-keyring.json").exists()


def test_an_unreachable_server_is_a_refusal_not_a_traceback():
    result = invoke("ls", "--url", f"http://127.0.0.1:{free_port()}", "--token", "t")
    assert result.exit_code == 1
    assert "error: cannot reach the feltdb server at http://127.0.0.1:" in result.stderr
    assert "Traceback" not in result.stderr


# ------------------------------------------------------------------ migrate-legacy


def legacy_file_of(store: WorkloadStore, tenant: str, application: str) -> dict:
    """What a pre-canonical release wrote for a store's work (as the conformance tests)."""
    workloads = store.list(tenant, application)
    return {
        "workloads": {w.workload_id: w.to_json() for w in workloads},
        "idempotency": {
            f"{w.tenant_id}:{w.application_id}:{w.idempotency_key}": w.workload_id
            for w in workloads
        },
        "result_ids": {w.result.result_id: w.workload_id for w in workloads if w.result},
        "event_sequence": max(
            (event.sequence for w in workloads for event in w.execution_history), default=0
        ),
    }


def test_migrate_legacy_imports_with_a_progress_bar_and_is_idempotent(tmp_path: Path):
    source = str(tmp_path / "source" / "work.db")
    ids = []
    for n in range(3):
        made = invoke("submit", "send", "--db", source, "--input", json.dumps({"n": n}))
        assert made.exit_code == 0, made.stderr
        ids.append(made.stdout.split()[1])
    with WorkloadStore.open(source) as store:
        legacy = legacy_file_of(store, "default", "default")
    legacy_path = tmp_path / "legacy.json"
    legacy_path.write_text(json.dumps(legacy))

    target = str(tmp_path / "target" / "work.db")
    (tmp_path / "target").mkdir()
    migrated = invoke("migrate-legacy", str(legacy_path), "--db", target)
    assert migrated.exit_code == 0, (migrated.stdout, migrated.stderr)
    assert "3/3" in migrated.stdout  # the progress bar, as it ended
    assert f"migrated 3 workloads from {legacy_path}" in migrated.stdout
    listed = json.loads(invoke("ls", "--json", "--db", target).stdout)
    assert sorted(w["workload_id"] for w in listed) == sorted(ids)

    again = invoke("migrate-legacy", str(legacy_path), "--db", target)
    assert again.exit_code == 0
    assert "migrated 0 workloads" in again.stdout and "(3 already there, skipped)" in again.stdout

    legacy["workloads"][ids[0]]["priority"] += 1
    legacy_path.write_text(json.dumps(legacy))
    conflict = invoke("migrate-legacy", str(legacy_path), "--db", target)
    assert conflict.exit_code == 1
    assert "error WORKLOAD_MIGRATION_CONFLICT" in conflict.stderr


def test_migrate_legacy_names_each_bad_record_on_a_line_and_writes_nothing(tmp_path: Path):
    legacy_path = tmp_path / "legacy.json"
    good = {"workload_id": "w"}  # far from a record: every field missing
    legacy_path.write_text(
        json.dumps({"workloads": {"a": good, "b": {**good, "priority": "high"}, "c": 7}})
    )
    target = str(tmp_path / "work.db")
    result = invoke("migrate-legacy", str(legacy_path), "--db", target)
    assert result.exit_code == 1
    lines = result.stderr.strip().splitlines()
    assert "3 legacy records are not workload records" in lines[0]
    assert [line.split(":")[0] for line in lines[1:]] == [
        "record 0 (a)",
        "record 1 (b)",
        "record 2 (c)",
    ]
    assert len(lines) == 4
    with WorkloadStore.open(target) as store:
        assert store.list("default", "default") == []


def test_migrate_legacy_needs_a_store(tmp_path: Path):
    legacy_path = tmp_path / "legacy.json"
    legacy_path.write_text("{}")
    result = invoke("migrate-legacy", str(legacy_path))
    assert result.exit_code == 2
    assert "needs --db" in result.stderr
    assert invoke("migrate-legacy", str(legacy_path), "--url", "http://x").exit_code == 2
    missing = invoke(
        "migrate-legacy", str(tmp_path / "absent.json"), "--db", str(tmp_path / "w.db")
    )
    assert missing.exit_code == 1
    assert "error WORKLOAD_STORAGE_FAILURE" in missing.stderr


def test_every_command_has_help():
    reads = ("ls", "show", "inbox", "dead", "audit")
    writes = ("submit", "approve", "reject", "cancel", "retry", "migrate-legacy")
    for command in (*reads, *writes):
        result = invoke(command, "--help")
        assert result.exit_code == 0, result.output
        assert "Usage:" in result.stdout
        if command in reads:
            assert "--json" in result.stdout


def test_ls_needs_only_read_while_inbox_and_dead_need_their_capabilities(server: Server):
    application = "read-only-app"
    requester = server.token(application)
    reader = server.token(application, capabilities={"workload:read"})
    made = invoke(
        "submit", "send", "--approval", "--json", "--url", server.url, "--token", requester
    )
    held = json.loads(made.stdout)["workload"]["workload_id"]
    as_reader = ["--url", server.url, "--token", reader]
    listed = invoke("ls", "--state", "AWAITING_APPROVAL", "--json", *as_reader)
    assert listed.exit_code == 0, listed.stderr
    assert [w["workload_id"] for w in json.loads(listed.stdout)] == [held]
    for command in ("inbox", "dead"):
        refused = invoke(command, *as_reader)
        assert refused.exit_code == 1
        assert refused.stderr.startswith("error WORKLOAD_")
