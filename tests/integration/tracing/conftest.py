"""Traces of one test, read from OpenTelemetry's in-memory exporter.

``spans`` sets a tracer provider (the SDK's, exporting to an ``InMemorySpanExporter``) as
the process's global one for the test, and takes it away after: OpenTelemetry lets a
process set its global provider once, so the fixture resets it as OpenTelemetry's own test
utilities do (``reset_trace_globals``), leaving tracing off for the tests that follow.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.util._once import Once


def _reset_global_provider() -> None:
    trace._TRACER_PROVIDER_SET_ONCE = Once()  # type: ignore[attr-defined]
    trace._TRACER_PROVIDER = None  # type: ignore[attr-defined]


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    _reset_global_provider()
    trace.set_tracer_provider(provider)
    try:
        yield exporter
    finally:
        _reset_global_provider()
        provider.shutdown()


@pytest.fixture
def tracer(spans: InMemorySpanExporter) -> trace.Tracer:
    """A tracer of the test's provider (the caller's spans: a submitter's, a handler's)."""
    return trace.get_tracer("tests.caller")
