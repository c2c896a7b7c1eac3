"""``GET /v1/audit/verify`` and ``feltdb audit verify`` against a real server: the
maintenance loop seals, a reader of the audit verifies, a row edited behind the server's
back is named, and only to the application whose transaction it is.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from support.cli import invoke
from support.factories import make_request
from support.server import WORK_CAPABILITY, Server, serve, submission

from feltdb import Subject, WorkloadStore
from feltdb.auth.policy import AUDIT, READ, SUBMIT

READER = {"subject": Subject.human("auditor"), "capabilities": [AUDIT]}
SUBMITTER = {"subject": Subject.agent("a1"), "capabilities": [SUBMIT, WORK_CAPABILITY]}


def submit(http: httpx.Client, server: Server, app: str, key: str) -> str:
    """Submit a workload of ``app``; its id."""
    headers = server.headers(app, **SUBMITTER)
    answer = http.post("/v1/workloads", json=submission(key), headers=headers)
    assert answer.status_code == 201, answer.text
    workload_id: str = answer.json()["workload_id"]
    return workload_id


def test_a_reader_of_the_shared_server_verifies_its_chain(
    server: Server, http: httpx.Client, app: str
) -> None:
    submit(http, server, app, "v1")
    report = http.get("/v1/audit/verify", headers=server.headers(app, **READER))
    assert report.status_code == 200, report.text
    body = report.json()
    assert body["ok"] is True and body["problem"] is None
    assert body["head_revision"] > 0 and len(body["head_link"]) == 64
    assert body["rows"] >= 1 and body["transactions"] >= body["sealed"] >= 1


@pytest.mark.parametrize("anchor", ["1", "x:y", "1:" + "A" * 64, "0:" + "a" * 64, "1:" + "a" * 65])
def test_a_malformed_anchor_is_refused(
    server: Server, http: httpx.Client, app: str, anchor: str
) -> None:
    answer = http.get(
        "/v1/audit/verify", params={"anchor": anchor}, headers=server.headers(app, **READER)
    )
    assert answer.status_code == 422, answer.text
    assert answer.json()["error"]["code"] == "WORKLOAD_INVALID"


def test_verify_needs_audit_read(server: Server, http: httpx.Client, app: str) -> None:
    answer = http.get("/v1/audit/verify", headers=server.headers(app, capabilities=[READ]))
    assert answer.status_code == 403, answer.text
    assert http.get("/v1/audit/verify").status_code == 401


@pytest.fixture
def own_server(tmp_path: Path) -> Iterator[Server]:
    """A server of its own (its store is tampered with), maintaining every 0.2 s."""
    yield from serve(tmp_path, None, "--maintenance-interval", "0.2")


def wait_sealed(target: str, revision: int) -> None:
    deadline = time.monotonic() + 30
    with WorkloadStore.open(target) as store:
        while (head := store.db.chain_head()) is None or head.commit_revision < revision:
            assert time.monotonic() < deadline, "the maintenance loop sealed nothing"
            time.sleep(0.05)


def _two_applications_sealed(http: httpx.Client, server: Server) -> str:
    """A workload of application ``ours`` and one of ``theirs``, sealed by the maintenance
    loop (not by a verify); the id of ``ours``'s.
    """
    ours = submit(http, server, "ours", "ours")
    submit(http, server, "theirs", "theirs")
    with WorkloadStore.open(server.target) as store:
        revision = store.db.current_revision()
    wait_sealed(server.target, revision)
    return ours


def _behind_the_server(server: Server, statement: str, key: str) -> None:
    """Run ``statement`` on the server's SQLite file directly, naming row ``key``."""
    connection = sqlite3.connect(server.target)
    connection.execute(statement, (key,))
    connection.commit()
    connection.close()


