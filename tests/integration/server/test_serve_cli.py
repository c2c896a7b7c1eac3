"""``feltdb serve``: a first start (a new keyring, an admin token that works, the URL), and
its logs (human-readable, or one JSON object per line with ``--log-json``)."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import time

import httpx
import pytest
from support.server import (
    free_port,
    serve_command,
    start_server,
    stop,
    submission,
    wait_until_healthy,
)


def test_a_first_start_creates_a_keyring_and_prints_a_working_admin_token(tmp_path):
    process, url, log = start_server(tmp_path, "--db", "work.db")
    try:
        wait_until_healthy(url, process, log)
        printed = log.read_text()
        tokens = [line for line in printed.splitlines() if line.startswith("fgt2.")]
        assert len(tokens) == 1, printed
        assert url in printed
        headers = {"Authorization": f"Bearer {tokens[0]}"}
        created = httpx.post(f"{url}/v1/workloads", json=submission(), headers=headers)
        assert created.status_code == 201, created.text
        assert (created.json()["tenant_id"], created.json()["application_id"]) == (
            "default",
            "default",
        )
        assert created.json()["requested_by"] == {"kind": "human", "id": "admin"}
    finally:
        stop(process)
    # SIGTERM is a graceful shutdown (uvicorn re-raises the signal once it is done).
    assert process.returncode in (0, -signal.SIGTERM), log.read_text()
    assert "Application shutdown complete" in log.read_text()
    keyring = tmp_path / "feltdb-keyring.json"
    assert stat.S_IMODE(keyring.stat().st_mode) == 0o600
    assert (tmp_path / "work.db").exists()

    again, url, log = start_server(tmp_path, "--db", "work.db")
    try:
        wait_until_healthy(url, again, log)
        assert "fgt2." not in log.read_text()  # the keyring exists: no new admin token
        assert httpx.get(f"{url}/v1/workloads/x", headers=headers).status_code == 404
    finally:
        stop(again)


def test_a_keyring_from_the_environment_is_used_and_nothing_is_written(tmp_path):
    from feltdb.auth.keyrings import admin_grant
    from feltdb.auth.tokens import Keyring

    ring = Keyring.generate()
    process, url, log = start_server(
        tmp_path, "--db", "work.db", env_extra={"FELTDB_KEYRING": ring.to_json()}
    )
    try:
        wait_until_healthy(url, process, log)
        assert "fgt2." not in log.read_text()  # the operator's keyring: no admin token minted
        token = ring.sign(admin_grant(int(time.time())))
        headers = {"Authorization": f"Bearer {token}"}
        created = httpx.post(f"{url}/v1/workloads", json=submission(), headers=headers)
        assert created.status_code == 201, created.text
        other = Keyring.generate().sign(admin_grant(int(time.time())))
        refused = httpx.get(f"{url}/v1/workloads/x", headers={"Authorization": f"Bearer {other}"})
        assert refused.status_code == 403, refused.text
    finally:
        stop(process)
    assert not (tmp_path / "feltdb-keyring.json").exists()


def test_serve_refuses_a_store_it_cannot_open(tmp_path):
    process, _, log = start_server(tmp_path, "--db", "mysql://nowhere/db")
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        stop(process)
        pytest.fail("serve kept running on a store it cannot open")
    assert process.returncode == 1
    assert "WORKLOAD_INVALID" in log.read_text()


def serve_apart(home, *args: str) -> tuple[subprocess.Popen[bytes], str]:
    """``feltdb serve ARGS`` with stdout and stderr in separate files of ``home``."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("FELTDB_")}
    with (home / "stdout").open("wb") as out, (home / "stderr").open("wb") as err:
        process = subprocess.Popen(
            serve_command(*args, "--port", str(port)), stdout=out, stderr=err, env=env, cwd=home
        )
    return process, f"http://127.0.0.1:{port}"


def test_log_json_writes_one_json_object_per_line(tmp_path):
    process, url = serve_apart(tmp_path, "--db", "work.db", "--log-json")
    try:
        wait_until_healthy(url, process, tmp_path / "stderr")
        assert httpx.get(f"{url}/v1/workloads/x").status_code == 401
        assert httpx.get(f"{url}/metrics").status_code == 200
        admin = {"Authorization": f"Bearer {(tmp_path / 'stdout').read_text().strip()}"}
        idle = httpx.post(f"{url}/v1/batches/claims", json={"limit": 5}, headers=admin)
        assert idle.status_code == 200 and idle.json() == {"items": []}
    finally:
        stop(process)
    assert process.returncode in (0, -signal.SIGTERM), (tmp_path / "stderr").read_text()
    # stdout holds only the admin token of a first start, bare, so it can be copied.
    assert [line.split(".")[0] for line in (tmp_path / "stdout").read_text().split()] == ["fgt2"]
    lines = (tmp_path / "stderr").read_text().splitlines()
    records = [json.loads(line) for line in lines]  # every line is one JSON object
    assert records and all({"ts", "level", "logger", "message"} <= set(r) for r in records)
    messages = [r["message"] for r in records]
    assert any(url in m for m in messages)
    assert "Application shutdown complete." in messages
    access = [r for r in records if r["logger"] == "feltdb.access"]
    unauthorized = [r for r in access if r["path"] == "/v1/workloads/x"]
    assert len(unauthorized) == 1  # each request is logged once (uvicorn's log is off)
    assert unauthorized[0]["method"] == "GET" and unauthorized[0]["status"] == 401
    assert isinstance(unauthorized[0]["duration_ms"], float)
    assert {r["path"] for r in access} >= {"/healthz", "/metrics"}
    # An idle worker's poll that found no work is not news at INFO (issue 25: 661 of 988).
    assert "/v1/batches/claims" not in {r["path"] for r in access}


def test_logs_are_human_readable_by_default(tmp_path):
    process, url = serve_apart(tmp_path, "--db", "work.db")
    try:
        wait_until_healthy(url, process, tmp_path / "stderr")
        assert httpx.get(f"{url}/v1/workloads/x").status_code == 401
    finally:
        stop(process)
    logs = (tmp_path / "stderr").read_text()
    assert "GET /v1/workloads/x 401" in logs
    assert "Application shutdown complete" in logs
    for line in logs.splitlines():
        with pytest.raises(json.JSONDecodeError):
            json.loads(line)
