"""Client and server spans are one trace: the HTTP client sends ``traceparent`` and the
submission's trace context; the server's span of a request (FastAPI's own) joins the trace
the header names, and work submitted without a context keeps the server's.

The app runs in process (an httpx transport calling it, each request in a context of its
own as a server's would be), so its spans reach the test's in-memory exporter; a ``feltdb
serve`` process could not share it.
"""

from __future__ import annotations

import asyncio
import contextvars
import time
from collections.abc import Iterator

import httpx
import pytest
from fastapi import FastAPI
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, Tracer
from support.spans import SPAN_ID, TRACE_ID, TRACEPARENT, one, parent_id, span_id, trace_id

from feltdb import Subject, WorkloadStore
from feltdb.auth.policy import CLAIM, application_grant
from feltdb.auth.tokens import Keyring
from feltdb.client import AsyncClient, Client
from feltdb.records.workload import Workload
from feltdb.server.app import create_app
from feltdb.worker import Context, Worker

KEYRING = Keyring.generate()


def token(subject: Subject, capabilities: set[str]) -> str:
    now = int(time.time())
    grant = application_grant(
        subject, "t", "app", capabilities, issued_at=now - 5, expires_at=now + 600
    )
    return KEYRING.sign(grant)


REQUESTER = token(Subject.service("billing"), {"workload:execute", "workload:read"})
WORKER = token(Subject.worker("w1"), {CLAIM, "email:send"})


@pytest.fixture
def store(tmp_path) -> Iterator[WorkloadStore]:
    with WorkloadStore.open(tmp_path / "work.db") as opened:
        yield opened


class InProcess(httpx.BaseTransport):
    """A synchronous transport answering each request by ``app`` (the ASGI app) in this
    process, in an empty context: the app sees no span of its caller but the headers'.
    """

    def __init__(self, app: FastAPI) -> None:
        self.asgi = httpx.ASGITransport(app=app)

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        async def answer() -> httpx.Response:
            response = await self.asgi.handle_async_request(request)
            content = await response.aread()
            return httpx.Response(response.status_code, headers=response.headers, content=content)

        return contextvars.Context().run(asyncio.run, answer())


@pytest.fixture
def transport(store: WorkloadStore) -> InProcess:
    return InProcess(create_app(store, KEYRING, maintenance_interval_s=None))


@pytest.fixture
def http(transport: InProcess) -> Iterator[httpx.Client]:
    with httpx.Client(transport=transport, base_url="http://feltdb.test") as client:
        yield client


def client_of(transport: InProcess, bearer: str) -> Client:
    """A :class:`Client` whose requests go to the in-process app."""
    client = Client("http://feltdb.test", bearer)
    client._http.close()
    client._http = httpx.Client(
        transport=transport,
        base_url=client.url,
        headers={"Authorization": f"Bearer {bearer}", "Accept": "application/json"},
    )
    return client


def body(key: str) -> dict[str, object]:
    return {
        "definition_id": "send",
        "input": {"to": "ada@example.com"},
        "capability_snapshot": ["email:send"],
        "idempotency_key": key,
    }


def test_the_servers_span_joins_the_trace_its_request_names(
    http: httpx.Client, spans: InMemorySpanExporter
) -> None:
    answer = http.post(
        "/v1/workloads",
        json=body("one"),
        headers={"Authorization": f"Bearer {REQUESTER}", "traceparent": TRACEPARENT},
    )
    assert answer.status_code == 201, answer.text

    server = one(spans, "POST /v1/workloads")
    assert server.kind is SpanKind.SERVER
    assert trace_id(server) == TRACE_ID and parent_id(server) == SPAN_ID
    # Submitted with no context of its own: the work keeps the server's, in the same trace.
    stored = answer.json()["trace_context"]["traceparent"]
    assert stored.startswith(f"00-{TRACE_ID:032x}-")
    server_side = {span_id(span) for span in spans.get_finished_spans()}
    assert int(stored.split("-")[2], 16) in server_side


