"""The worker runtime over HTTP: an in-process ``Worker(url, token=…)`` against a real
``feltdb serve`` process, with a worker token that holds ``workload:claim`` and the work's
capability but not ``workload:read`` (a worker reads only the work it holds).
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from support.server import WORK_CAPABILITY, Server, serve, submission

from feltdb import Subject
from feltdb.auth.policy import CLAIM, READ, SUBMIT
from feltdb.client import AsyncClient, Client, ClientError
from feltdb.errors import ErrorCode
from feltdb.records.workload import Workload
from feltdb.work.states import WorkloadState
from feltdb.worker import Context, Worker


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    yield from serve(tmp_path_factory.mktemp("worker-http"))


@pytest.fixture
def app() -> str:
    return f"app-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def operator(server: Server, app: str) -> Iterator[Client]:
    with Client(server.url, server.token(app, subject=Subject.human("ops"))) as client:
        yield client


def submit(operator: Client, **overrides: Any) -> Workload:
    fields = submission(uuid.uuid4().hex, **overrides)
    workload, created = operator.admit(**fields)
    assert created
    return workload


def http_worker(server: Server, app: str, **options: Any) -> Worker:
    token = server.token(app, subject=Subject.worker("w1"), capabilities={CLAIM, WORK_CAPABILITY})
    options.setdefault("capabilities", {WORK_CAPABILITY})
    return Worker(server.url, token=token, lease_ms=3000, **options)


def test_a_worker_over_http_runs_sync_and_async_handlers(
    server: Server, app: str, operator: Client
) -> None:
    sync = submit(operator, definition_id="send", input={"n": 1})
    later = submit(operator, definition_id="asend", input={"n": 2})
    worker = http_worker(server, app, concurrency=2)

    @worker.handler("send")
    def send(ctx: Context) -> Any:
        ctx.checkpoint({"step": 1})
        return {"n": ctx.input["n"]}

    @worker.handler("asend")
    async def asend(ctx: Context) -> Any:
        return {"n": ctx.input["n"], "async": True}

    assert worker.drain() == 2
    first, second = operator.get(sync.workload_id), operator.get(later.workload_id)
    assert first.state is WorkloadState.SUCCEEDED and second.state is WorkloadState.SUCCEEDED
    assert first.result is not None and first.result.output == {"n": 1}
    assert second.result is not None and second.result.output == {"n": 2, "async": True}
    assert first.attempts[0].worker_id == "worker:w1"  # the token's subject


def test_a_worker_claims_only_what_its_capabilities_cover(
    server: Server, app: str, operator: Client
) -> None:
    waiting = submit(operator)
    worker = http_worker(server, app, capabilities={"sms:send"})
    worker.handler("send")(lambda ctx: {})
    assert worker.drain() == 0
    assert operator.get(waiting.workload_id).state is WorkloadState.READY


def test_a_completion_whose_answer_was_lost_is_resent_with_the_same_result_id(
    server: Server, app: str, operator: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    workload = submit(operator)
    worker = http_worker(server, app)
    worker.handler("send")(lambda ctx: {"sent": 1})
    sent: list[str] = []
    original = Client.complete

    def lose_the_first_answer(self: Client, *args: Any, **kwargs: Any) -> Any:
        answer = original(self, *args, **kwargs)  # committed by the server
        sent.append(args[3])  # the result id
        if len(sent) == 1:
            raise ClientError(ErrorCode.WORKLOAD_STORAGE_FAILURE, "connection reset")
        return answer

    monkeypatch.setattr(Client, "complete", lose_the_first_answer)
    assert worker.drain() == 1
    assert len(sent) == 2 and sent[0] == sent[1]
    done = operator.get(workload.workload_id)
    assert done.state is WorkloadState.SUCCEEDED
    assert done.result is not None and done.result.result_id == sent[0]
    assert [e.to for e in done.execution_history].count(WorkloadState.SUCCEEDED) == 1


def test_cancellation_reaches_the_handler_through_the_heartbeat(
    server: Server, app: str, operator: Client
) -> None:
    workload = submit(operator)
    worker = http_worker(server, app)
    running, saw_cancel = threading.Event(), threading.Event()

    @worker.handler("send")
    def send(ctx: Context) -> Any:
        running.set()
        if ctx.cancelled.wait(15):
            saw_cancel.set()
        return {"ignored": True}

    drain = threading.Thread(target=worker.drain, daemon=True)
    drain.start()
    assert running.wait(10)
    assert operator.cancel(workload.workload_id) is WorkloadState.CANCELLATION_REQUESTED
    drain.join(20)
    assert not drain.is_alive()
    assert saw_cancel.is_set()
    done = operator.get(workload.workload_id)
    assert done.state is WorkloadState.CANCELLED
    assert done.result is None


def test_a_worker_warns_at_start_of_capabilities_its_token_lacks(
    server: Server, app: str, caplog: pytest.LogCaptureFixture
) -> None:
    token = server.token(app, subject=Subject.worker("w7"), capabilities={CLAIM})
    worker = Worker(server.url, token=token, capabilities={"email:send", "sms:send"})

    @worker.handler("send")
    def send(ctx: Context) -> Any:
        return {}

    with caplog.at_level("WARNING", logger="feltdb.worker"):
        assert worker.drain() == 0
    warned = [r.getMessage() for r in caplog.records if "does not hold" in r.getMessage()]
    assert warned and "email:send, sms:send" in warned[0]


def test_an_async_handler_awaits_an_async_client_of_the_server(
    server: Server, app: str, operator: Client
) -> None:
    """An ``async`` handler runs on the worker's event loop: it may await an
    :class:`AsyncClient` call (here: read its own work, admit a follow-up with a token that
    may submit, which the worker's own need not hold) without blocking that loop.
    """
    first = submit(operator, definition_id="chain", input={"to": "ada@example.com"})
    requester = server.token(app, subject=Subject.service("chain"), capabilities={SUBMIT, READ})
    worker = http_worker(server, app)

    @worker.handler("chain")
    async def chain(ctx: Context) -> Any:
        async with AsyncClient(server.url, token=requester) as felt:
            running = await felt.get(ctx.workload.workload_id)
            follow, created = await felt.admit(
                definition_id="notify",
                input={"after": running.workload_id},
                idempotency_key=f"after-{running.workload_id}",
            )
        return {"seen": str(running.state), "follow_up": follow.workload_id, "created": created}

    assert worker.drain() == 1
    done = operator.get(first.workload_id)
    assert done.state is WorkloadState.SUCCEEDED and done.result is not None
    output = done.result.output
    assert (output["seen"], output["created"]) == ("RUNNING", True)
    follow = operator.get(output["follow_up"])
    assert follow.state is WorkloadState.READY and follow.definition_id == "notify"
    assert follow.input == {"after": first.workload_id}
    assert follow.requested_by == Subject.service("chain")
