"""Where a command acting on a store directly (``--db``) finds the keyring that signs its
grant, and that it never makes one where nobody asked for it (issue 24, point 13).

Each test runs the installed ``feltdb`` command in a scratch directory of its own (the
working directory, which must stay empty), on a store elsewhere.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from feltdb import WorkloadState, WorkloadStore
from feltdb.auth.tokens import Keyring

# The installed command (the venv's console script), as an operator runs it.
INSTALLED = Path(sys.executable).parent / "feltdb"
FELTDB = (
    [str(INSTALLED)]
    if INSTALLED.exists()
    else [sys.executable, "-c", "from feltdb.cli import main; main()"]
)
NOWHERE = "postgresql://nobody:secret@127.0.0.1:1/nothing"
"""A database URL nothing listens at: a refusal must come before any connection."""


def feltdb(
    *args: str, cwd: Path, keyring_json: str | None = None
) -> subprocess.CompletedProcess[str]:
    """``feltdb ARGS`` run in ``cwd``, with no ``FELTDB_*`` of the caller's environment
    (``FELTDB_KEYRING`` set to ``keyring_json`` when given).
    """
    env = {k: v for k, v in os.environ.items() if not k.startswith("FELTDB_")}
    env["COLUMNS"] = "200"
    if keyring_json is not None:
        env["FELTDB_KEYRING"] = keyring_json
    return subprocess.run(
        [*FELTDB, *args], capture_output=True, text=True, timeout=120, env=env, cwd=cwd
    )


def ok(run: subprocess.CompletedProcess[str]) -> subprocess.CompletedProcess[str]:
    assert run.returncode == 0, (run.stdout, run.stderr)
    return run


@pytest.fixture
def scratch(tmp_path: Path) -> Path:
    """The working directory of every command: it must stay empty."""
    path = tmp_path / "scratch"
    path.mkdir()
    return path


def held(target: list[str], scratch: Path, keyring_json: str | None = None) -> dict[str, Any]:
    """Work held for approval, submitted by ``service:api`` through ``target``."""
    run = ok(
        feltdb(
            "submit", "send", "--approval", "--as", "service:api", "--json", *target,
            cwd=scratch, keyring_json=keyring_json,
        )
    )  # fmt: skip
    document: dict[str, Any] = json.loads(run.stdout)  # stdout stays JSON only
    workload: dict[str, Any] = document["workload"]
    return workload


def test_deciding_on_a_store_file_elsewhere_uses_its_keyring_and_says_so(
    tmp_path: Path, scratch: Path
):
    store = tmp_path / "store" / "work.db"
    store.parent.mkdir()
    beside = store.parent / "feltdb-keyring.json"
    first = feltdb("submit", "send", "--approval", "--as", "service:api", "--db", str(store),
                   cwd=scratch)  # fmt: skip
    ok(first)
    assert f"created keyring {beside} beside the store" in first.stderr
    workload_id = first.stdout.split()[1]
    for command in (["approve", workload_id], ["reject", workload_id, "--reason", "late"]):
        run = feltdb(*command, "--db", str(store), cwd=scratch)
        assert f"using keyring {beside}" in run.stderr, (command, run.stderr)
    assert list(scratch.iterdir()) == []  # no keyring beside the caller
    assert sorted(p.name for p in store.parent.iterdir() if not p.name.startswith("work.db")) == [
        "feltdb-keyring.json"
    ]


@pytest.mark.parametrize(
    "command",
    [
        ["reject", "workload_x", "--reason", "no"],
        ["approve", "workload_x"],
        ["submit", "send", "--approval"],
    ],
    ids=["reject", "approve", "submit"],
)
def test_a_decision_on_a_database_with_no_keyring_given_is_refused_and_writes_nothing(
    scratch: Path, command: list[str]
):
    run = feltdb(*command, "--db", NOWHERE, cwd=scratch)
    assert run.returncode == 2, (run.stdout, run.stderr)
    assert "Traceback" not in run.stderr
    lines = [line for line in run.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, run.stderr
    said = lines[0]
    assert said.startswith("error: ") and "--keyring PATH" in said and "FELTDB_KEYRING" in said
    assert "feltdb keys new --out PATH" in said
    assert "secret" not in said  # the URL's password is not repeated
    assert list(scratch.iterdir()) == []


def test_a_keyring_file_that_does_not_exist_is_refused_not_made(tmp_path: Path, scratch: Path):
    store = tmp_path / "work.db"
    WorkloadStore.open(store).close()
    missing = tmp_path / "keys" / "typo.json"
    for command in (["approve", "workload_x"], ["submit", "send"]):
        run = feltdb(*command, "--db", str(store), "--keyring", str(missing), cwd=scratch)
        assert run.returncode == 2, (command, run.stdout, run.stderr)
        assert f"no keyring at {missing} (--keyring)" in run.stderr
        assert f"feltdb keys new --out {missing}" in run.stderr
    assert not missing.parent.exists()
    assert not (tmp_path / "feltdb-keyring.json").exists()  # nor one beside the store
    assert list(scratch.iterdir()) == []


def test_the_environments_keyring_is_used_and_named_and_nothing_is_written(
    tmp_path: Path, scratch: Path
):
    store = tmp_path / "work.db"
    ring = Keyring.generate()
    workload = held(["--db", str(store)], scratch, keyring_json=ring.to_json())
    run = ok(feltdb("approve", workload["workload_id"], "--db", str(store), cwd=scratch,
                    keyring_json=ring.to_json()))  # fmt: skip
    assert "using keyring from FELTDB_KEYRING" in run.stderr
    with WorkloadStore.open(store) as opened:
        kept = opened.get(workload["workload_id"]).authorization_snapshot
    assert ring.verify_evidence(kept, int(time.time())).subject.id == "api"
    assert not (tmp_path / "feltdb-keyring.json").exists()
    assert list(scratch.iterdir()) == []


def test_on_postgresql_decisions_sign_with_the_keyring_given_and_nothing_lands_here(
    tmp_path: Path, scratch: Path, new_pg_url: Callable[..., str]
):
    url = new_pg_url()
    keyring = tmp_path / "keys" / "servers.json"
    keyring.parent.mkdir()
    ring = Keyring.generate()
    ring.save(keyring)
    target = ["--db", url, "--keyring", str(keyring)]
    first, second = held(target, scratch), held(target, scratch)
    approved = ok(feltdb("approve", first["workload_id"], *target, cwd=scratch))
    assert f"using keyring {keyring}" in approved.stderr
    assert "approved" in approved.stdout
    # A command that signs nothing needs no keyring, on a database too.
    cancelled = ok(feltdb("cancel", second["workload_id"], "--db", url, cwd=scratch))
    assert "keyring" not in cancelled.stderr
    with WorkloadStore.open(url) as store:
        done = store.get(first["workload_id"])
        assert store.get(second["workload_id"]).state is WorkloadState.CANCELLED
    assert done.approval is not None and done.approval.decision is not None
    assert ring.verify_evidence(done.authorization_snapshot, int(time.time()))
    assert list(scratch.iterdir()) == []
    assert sorted(keyring.parent.iterdir()) == [keyring]
