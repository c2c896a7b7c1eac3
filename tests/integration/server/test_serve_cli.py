"""``feltdb serve`` on a first start: a new keyring, an admin token that works, the URL."""

from __future__ import annotations

import signal
import stat
import subprocess

import httpx
import pytest
from support.server import start_server, stop, submission, wait_until_healthy


def test_a_first_start_creates_a_keyring_and_prints_a_working_admin_token(tmp_path):
    process, url, log = start_server(tmp_path, "--db", "work.db")
    try:
        wait_until_healthy(url, process, log)
        printed = log.read_text()
        tokens = [line for line in printed.splitlines() if line.startswith("fgt1.")]
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
        assert "fgt1." not in log.read_text()  # the keyring exists: no new admin token
        assert httpx.get(f"{url}/v1/workloads/x", headers=headers).status_code == 404
    finally:
        stop(again)


def test_serve_refuses_a_store_it_cannot_open(tmp_path):
    process, _, log = start_server(tmp_path, "--db", "mysql://nowhere/db")
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        stop(process)
        pytest.fail("serve kept running on a store it cannot open")
    assert process.returncode == 1
    assert "WORKLOAD_INVALID" in log.read_text()