def test_a_request_without_a_trace_is_a_trace_of_its_own_and_keeps_none(
    http: httpx.Client, spans: InMemorySpanExporter
) -> None:
    answer = http.post(
        "/v1/workloads", json=body("one"), headers={"Authorization": f"Bearer {REQUESTER}"}
    )
    assert answer.status_code == 201, answer.text
    assert one(spans, "POST /v1/workloads").parent is None
    # The server traces, so the work keeps its span's context (a root of its own).
    assert answer.json()["trace_context"]["traceparent"].startswith("00-")


def test_the_client_sends_its_trace_and_the_worker_continues_it(
    transport: InProcess, spans: InMemorySpanExporter, tracer: Tracer
) -> None:
    requester = client_of(transport, REQUESTER)
    with tracer.start_as_current_span("checkout") as calling:
        workload, created = requester.admit(
            definition_id="send", input={"n": 1}, capability_snapshot=["email:send"]
        )
    assert created
    caller = calling.get_span_context()
    # The body named the caller's span; the header made the server's span its child.
    assert workload.trace_context is not None
    assert workload.trace_context["traceparent"].startswith(
        f"00-{caller.trace_id:032x}-{caller.span_id:016x}-"
    )
    server = one(spans, "POST /v1/workloads")
    assert trace_id(server) == caller.trace_id and parent_id(server) == caller.span_id

    # One completion a call: made under the run (a batch's call is made for many traces).
    worker = Worker(
        client=client_of(transport, WORKER), capabilities={"email:send"}, completion_batch=1
    )

    @worker.handler("send")
    def send(ctx: Context) -> dict[str, int]:
        return {"sent": ctx.input["n"]}

    assert worker.drain() == 1
    run = one(spans, "feltdb.run")
    assert trace_id(run) == caller.trace_id and parent_id(run) == caller.span_id
    # The worker's completion, sent under its run, is a server span of the same trace.
    completing = one(spans, "POST /v1/workloads/{workload_id}/complete")
    assert trace_id(completing) == caller.trace_id
    assert parent_id(completing) == span_id(one(spans, "feltdb.complete"))


class InProcessAsync(httpx.AsyncBaseTransport):
    """:class:`InProcess` for an ``httpx.AsyncClient``: each request answered by the app
    in a task of an empty context, and kept, to be read."""

    def __init__(self, app: FastAPI) -> None:
        self.asgi = httpx.ASGITransport(app=app)
        self.sent: list[httpx.Request] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.sent.append(request)
        answering = self.asgi.handle_async_request(request)
        response = await asyncio.create_task(answering, context=contextvars.Context())
        return httpx.Response(
            response.status_code, headers=response.headers, content=await response.aread()
        )


def test_the_async_client_sends_its_trace_as_the_client_does(
    store: WorkloadStore, spans: InMemorySpanExporter, tracer: Tracer
) -> None:
    transport = InProcessAsync(create_app(store, KEYRING, maintenance_interval_s=None))

    async def admitted() -> tuple[Workload, int, int]:
        async with AsyncClient("http://feltdb.test", REQUESTER) as requester:
            await requester._http.aclose()
            requester._http = httpx.AsyncClient(
                transport=transport,
                base_url=requester.url,
                headers={"Authorization": f"Bearer {REQUESTER}", "Accept": "application/json"},
            )
            with tracer.start_as_current_span("checkout") as calling:
                workload, _ = await requester.admit(
                    definition_id="send", input={"n": 1}, capability_snapshot=["email:send"]
                )
            caller = calling.get_span_context()
            return workload, caller.trace_id, caller.span_id

    workload, caller_trace, caller_span = asyncio.run(admitted())
    [request] = transport.sent
    assert request.headers["traceparent"].startswith(f"00-{caller_trace:032x}-")
    assert workload.trace_context is not None
    assert workload.trace_context["traceparent"].startswith(
        f"00-{caller_trace:032x}-{caller_span:016x}-"
    )
    server = one(spans, "POST /v1/workloads")
    assert trace_id(server) == caller_trace and parent_id(server) == caller_span
