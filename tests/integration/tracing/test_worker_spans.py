"""A worker continues the trace its work was submitted in, on each backend: work admitted
inside a span (through the store, or a LocalClient) keeps that span's context, and the
worker's claim, run, checkpoint, complete and fail spans join its trace.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode, Tracer
from support.factories import SIGNER, make_grant, make_request
from support.spans import TRACE_ID, TRACEPARENT, named, one, parent_id, span_id, trace_id

from feltdb import Subject, WorkloadState, WorkloadStore
from feltdb.auth.scope import Scope
from feltdb.client import LocalClient
from feltdb.records.workload import WorkloadRetryPolicy
from feltdb.worker import Context, Permanent, Worker


@pytest.fixture
def store(new_target: Callable[..., str]) -> Iterator[WorkloadStore]:
    with WorkloadStore.open(new_target("work")) as opened:
        yield opened


def make_worker(store: WorkloadStore, **options: Any) -> Worker:
    return Worker(
        store=store, tenant="t", application="app", capabilities={"email:send"}, name="w1",
        **options,
    )  # fmt: skip


def admit(store: WorkloadStore, key: str, **fields: Any) -> str:
    request = make_request(idempotency_key=key, created_at=int(time.time()), **fields)
    workload, created = store.admit(request)
    assert created
    return workload.workload_id


@pytest.mark.parametrize("completion_batch", [1, 100], ids=["single", "batched"])
def test_the_runs_spans_join_the_submitters_trace(
    store: WorkloadStore, spans: InMemorySpanExporter, tracer: Tracer, completion_batch: int
) -> None:
    with tracer.start_as_current_span("checkout") as submitting:
        workload_id = admit(store, "one")
    context = submitting.get_span_context()
    stored = store.get(workload_id).trace_context
    assert stored is not None
    assert stored["traceparent"].startswith(f"00-{context.trace_id:032x}-{context.span_id:016x}-")

    worker = make_worker(store, completion_batch=completion_batch)

    @worker.handler("send")
    def send(ctx: Context) -> dict[str, int]:
        ctx.checkpoint({"step": 1})
        with tracer.start_as_current_span("smtp"):  # the handler's own span
            pass
        return {"sent": 1}

    assert worker.drain() == 1
    assert store.get(workload_id).state is WorkloadState.SUCCEEDED
    claim, run = one(spans, "feltdb.claim"), one(spans, "feltdb.run")
    for span in (claim, run):
        assert trace_id(span) == context.trace_id and parent_id(span) == context.span_id
        assert span.attributes is not None
        assert span.attributes["feltdb.workload_id"] == workload_id
        assert span.attributes["feltdb.definition_id"] == "send"
        assert span.attributes["feltdb.attempt"] == 1
        assert span.attributes["feltdb.tenant_id"] == "t"
        assert span.attributes["feltdb.application_id"] == "app"
        assert span.attributes["feltdb.worker"] == "worker:w1"
    for name in ("feltdb.checkpoint", "feltdb.complete", "smtp"):
        child = one(spans, name)
        assert trace_id(child) == context.trace_id and parent_id(child) == span_id(run)
    assert run.status.status_code is StatusCode.UNSET
    assert not named(spans, "feltdb.fail")


def test_a_failed_attempt_is_a_failed_run_and_a_fail_span(
    store: WorkloadStore, spans: InMemorySpanExporter, tracer: Tracer
) -> None:
    requester = LocalClient(
        store, Scope("t", "app"), Subject.agent("a1"), grant=SIGNER.sign(make_grant())
    )
    with tracer.start_as_current_span("request") as submitting:
        workload, _ = requester.admit(
            definition_id="send", input={}, capability_snapshot=["email:send"],
            retry_policy={"max_attempts": 1},
        )  # fmt: skip
    worker = make_worker(store)

    @worker.handler("send")
    def send(ctx: Context) -> None:
        raise Permanent("no recipient")

    assert worker.drain() == 1
    assert store.get(workload.workload_id).state is WorkloadState.DEAD_LETTER
    context = submitting.get_span_context()
    run, fail = one(spans, "feltdb.run"), one(spans, "feltdb.fail")
    assert trace_id(run) == context.trace_id and parent_id(run) == context.span_id
    assert run.status.status_code is StatusCode.ERROR
    assert "no recipient" in (run.status.description or "")
    assert parent_id(fail) == span_id(run) and trace_id(fail) == context.trace_id
    assert fail.attributes is not None and fail.attributes["feltdb.failure.kind"] == "permanent"
    assert not named(spans, "feltdb.complete")


def test_work_submitted_in_another_trace_keeps_its_own(
    store: WorkloadStore, spans: InMemorySpanExporter, tracer: Tracer
) -> None:
    # A context named by the submission (a caller in another process) wins over the
    # current span, and each workload's spans join its own trace.
    with tracer.start_as_current_span("local") as local:
        named_id = admit(store, "named", trace_context={"traceparent": TRACEPARENT})
        current_id = admit(store, "current")
    untraced_id = admit(store, "untraced", retry_policy=WorkloadRetryPolicy(max_attempts=1))
    assert store.get(untraced_id).trace_context is None  # no span was current
    worker = make_worker(store, concurrency=3)
    worker.handler("send")(lambda ctx: {"ok": True})

    assert worker.drain() == 3
    runs = {span.attributes["feltdb.workload_id"]: span for span in named(spans, "feltdb.run")}  # type: ignore[index]
    assert trace_id(runs[named_id]) == TRACE_ID
    assert trace_id(runs[current_id]) == local.get_span_context().trace_id
    assert runs[untraced_id].parent is None  # a trace of its own


def test_an_async_handlers_spans_nest_under_its_run(
    store: WorkloadStore, spans: InMemorySpanExporter, tracer: Tracer
) -> None:
    with tracer.start_as_current_span("submit"):
        admit(store, "one")
    worker = make_worker(store)

    @worker.handler("send")
    async def send(ctx: Context) -> dict[str, int]:
        with tracer.start_as_current_span("async-smtp"):
            return {"sent": 1}

    assert worker.drain() == 1
    assert parent_id(one(spans, "async-smtp")) == span_id(one(spans, "feltdb.run"))
