"""Reading the spans of a test's in-memory exporter (tests/integration/tracing)."""

from __future__ import annotations

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

TRACEPARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
"""A caller's trace context, as W3C Trace Context's example writes it."""
TRACE_ID = int("0af7651916cd43dd8448eb211c80319c", 16)
SPAN_ID = int("b7ad6b7169203331", 16)


def named(exporter: InMemorySpanExporter, name: str) -> list[ReadableSpan]:
    """The finished spans called ``name``, in the order they ended."""
    return [span for span in exporter.get_finished_spans() if span.name == name]


def one(exporter: InMemorySpanExporter, name: str) -> ReadableSpan:
    """The one finished span called ``name``."""
    found = named(exporter, name)
    assert len(found) == 1, [span.name for span in exporter.get_finished_spans()]
    return found[0]


def parent_id(span: ReadableSpan) -> int:
    assert span.parent is not None, f"{span.name} has no parent"
    return span.parent.span_id


def trace_id(span: ReadableSpan) -> int:
    assert span.context is not None
    return span.context.trace_id


def span_id(span: ReadableSpan) -> int:
    assert span.context is not None
    return span.context.span_id
