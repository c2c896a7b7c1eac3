"""Typed definitions through real processes, on each backend: a ``feltdb serve``, a
``feltdb worker`` process serving ``typed_tasks.py``'s definitions, and submissions through
``Definition.submit(Client(...), ...)`` in this process.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from support.server import Server, serve
from typed_tasks import EmailIn, EmailOut, InvoiceIn, InvoiceOut, send_email, total_invoice

from feltdb import Subject, WorkloadError, WorkloadState
from feltdb.auth.policy import CLAIM
from feltdb.client import Client

pytestmark = pytest.mark.multiprocess

TASKS = Path(__file__).parent
WAIT_S = 60.0
APP = "typed"


@pytest.fixture
def server(backend: str, new_target: Callable[..., str], tmp_path: Path) -> Iterator[Server]:
    yield from serve(tmp_path, new_target(), "--maintenance-interval", "0.2", backend=backend)


@pytest.fixture
def worker_process(server: Server, tmp_path: Path) -> Iterator[Path]:
    """``feltdb worker typed_tasks:worker`` for ``server``; yields its log once it runs."""
    token = server.token(APP, subject=Subject.worker("w1"), capabilities={CLAIM, "email:send"})
    env = {k: v for k, v in os.environ.items() if not k.startswith("FELTDB_")}
    env.update(
        PYTHONPATH=os.pathsep.join([str(TASKS), env.get("PYTHONPATH", "")]),
        FELTDB_URL=server.url,
        FELTDB_TOKEN=token,
    )
    log = tmp_path / "worker.log"
    command = [sys.executable, "-c", "from feltdb.cli import main; main()", "worker"]
    with log.open("wb") as output:
        process = subprocess.Popen(
            [*command, "typed_tasks:worker"], stdout=output, stderr=subprocess.STDOUT, env=env
        )
    try:
        wait_for(lambda: "worker worker:w1:" in log.read_text(), "the worker to start", log)
        yield log
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


def wait_for(condition: Callable[[], bool], what: str, log: Path) -> None:
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.1)
    pytest.fail(f"timed out waiting for {what}\n{log.read_text()}")


def test_typed_work_runs_in_a_worker_process_and_answers_its_models(
    server: Server, worker_process: Path
) -> None:
    requester = server.token(APP, subject=Subject.agent("billing-api"))
    with Client(server.url, requester) as client:
        good, created = send_email.submit(client, EmailIn(to="ada@example.com"), key="good")
        replayed, again = send_email.submit(client, {"to": "ada@example.com"}, key="good")
        invoice, _ = total_invoice.submit(client, InvoiceIn(invoice=42), key="invoice-42")
        broken, _ = send_email.submit(client, EmailIn(to="bob@broken.example"), key="broken")
        untyped, _ = client.admit(
            definition_id="send-email", input={"recipient": "eve"},
            capability_snapshot={"email:send"}, retry_policy={"max_attempts": 1},
            idempotency_key="untyped",
        )  # fmt: skip
        with pytest.raises(WorkloadError) as refused:
            send_email.submit(client, {"to": None}, key="never")

        ended = (WorkloadState.SUCCEEDED, WorkloadState.DEAD_LETTER)
        ids = [good.workload_id, invoice.workload_id, broken.workload_id, untyped.workload_id]
        wait_for(
            lambda: all(client.get(i).state in ended for i in ids), "the work to end",
            worker_process,
        )  # fmt: skip

        assert created and not again and replayed.workload_id == good.workload_id
        assert send_email.output_of(client.get(good.workload_id)) == EmailOut(
            message_id="<hello@ada@example.com>", accepted=True
        )
        assert total_invoice.output_of(client.get(invoice.workload_id)) == InvoiceOut(total=4200)
        # The handler's bad output: dead-lettered, the field named.
        bad_output = client.get(broken.workload_id)
        assert bad_output.state is WorkloadState.DEAD_LETTER and bad_output.result is None
        assert bad_output.last_failure == (
            "invalid_output: output does not match EmailOut: output.accepted: Field required"
        )
        # Input the worker's model cannot parse (submitted untyped): never handled.
        bad_input = client.get(untyped.workload_id)
        assert bad_input.state is WorkloadState.DEAD_LETTER
        assert bad_input.last_failure == (
            "invalid_input: input does not match EmailIn: input.to: Field required"
        )
        # Refused before it was sent: nothing admitted under its key.
        assert refused.value.code == "WORKLOAD_INVALID"
        assert refused.value.details == {"fields": ["input.to"]}
        assert len(client.list(limit=50).items) == 4
