"""Helpers for the tests of the operator commands: run ``feltdb`` in process, and the two
ways a test reaches the authority (:class:`Mode`): a store file (``--db``) or a server.
"""

from __future__ import annotations

import getpass
import json
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from typer.testing import CliRunner, Result

from feltdb import Subject, WorkloadState, WorkloadStore
from feltdb.cli import app
from feltdb.client import Client
from support.server import Server

runner = CliRunner()


def invoke(*args: str, env: dict[str, str] | None = None) -> Result:
    """Run ``feltdb ARGS`` in process, wide enough that no table folds an id."""
    return runner.invoke(app, list(args), env={"COLUMNS": "250", **(env or {})})


@dataclass
class Mode:
    """How a test reaches the authority: target options for the requester (who submits)
    and for the operator (who approves and operates; a human other than the requester),
    and a worker that can claim and fail work.
    """

    name: str
    requester: list[str]
    operator: list[str]
    operator_subject: Subject
    kill: Callable[[str], WorkloadState]
    """Claim, start and fail a workload with a kind no policy retries."""
    env: dict[str, str] = field(default_factory=dict)
    """What a subprocess needs in its environment besides its arguments."""

    def run(self, *args: str, who: str = "operator") -> Result:
        """``feltdb ARGS`` as the requester or the operator."""
        target = self.requester if who == "requester" else self.operator
        return invoke(*args, *target)

    def ok(self, *args: str, who: str = "operator") -> Result:
        result = self.run(*args, who=who)
        assert result.exit_code == 0, (result.output, result.stderr, result.exception)
        return result

    def submit(self, *args: str) -> str:
        """Submit as the requester; the new workload's id."""
        result = self.ok("submit", *args, "--json", who="requester")
        document: dict[str, Any] = json.loads(result.stdout)
        workload_id: str = document["workload"]["workload_id"]
        return workload_id


def db_mode(tmp_path: Path) -> Mode:
    """A store file that exists (read commands refuse a path with no store)."""
    db = str(tmp_path / "work.db")
    WorkloadStore.open(db).close()

    def kill(workload_id: str) -> WorkloadState:
        with WorkloadStore.open(db) as store:
            claim = store.claim(workload_id, "w1", set())
            store.start(workload_id, claim.claim_id, "w1", claim.fencing_token)
            return store.fail(
                workload_id, claim.claim_id, "w1", claim.fencing_token, "fatal", "boom"
            )

    return Mode(
        name="db",
        requester=["--db", db, "--as", "service:api"],
        operator=["--db", db],
        operator_subject=Subject.human(getpass.getuser()),
        kill=kill,
    )


def server_mode(server: Server) -> Mode:
    application = f"app-{uuid.uuid4().hex[:10]}"
    requester = server.token(application)  # worker:w1 holding every capability
    operator = server.token(application, subject=Subject.human("ada"))

    def kill(workload_id: str) -> WorkloadState:
        with Client(server.url, requester) as worker:
            claim = worker.claim(workload_id)
            worker.start(workload_id, claim.claim_id, claim.fencing_token)
            return worker.fail(workload_id, claim.claim_id, claim.fencing_token, "fatal", "boom")

    return Mode(
        name="server",
        requester=["--url", server.url, "--token", requester],
        operator=["--url", server.url, "--token", operator],
        operator_subject=Subject.human("ada"),
        kill=kill,
    )