def test_an_edited_row_is_named_to_its_application_and_only_told_to_another(
    own_server: Server,
) -> None:
    server = own_server
    with httpx.Client(base_url=server.url, timeout=30) as http:
        ours = _two_applications_sealed(http, server)
        _behind_the_server(
            server,
            "UPDATE rows SET document = replace(document, 'ada@', 'eve@') WHERE key = ?",
            ours,
        )
        mine = http.get("/v1/audit/verify", headers=server.headers("ours", **READER)).json()
        other = http.get("/v1/audit/verify", headers=server.headers("theirs", **READER)).json()
    assert mine["ok"] is False
    assert mine["problem"]["kind"] == "row_altered"
    assert mine["problem"]["address"] == f"system_durable_work/{ours}"
    assert mine["problem"]["transaction_id"].startswith("tx_")
    assert other["ok"] is False
    assert other["problem"]["kind"] == "row_altered"
    assert other["problem"]["revision"] == mine["problem"]["revision"]
    assert other["problem"]["address"] is None and other["problem"]["transaction_id"] is None
    assert ours not in str(other)
    # The command, through the server: exit 1, the problem named.
    token = server.token("ours", **READER)
    cli = invoke("audit", "verify", "--url", server.url, "--token", token)
    assert cli.exit_code == 1, cli.output
    assert "audit chain: FAILED" in cli.output
    assert f"row: system_durable_work/{ours}" in cli.output


@pytest.fixture
def unsealed_server(tmp_path: Path) -> Iterator[Server]:
    """A server of its own whose maintenance loop does not run during the test, so the
    log's entries stay unsealed until a verification seals them."""
    yield from serve(tmp_path, None, "--maintenance-interval", "3600")


def test_a_second_verification_meanwhile_is_answered_503_with_retry_after(
    unsealed_server: Server,
) -> None:
    server = unsealed_server
    headers = server.headers("app", **READER)
    answers: list[httpx.Response] = []
    answered = threading.Event()
    with httpx.Client(base_url=server.url, timeout=30) as http:
        submit(http, server, "app", "v1")

        def verify() -> None:
            answers.append(http.get("/v1/audit/verify", headers=headers))
            answered.set()

        # Another process holds the write lock, so whichever verification takes the
        # server's slot waits in its seal (SQLite's busy timeout, 10 s), and the other,
        # sent meanwhile, is refused at once. Either may be first to the slot.
        blocker = sqlite3.connect(server.target, isolation_level=None)
        blocker.execute("BEGIN IMMEDIATE")
        both = [threading.Thread(target=verify) for _ in range(2)]
        try:
            for thread in both:
                thread.start()
            assert answered.wait(8), "neither verification was answered while one waited"
        finally:
            blocker.execute("ROLLBACK")
            blocker.close()
            for thread in both:
                thread.join(30)
    done, refused = sorted(answers, key=lambda answer: answer.status_code)
    assert refused.status_code == 503, refused.text
    assert refused.json()["error"]["code"] == "WORKLOAD_STORAGE_FAILURE"
    assert "already running" in refused.json()["error"]["message"]
    assert 1 <= int(refused.headers["Retry-After"]) <= 60
    assert done.status_code == 200, done.text
    assert done.json()["ok"] is True and done.json()["sealed"] >= 1


def test_the_local_operator_verifies_a_store_file_with_either_order_of_options(
    tmp_path: Path,
) -> None:
    path = str(tmp_path / "local.db")
    with WorkloadStore.open(path) as store:
        admitted = store.create(make_request(idempotency_key="local"))
    for args in (["audit", "verify", "--db", path], ["audit", "--db", path, "verify"]):
        checked = invoke(*args)
        assert checked.exit_code == 0, (args, checked.output)
        assert checked.output.startswith("audit chain: ok"), checked.output
        assert "transactions: 1 checked, 1 sealed" in checked.output
    head = next(line for line in checked.output.splitlines() if "head:" in line)
    anchor = head.split("head: ", 1)[1]
    connection = sqlite3.connect(path)
    connection.execute("UPDATE rows SET document = replace(document, '\"READY\"', '\"SUCCEEDED\"')")
    connection.commit()
    connection.close()
    found = invoke("audit", "--db", path, "verify", "--anchor", anchor, "--json")
    assert found.exit_code == 1, found.output
    report = json.loads(found.output)
    # The operator holds the file: the whole report, whichever application's row it is.
    assert report["problem"]["kind"] == "row_altered"
    assert report["problem"]["address"] == f"system_durable_work/{admitted.workload_id}"


