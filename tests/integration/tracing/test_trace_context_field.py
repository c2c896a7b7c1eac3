"""The stored trace context: bounded where it enters, declared in the OpenAPI, kept by the
store on each backend, given by ``feltdb submit --traceparent`` (or ``$TRACEPARENT``), and
not part of what an idempotent replay compares: a retry from another trace answers the
original workload, which keeps its first context.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.trace import Tracer
from support.cli import invoke
from support.factories import make_request
from support.spans import TRACEPARENT

from feltdb import WorkloadError, WorkloadStore
from feltdb.errors import ErrorCode
from feltdb.fields import MAX_TRACESTATE_CHARS
from feltdb.server.openapi import SUBMISSION_SCHEMA

OTHER = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


@pytest.fixture
def store(new_target: Callable[..., str]) -> Iterator[WorkloadStore]:
    with WorkloadStore.open(new_target("work")) as opened:
        yield opened


@pytest.mark.parametrize(
    "carrier",
    [
        {"tracestate": "k=v"},  # no traceparent
        {"traceparent": TRACEPARENT.upper()},
        {"traceparent": "01" + TRACEPARENT[2:]},  # a version this bound does not know
        {"traceparent": TRACEPARENT + "\n"},
        {"traceparent": TRACEPARENT, "baggage": "a=b"},
        {"traceparent": TRACEPARENT, "tracestate": "k=" + "v" * (MAX_TRACESTATE_CHARS - 1)},
        {"traceparent": TRACEPARENT, "tracestate": "k=\x00"},
    ],
)
def test_a_malformed_or_oversized_context_is_refused_naming_it(carrier: dict[str, Any]) -> None:
    with pytest.raises(WorkloadError) as refused:
        make_request(trace_context=carrier)
    assert refused.value.code == ErrorCode.WORKLOAD_INVALID
    assert refused.value.details["fields"] == ["trace_context"]


def test_the_openapi_declares_the_bound() -> None:
    [declared, _] = SUBMISSION_SCHEMA["properties"]["trace_context"]["anyOf"]
    assert declared["required"] == ["traceparent"]
    assert declared["additionalProperties"] is False
    assert declared["properties"]["tracestate"]["maxLength"] == MAX_TRACESTATE_CHARS


def test_a_replay_from_another_trace_answers_the_original(store: WorkloadStore) -> None:
    now = int(time.time())
    first = {"traceparent": TRACEPARENT, "tracestate": "vendor=1"}
    original, created = store.admit(
        make_request(idempotency_key="one", trace_context=first, created_at=now)
    )
    assert created and original.trace_context == first
    for again in ({"traceparent": OTHER}, None):
        replayed, created = store.admit(
            make_request(idempotency_key="one", trace_context=again, created_at=now + 1)
        )
        assert not created and replayed.workload_id == original.workload_id
        assert store.get(original.workload_id).trace_context == first
    # A request that differs otherwise is still refused, naming only what differs.
    with pytest.raises(WorkloadError) as refused:
        store.admit(make_request(idempotency_key="one", priority=5, trace_context=first))
    assert refused.value.details["fields"] == ["priority"]


def test_a_replay_inside_another_span_answers_the_original(
    store: WorkloadStore, spans: object, tracer: Tracer
) -> None:
    with tracer.start_as_current_span("first") as first:
        original, _ = store.admit(make_request(idempotency_key="one"))
    with tracer.start_as_current_span("retry"):
        replayed, created = store.admit(make_request(idempotency_key="one"))
    assert not created and replayed.workload_id == original.workload_id
    assert replayed.trace_context == original.trace_context
    assert original.trace_context is not None
    assert f"{first.get_span_context().span_id:016x}" in original.trace_context["traceparent"]


def test_feltdb_submit_takes_a_traceparent(tmp_path: Path) -> None:
    db = str(tmp_path / "work.db")
    given = invoke("submit", "send", "--db", db, "--json", "--traceparent", TRACEPARENT)
    assert given.exit_code == 0, given.output
    from_env = invoke("submit", "send", "--db", db, "--json", env={"TRACEPARENT": OTHER})
    assert from_env.exit_code == 0, from_env.output
    with WorkloadStore.open(db) as store:
        for result, traceparent in ((given, TRACEPARENT), (from_env, OTHER)):
            workload_id = json.loads(result.stdout)["workload"]["workload_id"]
            stored = store.get(workload_id).trace_context
            assert stored == {"traceparent": traceparent}
    bad = invoke("submit", "send", "--db", db, "--traceparent", "nope")
    assert bad.exit_code != 0 and "trace_context" in bad.output
    assert "Traceback" not in bad.output
