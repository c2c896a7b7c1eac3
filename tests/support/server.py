"""Helpers for the server tests: a real ``feltdb serve`` process and tokens for it.

Every wait here is bounded: a server that does not become healthy fails the test with its
log, and :func:`stop` kills a server that does not exit after SIGTERM.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from feltdb import Grant, GrantStatus, ResourceScope, ResourceScopeKind, Subject
from feltdb.auth.grants import GrantConstraints, new_grant_id
from feltdb.auth.policy import ALL_CAPABILITIES
from feltdb.auth.tokens import Keyring

START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 10.0
WORK_CAPABILITY = "email:send"
"""What the tests' workloads require and their workers hold."""


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def serve_command(*args: str) -> list[str]:
    """``feltdb serve ARGS`` with this interpreter (the venv's), whatever PATH says."""
    return [sys.executable, "-c", "from feltdb.cli import main; main()", "serve", *args]


def wait_until_healthy(
    url: str, process: subprocess.Popen[bytes], log: Path, *, path: str = "/healthz"
) -> None:
    """Poll ``url`` + ``path`` until it answers, the process exits, or the timeout passes."""
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"the server exited with {process.returncode}:\n{log.read_text()}")
        try:
            if httpx.get(f"{url}{path}", timeout=1.0).status_code == 200:
                return
        except httpx.TransportError:
            pass
        try:
            process.wait(timeout=0.05)  # the pause between polls, watching for an exit
        except subprocess.TimeoutExpired:
            pass
    pytest.fail(f"the server did not become healthy in {START_TIMEOUT_S}s:\n{log.read_text()}")


def stop(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM (uvicorn shuts down gracefully), then SIGKILL if it does not exit in time."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=STOP_TIMEOUT_S)


@dataclass
class Server:
    url: str
    keyring: Keyring
    process: subprocess.Popen[bytes]
    log: Path
    backend: str = "sqlite"
    """The store it serves: ``"sqlite"`` (a file) or ``"postgres"`` (a database)."""
    target: str = ""
    """The ``--db`` it serves (a file path or a PostgreSQL URL), to open the store behind
    its back."""

    def grant(
        self,
        application: str,
        *,
        subject: Subject | None = None,
        tenant: str = "t",
        capabilities: Iterable[str] = (*ALL_CAPABILITIES, WORK_CAPABILITY),
        resources: Iterable[str] | None = None,
        issued_at: int | None = None,
        lifetime: int = 3600,
        status: GrantStatus = GrantStatus.ACTIVE,
        environments: Iterable[str] = (),
    ) -> Grant:
        now = int(time.time())
        start = issued_at if issued_at is not None else now - 60
        uris = resources if resources is not None else [f"flow://{application}/workloads/*"]
        return Grant(
            id=new_grant_id(),
            issuer=Subject.human("issuer"),
            subject=subject if subject is not None else Subject.worker("w1"),
            tenant_id=tenant,
            application_id=application,
            capabilities=frozenset(capabilities),
            resources=[ResourceScope(kind=ResourceScopeKind.WORKLOAD, uri=u) for u in uris],
            issued_at=start,
            expires_at=start + lifetime,
            status=status,
            constraints=GrantConstraints(environments=frozenset(environments)),
        )

    def token(self, application: str, **grant: Any) -> str:
        return self.keyring.sign(self.grant(application, **grant))

    def headers(self, application: str, **grant: Any) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token(application, **grant)}"}


def submission(key: str = "one", **overrides: Any) -> dict[str, Any]:
    """The body of a submission (the token supplies the requester, tenant and app)."""
    body: dict[str, Any] = {
        "environment": "production",
        "definition_id": "send",
        "definition_revision": "r1",
        "trigger": "manual",
        "input": {"to": "ada@example.com"},
        "capability_snapshot": [WORK_CAPABILITY],
        "idempotency_key": key,
    }
    body.update(overrides)
    return body


def start_server(
    home: Path, *args: str, env_extra: dict[str, str] | None = None
) -> tuple[subprocess.Popen[bytes], str, Path]:
    """Start ``feltdb serve ARGS --port <free>`` in ``home`` (with ``env_extra`` added to a
    clean environment); returns the process, its URL and its log file. The caller must
    :func:`stop` it.
    """
    port = free_port()
    log = home / "server.log"
    env = {k: v for k, v in os.environ.items() if not k.startswith("FELTDB_")}
    env.update(env_extra or {})
    with log.open("wb") as output:
        process = subprocess.Popen(
            serve_command(*args, "--port", str(port)),
            stdout=output,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=home,
        )
    return process, f"http://127.0.0.1:{port}", log


def serve(
    home: Path, target: str | None = None, *args: str, backend: str = "sqlite"
) -> Iterator[Server]:
    """``feltdb serve --db TARGET ARGS`` (default target: ``home/work.db``) with a new
    keyring written to ``home``; yields the healthy server and stops it when the generator
    is closed, even after a failure. For fixtures: ``yield from serve(home)``.
    """
    keyring = Keyring.generate()
    keyring.save(home / "keyring.json")
    where = target if target is not None else str(home / "work.db")
    if "--sign-ins-per-client" not in args:
        # Every test signs in from 127.0.0.1: one client address, many sign-ins a minute.
        args = (*args, "--sign-ins-per-client", "1000000")
    process, url, log = start_server(
        home, "--db", where, "--keyring", str(home / "keyring.json"), *args
    )
    try:
        wait_until_healthy(url, process, log)
        yield Server(url, keyring, process, log, backend, where)
    finally:
        stop(process)


def serve_several(
    folder: Path, target: str, backend: str, names: Iterable[str], *args: str
) -> Iterator[list[Server]]:
    """``feltdb serve --db TARGET ARGS`` once per name (each in ``folder/NAME``), all
    sharing one new keyring; yields the healthy servers and stops them all when the
    generator is closed, even after a failure. For fixtures: ``yield from serve_several(…)``.
    """
    keyring = Keyring.generate()
    keyring_path = folder / "keyring.json"
    keyring.save(keyring_path)
    started: list[Server] = []
    try:
        for name in names:
            home = folder / name
            home.mkdir()
            process, base, log = start_server(
                home, "--db", target, "--keyring", str(keyring_path), *args
            )
            started.append(Server(base, keyring, process, log, backend, target))
            wait_until_healthy(base, process, log)
        yield started
    finally:
        for server in started:
            stop(server.process)