def test_options_typed_before_verify_beat_the_environment_and_after_it_beat_both(
    server: Server, app: str, tmp_path: Path
) -> None:
    token = server.token(app, **READER)
    nowhere = {"FELTDB_URL": "http://127.0.0.1:9", "FELTDB_TOKEN": "not-a-token"}
    # Typed before the subcommand: the environment does not override them.
    before = invoke("audit", "--url", server.url, "--token", token, "verify", env=nowhere)
    assert before.exit_code == 0, before.output
    assert before.output.startswith("audit chain: ok")
    # A place typed after the subcommand replaces the group's: --url drops the --db.
    missing = str(tmp_path / "missing.db")
    after = invoke("audit", "--db", missing, "verify", "--url", server.url, "--token", token)
    assert after.exit_code == 0, after.output
    # The group's --json reaches verify; the listing's own options are refused there.
    path = str(tmp_path / "local.db")
    with WorkloadStore.open(path) as store:
        store.create(make_request(idempotency_key="local"))
    as_json = invoke("audit", "--db", path, "--json", "verify", env=nowhere)
    assert as_json.exit_code == 0, as_json.output
    assert json.loads(as_json.output)["ok"] is True
    refused = invoke("audit", "--db", path, "--since", "3", "verify")
    assert refused.exit_code == 2
    assert "--since: options of the listing, not of verify" in refused.output


def test_an_edited_index_column_is_named_to_its_application_and_only_told_to_another(
    own_server: Server,
) -> None:
    # The document stays as written; its state beside it says the work is done, so no claim
    # sees it any more: the index columns are checked against what the document implies.
    server = own_server
    with httpx.Client(base_url=server.url, timeout=30) as http:
        ours = _two_applications_sealed(http, server)
        _behind_the_server(server, "UPDATE rows SET state = 'SUCCEEDED' WHERE key = ?", ours)
        mine = http.get("/v1/audit/verify", headers=server.headers("ours", **READER)).json()
        other = http.get("/v1/audit/verify", headers=server.headers("theirs", **READER)).json()
    assert mine["ok"] is False
    assert mine["problem"]["kind"] == "index_altered"
    assert mine["problem"]["address"] == f"system_durable_work/{ours}"
    assert "state 'SUCCEEDED', not 'READY'" in mine["problem"]["message"]
    assert other["problem"]["kind"] == "index_altered"
    assert other["problem"]["address"] is None and ours not in str(other)


def test_the_local_operator_finds_a_revocation_deleted_behind_the_store_s_back(
    tmp_path: Path,
) -> None:
    path = str(tmp_path / "local.db")
    with WorkloadStore.open(path) as store:
        store.create(make_request(idempotency_key="local"))
        assert store.grants.revoke("g", "human:h", 30, tenant_id="t", application_id="app")
        [revocation] = store.db.list_rows("system_revoked_grants")
    assert invoke("audit", "verify", "--db", path).exit_code == 0
    connection = sqlite3.connect(path)
    connection.execute("DELETE FROM rows WHERE collection = 'system_revoked_grants'")
    connection.commit()
    connection.close()
    found = invoke("audit", "verify", "--db", path)
    assert found.exit_code == 1, found.output
    assert f"problem: row_missing at revision {revocation.revision}" in found.output
    assert f"row: system_revoked_grants/{revocation.key}" in found.output
