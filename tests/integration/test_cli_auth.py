"""`feltdb keys new` and `feltdb grant issue`: in process with typer's runner, and once as a
real subprocess, the way an operator runs them.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from feltdb.auth import (
    ALL_CAPABILITIES,
    CLAIM,
    READ,
    Keyring,
    ResourceScope,
    ResourceScopeKind,
    Subject,
    authorize,
    decode_token,
    workload_uri,
)
from feltdb.cli import app
from feltdb.errors import WorkloadError

runner = CliRunner()


def invoke(*args: str):
    return runner.invoke(app, list(args), env={"COLUMNS": "200"})


@pytest.fixture
def keyring_file(tmp_path: Path) -> Path:
    path = tmp_path / "keyring.json"
    result = invoke("keys", "new", "--out", str(path))
    assert result.exit_code == 0, result.output
    return path


def issue(keyring_file: Path, *extra: str) -> str:
    result = invoke(
        "grant",
        "issue",
        "--keyring",
        str(keyring_file),
        "--subject",
        "worker:w1",
        "--tenant",
        "t",
        "--application",
        "app",
        *extra,
    )
    assert result.exit_code == 0, result.output
    return result.stdout.strip()


# ------------------------------------------------------------------ keys new


def test_keys_new_writes_a_private_keyring_and_names_its_key(keyring_file: Path):
    ring = Keyring.load(keyring_file)
    assert stat.S_IMODE(os.stat(keyring_file).st_mode) == 0o600
    assert set(json.loads(keyring_file.read_text(encoding="utf-8"))) == {"active", "keys"}
    assert ring.key_ids == {ring.active}


def test_keys_new_refuses_to_overwrite_a_keyring(keyring_file: Path):
    before = keyring_file.read_text(encoding="utf-8")
    result = invoke("keys", "new", "--out", str(keyring_file))
    assert result.exit_code == 1
    assert "refusing to overwrite" in result.stderr
    assert keyring_file.read_text(encoding="utf-8") == before


def test_keys_new_writes_the_default_file_in_the_current_directory(tmp_path: Path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert invoke("keys", "new").exit_code == 0
    Keyring.load(tmp_path / "feltdb-keyring.json")


def test_keys_new_reports_an_unwritable_place(tmp_path: Path):
    result = invoke("keys", "new", "--out", str(tmp_path / "no" / "such" / "dir.json"))
    assert result.exit_code == 1
    assert "cannot write" in result.stderr


# ------------------------------------------------------------------ grant issue


def test_grant_issue_prints_one_token_the_keyring_verifies(keyring_file: Path):
    token = issue(keyring_file, "--capability", CLAIM, "--capability", "email:send")
    assert "\n" not in token
    signed = decode_token(token)
    grant = Keyring.load(keyring_file).verify(token, signed.grant.issued_at)
    assert grant.subject == Subject.worker("w1")
    assert (grant.tenant_id, grant.application_id) == ("t", "app")
    assert grant.capabilities == {CLAIM, "email:send"}
    assert grant.resources == [
        ResourceScope(kind=ResourceScopeKind.APPLICATION, uri="flow://app/*"),
    ]
    assert grant.expires_at - grant.issued_at == 3600
    assert grant.id.startswith("grant_")
    authorize(grant, CLAIM, "t", "app", workload_uri("app", "w"))


def test_grant_issue_takes_resources_lifetime_and_issuer(keyring_file: Path):
    token = issue(
        keyring_file,
        "--capability",
        READ,
        "--resource",
        "flow://app/workloads/w1",
        "--resource",
        "flow://app/workloads/x*",
        "--lifetime",
        "60",
        "--issuer",
        "human:ada",
    )
    grant = decode_token(token).grant
    assert grant.resources == [
        ResourceScope(kind=ResourceScopeKind.WORKLOAD, uri="flow://app/workloads/w1"),
        ResourceScope(kind=ResourceScopeKind.WORKLOAD, uri="flow://app/workloads/x*"),
    ]
    assert grant.expires_at - grant.issued_at == 60
    assert grant.issuer == Subject.human("ada")
    authorize(grant, READ, "t", "app", workload_uri("app", "x9"))
    with pytest.raises(WorkloadError):
        authorize(grant, READ, "t", "app", workload_uri("app", "w2"))


def test_two_issued_grants_have_different_ids(keyring_file: Path):
    one = issue(keyring_file, "--capability", READ)
    two = issue(keyring_file, "--capability", READ)
    assert decode_token(one).grant.id != decode_token(two).grant.id


def test_an_admin_grant_can_hold_every_capability(keyring_file: Path):
    flags = [arg for capability in sorted(ALL_CAPABILITIES) for arg in ("--capability", capability)]
    assert decode_token(issue(keyring_file, *flags)).grant.capabilities == ALL_CAPABILITIES


@pytest.mark.parametrize("subject", ["w1", "robot:w1", "worker:", ":w1"])
def test_a_malformed_subject_is_refused(keyring_file: Path, subject: str):
    result = invoke(
        "grant", "issue", "--keyring", str(keyring_file), "--subject", subject,
        "--tenant", "t", "--application", "app", "--capability", READ,
    )  # fmt: skip
    assert result.exit_code == 1
    assert isinstance(result.exception, WorkloadError)
    assert result.exception.code == "WORKLOAD_INVALID"
    assert "KIND:ID" in result.exception.message


@pytest.mark.parametrize(
    "missing_or_bad",
    [
        pytest.param(["--tenant", "t", "--application", "app"], id="no-capability"),
        pytest.param(["--application", "app", "--capability", READ], id="no-tenant"),
        pytest.param(["--tenant", "t", "--capability", READ], id="no-application"),
        pytest.param(
            ["--tenant", "t", "--application", "app", "--capability", READ, "--lifetime", "0"],
            id="zero-lifetime",
        ),
        pytest.param(
            ["--tenant", "t", "--application", "app", "--capability", READ, "--lifetime", "x"],
            id="lifetime-not-a-number",
        ),
    ],
)
def test_a_missing_or_bad_option_is_a_usage_error(keyring_file: Path, missing_or_bad):
    result = invoke(
        "grant", "issue", "--keyring", str(keyring_file), "--subject", "worker:w1", *missing_or_bad
    )
    assert result.exit_code == 2
    assert result.stdout == ""


def test_grant_issue_reports_a_missing_keyring(tmp_path: Path):
    result = invoke(
        "grant", "issue", "--keyring", str(tmp_path / "absent.json"), "--subject", "worker:w1",
        "--tenant", "t", "--application", "app", "--capability", READ,
    )  # fmt: skip
    assert result.exit_code == 1
    assert "cannot read keyring" in result.stderr
    assert result.stdout == ""


# ------------------------------------------------------------------ as a real command


def feltdb(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", "from feltdb.cli import main; main()", *args],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=cwd,
        env={"COLUMNS": "200", "PATH": "/usr/bin:/bin"},
    )


def test_an_operator_makes_a_keyring_and_mints_a_token_from_the_shell(tmp_path: Path):
    made = feltdb("keys", "new", cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    again = feltdb("keys", "new", cwd=tmp_path)
    assert again.returncode == 1
    assert "refusing to overwrite" in again.stderr

    minted = feltdb(
        "grant", "issue", "--subject", "human:ada", "--tenant", "t", "--application", "app",
        "--capability", READ, cwd=tmp_path,
    )  # fmt: skip
    assert minted.returncode == 0, minted.stderr
    token = minted.stdout.strip()
    ring = Keyring.load(tmp_path / "feltdb-keyring.json")
    assert ring.verify(token, decode_token(token).grant.issued_at).subject == Subject.human("ada")

    refused = feltdb(
        "grant", "issue", "--subject", "nobody", "--tenant", "t", "--application", "app",
        "--capability", READ, cwd=tmp_path,
    )  # fmt: skip
    assert refused.returncode == 1
    assert "WORKLOAD_INVALID" in refused.stderr
    assert "Traceback" not in refused.stderr


def test_grant_issue_narrows_to_environments_and_definitions(keyring_file: Path):
    token = issue(
        keyring_file,
        "--capability",
        CLAIM,
        "--environment",
        "staging",
        "--definition",
        "report",
        "--definition",
        "send",
    )
    constraints = decode_token(token).grant.constraints
    assert constraints.environments == {"staging"}
    assert constraints.definitions == {"report", "send"}
    unconstrained = decode_token(issue(keyring_file, "--capability", CLAIM)).grant.constraints
    assert not unconstrained.environments and not unconstrained.definitions
