"""What a newcomer trips over (issue 10), each through a real ``feltdb`` subprocess, on a
store file and against the module's server."""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest
from support.server import Server

from feltdb import Subject, WorkloadStore
from feltdb.auth.policy import ALL_CAPABILITIES, APPROVE, application_grant

FELTDB = [sys.executable, "-c", "from feltdb.cli import main; main()"]


def feltdb(
    *args: str, columns: int = 200, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FELTDB_")}
    env["COLUMNS"] = str(columns)
    return subprocess.run(
        [*FELTDB, *args], capture_output=True, text=True, timeout=120, env=env, cwd=cwd
    )


def default_snapshot() -> Any:
    """The fixture grant, in tenant and application ``default``."""
    from support.factories import SIGNER, make_request

    from feltdb import ResourceScope, ResourceScopeKind

    everything = ResourceScope(kind=ResourceScopeKind.WORKLOAD, uri="flow://default/workloads/*")
    grant = msgspec.structs.replace(
        make_request().authorization_snapshot.grant,
        **{"tenant_id": "default", "application_id": "default", "resources": (everything,)},
    )
    return SIGNER.sign(grant)


def one_line_usage_error(run: subprocess.CompletedProcess[str]) -> str:
    assert run.returncode == 2, (run.stdout, run.stderr)
    assert "Traceback" not in run.stdout + run.stderr
    lines = [line for line in run.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, run.stderr
    return lines[0]


def submit(target: list[str], definition: str = "send", *extra: str) -> dict[str, Any]:
    run = feltdb("submit", definition, "--input", '{"n": 1}', *extra, *target, "--json")
    assert run.returncode == 0, run.stderr
    document: dict[str, Any] = json.loads(run.stdout)["workload"]
    return document


# ------------------------------------------------------------------ 3, 4: no tracebacks


@pytest.mark.parametrize("document", ["NaN", '{"x": Infinity}', "[-Infinity]"])
def test_an_input_that_is_not_json_is_a_usage_error_against_a_server_too(
    server: Server, document: str
):
    run = feltdb(
        "submit", "ok", "--input", document, "--url", server.url, "--token", server.token("a")
    )
    assert "is not a JSON number" in one_line_usage_error(run)


@pytest.mark.parametrize("url", ["http://[::1", "http://127.0.0.1:abc", "ftp://host", "host:1"])
def test_a_malformed_url_is_a_one_line_usage_error(url: str):
    for command in (["ls"], ["show", "w"], ["worker", "examples.hello_worker:worker"]):
        run = feltdb(*command, "--url", url, "--token", "fgt2.x")
        assert "--url" in one_line_usage_error(run) or "URL" in run.stderr, command


# ------------------------------------------------------------------ 7: a terminal's width


def test_ls_fits_80_columns_never_blanks_a_header_and_says_there_is_more(tmp_path: Path):
    db = str(tmp_path / "work.db")
    from support.factories import make_request

    with WorkloadStore.open(db) as store:  # the setup only: the listing is the CLI's
        for n in range(51):
            store.create(
                make_request(
                    tenant_id="default",
                    application_id="default",
                    authorization_snapshot=default_snapshot(),
                    idempotency_key=f"k{n}",
                    definition_id="send-newsletter",
                )
            )
    listed = feltdb("ls", "--db", db, columns=80)
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    assert all(len(line) <= 80 for line in lines), "\n".join(lines)
    header = next(line for line in lines if "definition" in line)
    assert "id" in header and "state" in header
    with WorkloadStore.open(db) as store:
        ids = {w.workload_id for w in store.list("default", "default")}
    assert len(ids) == 51
    shown = {word for line in lines for word in line.replace("│", " ").split() if word in ids}
    assert len(shown) == 50  # whole ids, the first 50
    assert "there are more" in listed.stderr and "--all" in listed.stderr
    everything = feltdb("ls", "--db", db, "--all", "--json")
    assert len(json.loads(everything.stdout)) == 51 and everything.stderr == ""
    assert "highest priority, then oldest" in listed.stdout


# ------------------------------------------------------------------ 8: approve with approve


def test_approve_needs_only_workload_approve(server: Server):
    app = "approving"
    requester = ["--url", server.url, "--token", server.token(app)]
    gated = submit(requester, "send", "--approval")
    approver = server.token(app, subject=Subject.human("ada"), capabilities=[APPROVE])
    inbox = feltdb("inbox", "--url", server.url, "--token", approver, "--json")
    assert [w["workload_id"] for w in json.loads(inbox.stdout)] == [gated["workload_id"]]
    run = feltdb("approve", gated["workload_id"], "--url", server.url, "--token", approver)
    assert run.returncode == 0, run.stderr
    assert "approved" in run.stdout and "READY" in run.stdout


# ------------------------------------------------------------------ 10: show and dead


def test_show_says_what_ready_work_waits_for_in_utc_times(tmp_path: Path):
    db = str(tmp_path / "work.db")
    parent = submit(["--db", db], "parent")
    child = submit(
        ["--db", db],
        "child",
        "--capability",
        "email:send",
        "--not-before",
        "+1h",
        "--key",
        "child",
    )
    with WorkloadStore.open(db) as store:  # no --after: it waits on no other work
        assert store.get(child["workload_id"]).dependencies == []
    shown = feltdb("show", child["workload_id"], "--db", db)
    assert shown.returncode == 0, shown.stderr
    text = shown.stdout
    assert "waits for" in text and "email:send" in text and "not before" in text
    created = text.split("created", 1)[1].split("\n", 1)[0]
    assert re.search(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC \(", created), created
    assert parent["workload_id"] not in text


def test_finished_work_shows_no_next_attempt_and_dead_work_says_why(tmp_path: Path):
    db = str(tmp_path / "work.db")
    done = submit(["--db", db], "done", "--key", "done")
    dead = submit(["--db", db], "dead", "--key", "dead", "--max-attempts", "1")
    with WorkloadStore.open(db) as store:
        for workload in (done, dead):
            claim = store.claim(workload["workload_id"], "w1", set())
            store.start(workload["workload_id"], claim.claim_id, "w1", claim.fencing_token)
        claim = store.get(done["workload_id"]).current_claim
        assert claim is not None
        store.complete(done["workload_id"], claim.claim_id, "w1", claim.fencing_token, "r", {})
        claim = store.get(dead["workload_id"]).current_claim
        assert claim is not None
        store.fail(
            dead["workload_id"],
            claim.claim_id,
            "w1",
            claim.fencing_token,
            "worker_failure",
            "smtp down",
            effect="unknown",
        )
    shown = feltdb("show", done["workload_id"], "--db", db, columns=100)
    assert "next attempt" not in shown.stdout
    dead_page = feltdb("show", dead["workload_id"], "--db", db, columns=100).stdout
    assert (
        "effect=unknown" in dead_page.replace("\n", "").replace(" ", "").replace("│", "")
        or "effect=unknown" in dead_page
    )
    listed = feltdb("dead", "--db", db, columns=160)
    flat = " ".join(listed.stdout.replace("│", " ").split())
    assert "why" in flat and "its last attempt failed: worker_failure: smtp down" in flat, flat


# ------------------------------------------------------------------ 11: reads write nothing


def test_a_read_on_a_store_creates_no_file(tmp_path: Path):
    db = tmp_path / "work.db"
    WorkloadStore.open(db).close()
    before = sorted(p.name for p in tmp_path.iterdir())
    for command in (["ls"], ["inbox"], ["dead"], ["audit"], ["show", "workload_x"]):
        feltdb(*command, "--db", str(db))
    assert sorted(p.name for p in tmp_path.iterdir()) == before
    assert not (tmp_path / "feltdb-keyring.json").exists()


# ------------------------------------------------------------------ 17: quiet idle workers


def test_an_idle_long_poll_is_not_logged_at_info(server: Server):
    headers = server.headers("idle-app")
    marker = "/v1/claims"
    before = server.log.read_text().count(marker)
    for _ in range(3):
        answer = httpx.post(f"{server.url}/v1/claims", json={}, headers=headers, timeout=10)
        assert answer.status_code == 204
    assert server.log.read_text().count(marker) == before
    httpx.get(f"{server.url}/v1/workloads", headers=headers, timeout=10)
    # The access line is written as the answer goes out: wait for it, briefly.
    deadline = time.monotonic() + 10
    while "GET /v1/workloads 200" not in server.log.read_text():
        assert time.monotonic() < deadline, server.log.read_text()[-2000:]
        time.sleep(0.05)
    assert server.log.read_text().count(marker) == before  # and still no idle poll


# ------------------------------------------------------------------ 15: follow reconnects


def test_audit_follow_outlives_a_server_restart(tmp_path: Path):
    from support.server import free_port, serve_command, stop, wait_until_healthy

    from feltdb.auth.tokens import Keyring

    keyring = Keyring.generate()
    keyring.save(tmp_path / "keyring.json")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("FELTDB_")}

    def start(log: Path) -> subprocess.Popen[bytes]:
        args = ["--db", str(tmp_path / "work.db"), "--keyring", str(tmp_path / "keyring.json")]
        with log.open("wb") as output:
            process = subprocess.Popen(
                serve_command(*args, "--port", str(port)),
                stdout=output,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=tmp_path,
            )
        wait_until_healthy(url, process, log)
        return process

    now = int(time.time())
    operator = Subject.human("ops")
    grant = application_grant(
        operator, "default", "default", ALL_CAPABILITIES, issued_at=now - 60, expires_at=now + 600
    )
    token = keyring.sign(grant)
    target = ["--url", url, "--token", token]
    first = start(tmp_path / "one.log")
    out, err = (tmp_path / "follow.out").open("w"), (tmp_path / "follow.err").open("w")
    follower = subprocess.Popen(
        [*FELTDB, "audit", "--follow", "--interval", "0.1", *target],
        stdout=out,
        stderr=err,
        env=env,
    )
    try:
        submit(target, "before", "--key", "before")
        stop(first)
        deadline = time.monotonic() + 30
        while "retrying" not in (tmp_path / "follow.err").read_text():
            assert time.monotonic() < deadline, "the follower never said it lost the server"
            assert follower.poll() is None, "the follower exited when the server stopped"
            time.sleep(0.1)
        second = start(tmp_path / "two.log")
        try:
            after = submit(target, "after", "--key", "after")
            while after["workload_id"] not in (tmp_path / "follow.out").read_text():
                assert time.monotonic() < deadline + 30, "nothing followed the restart"
                time.sleep(0.1)
            assert "reconnected" in (tmp_path / "follow.err").read_text()
        finally:
            stop(second)
    finally:
        follower.terminate()
        follower.wait(timeout=10)
        out.close()
        err.close()


# ------------------------------------------------------------------ 5: a wrong URL


def test_a_url_that_is_no_feltdb_api_is_said_so(server: Server):
    token = server.token("wrong-url")
    for url in (f"{server.url}/v1", f"{server.url}/some/path"):
        run = feltdb("ls", "--url", url, "--token", token)
        assert run.returncode == 1, run.stderr
        assert "no feltdb API at" in run.stderr and "Traceback" not in run.stderr


# ------------------------------------------------------------------ 6, 16: tokens and grants


def test_serve_on_a_busy_port_fails_before_it_mints_anything(tmp_path: Path):
    import socket

    with socket.create_server(("127.0.0.1", 0)) as busy:
        port = busy.getsockname()[1]
        run = feltdb("serve", "--db", str(tmp_path / "work.db"), "--port", str(port), cwd=tmp_path)
    assert run.returncode == 1, run.stdout + run.stderr
    assert "cannot listen on 127.0.0.1" in run.stderr
    assert "fgt2." not in run.stdout
    assert not (tmp_path / "feltdb-keyring.json").exists()


def test_an_admin_token_can_be_minted_later_and_a_grant_revoked_and_listed(server: Server):
    keyring = str(server.log.parent / "keyring.json")
    minted = feltdb(
        "grant",
        "issue",
        "--admin",
        "--keyring",
        keyring,
        "--tenant",
        "t",
        "--application",
        "granting",
    )
    assert minted.returncode == 0, minted.stderr
    admin = minted.stdout.strip()
    grant = server.keyring.verify(admin, int(time.time()))
    assert grant.capabilities >= ALL_CAPABILITIES and grant.subject == Subject.human("admin")
    assert f"grant {grant.id}" in minted.stderr
    victim = feltdb(
        "grant",
        "issue",
        "--keyring",
        keyring,
        "--subject",
        "worker:w9",
        "--tenant",
        "t",
        "--application",
        "granting",
        "--capability",
        "workload:read",
    )
    victim_token = victim.stdout.strip()
    victim_id = victim.stderr.split()[1]
    target = ["--url", server.url, "--token", admin, "--tenant", "t"]
    headers = {"Authorization": f"Bearer {victim_token}"}
    assert httpx.get(f"{server.url}/v1/workloads", headers=headers).status_code == 200
    revoked = feltdb("grant", "revoke", victim_id, *target)
    assert revoked.returncode == 0, revoked.stderr
    assert httpx.get(f"{server.url}/v1/workloads", headers=headers).status_code == 403
    listed = feltdb("grant", "list", *target, "--json")
    assert [entry["grant_id"] for entry in json.loads(listed.stdout)] == [victim_id]
    again = feltdb("grant", "revoke", victim_id, *target)
    assert "already" in again.stdout


def test_grant_revoke_and_list_work_on_a_store_file_too(tmp_path: Path):
    db = str(tmp_path / "work.db")
    WorkloadStore.open(db).close()
    typo = feltdb("grant", "revoke", "grant_0123", "--db", db)
    assert typo.returncode == 1 and "Traceback" not in typo.stderr
    assert typo.stderr.startswith("error WORKLOAD_NOT_FOUND: no grant 'grant_0123' was minted")
    assert "revoked" not in typo.stdout
    assert feltdb("grant", "list", "--db", db).stdout == "revoked grants: none\n"
    assert feltdb("grant", "revoke", "g-1", "--force", "--db", db).returncode == 0
    listed = feltdb("grant", "list", "--db", db)
    assert listed.stdout.startswith("g-1\trevoked ")


def test_what_a_newcomer_tried_next_is_one_line_too(tmp_path: Path):
    db = str(tmp_path / "work.db")
    far = submit(["--db", db], "far", "--not-before", "253402300800")  # past year 9999
    shown = feltdb("show", far["workload_id"], "--db", db)
    assert shown.returncode == 0 and "Traceback" not in shown.stderr
    assert "253402300800 (unix seconds)" in shown.stdout
    assert "too large" in one_line_usage_error(
        feltdb("submit", "x", "--input", "1e999", "--db", db)
    )
    one_line_usage_error(feltdb("serve", "--port", "99999", cwd=tmp_path))
    alone = feltdb()
    assert alone.returncode == 0 and alone.stdout.startswith("Usage: feltdb")


# ------------------------------------------------------------------ 9, 12: help and start-up


def test_help_is_plain_and_short_flags_work():
    for command in (["-h"], ["submit", "-h"], ["serve", "--help"], ["ls", "--help"]):
        run = feltdb(*command, columns=80)
        assert run.returncode == 0, (command, run.stderr)
        assert "<bool>" not in run.stdout and "``" not in run.stdout, command
        assert run.stdout.startswith("Usage: feltdb"), command
    version = feltdb("--version")
    assert version.returncode == 0 and version.stdout.startswith("feltdb ")


def test_an_error_is_one_line_on_stderr_however_long_not_wrapped_at_80(tmp_path: Path):
    run = feltdb("show", "workload_" + "x" * 200, "--db", str(tmp_path / "missing.db"))
    assert run.returncode == 2
    assert len([line for line in run.stderr.splitlines() if line]) == 1


def imported_of(code: str, modules: tuple[str, ...]) -> tuple[str, list[str]]:
    """What a new interpreter running ``code`` prints, and which of ``modules`` it has
    imported by the end (sorted).
    """
    probe = f"{code}\nimport sys\nprint(sorted(m for m in {modules!r} if m in sys.modules))"
    run = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    *printed, imported = run.stdout.splitlines()
    return "\n".join(printed), ast.literal_eval(imported)


def test_the_help_imports_only_the_command_line_none_of_what_a_command_runs():
    heavy = ("pydantic", "msgspec", "sqlite3", "feltdb.records", "feltdb.auth.grants",
             "feltdb.work.store", "feltdb.client", "feltdb.storage", "feltdb.worker")  # fmt: skip
    code = "import sys\nsys.argv = ['feltdb', '--help']\nfrom feltdb.cli import main\n"
    printed, imported = imported_of(code + "try:\n    main()\nexcept SystemExit:\n    pass", heavy)
    assert "Usage" in printed and "submit" in printed
    assert imported == []


def test_the_command_line_imports_no_postgresql_or_http_client_it_does_not_use():
    unused = ("psycopg", "psycopg_pool", "httpx", "fastapi", "uvicorn")
    assert imported_of("from feltdb.cli import app", unused)[1] == []
