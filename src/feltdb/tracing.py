"""OpenTelemetry traces, when the application uses them: the one module that touches it.

With the ``otel`` extra (``pip install 'feltdb[otel]'``) and a tracer provider set by the
application (``opentelemetry.trace.set_tracer_provider``, or its auto-instrumentation):

- a submission keeps the caller's W3C trace context (``trace_context``: ``traceparent``
  and ``tracestate``), filled in from the current span by the HTTP client and by the
  store, when the submission names none (:func:`current_trace_context`);
- the HTTP client sends ``traceparent`` with each request (:func:`inject_headers`), and
  FastAPI (0.142 and later) opens the server's span of the request under it, so client
  and server are one trace;
- a worker's spans continue the stored context: ``feltdb.claim`` and ``feltdb.run`` are
  children of the submitter's span, and ``feltdb.checkpoint``, ``feltdb.complete`` and
  ``feltdb.fail`` children of the run.

Otherwise nothing happens, and nothing is imported: tracing is on only in a process that
imported ``opentelemetry.trace`` itself and set a provider (:func:`tracer` looks at
``sys.modules``, so a process that never traces never loads OpenTelemetry because of
feltdb). Off, each hook costs a dictionary lookup, or a ``None`` check per attempt.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterable, Iterator, MutableMapping, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import TYPE_CHECKING, Any, TypeVar

from feltdb.fields import trace_context_problem

if TYPE_CHECKING:
    from opentelemetry.context import Context as OtelContext
    from opentelemetry.trace import Span as Span
    from opentelemetry.trace import Tracer

    from feltdb.records.workload import Workload
    from feltdb.work.claimed import ClaimedWork

__all__ = ["current_trace_context", "inject_headers", "tracer", "with_trace_context"]

H = TypeVar("H", bound=MutableMapping[str, str])
C = TypeVar("C", bound="Sequence[ClaimedWork]")

_TRACE_MODULE = "opentelemetry.trace"
_api: Any = None
"""``opentelemetry.trace``, once the application imported it."""
_cached: tuple[object, Tracer] | None = None
"""The provider last asked for a tracer, and its tracer (asked once per provider)."""
_NOTHING: AbstractContextManager[None] = nullcontext()


def tracer() -> Tracer | None:
    """The tracer of feltdb's spans, or ``None`` when tracing is off: OpenTelemetry was
    never imported by the application (or cannot be), or no tracer provider is set.
    """
    global _cached, _api
    api = _api
    if api is None:
        api = sys.modules.get(_TRACE_MODULE)
        if api is None:  # never imported: off, for the cost of this lookup
            return None
        _api = api  # kept, so no import statement is run per call
    provider = api.get_tracer_provider()
    if isinstance(provider, api.ProxyTracerProvider | api.NoOpTracerProvider):
        return None
    cached = _cached
    if cached is not None and cached[0] is provider:
        return cached[1]
    from feltdb import __version__

    made: Tracer = provider.get_tracer("feltdb", __version__)
    _cached = (provider, made)
    return made


def current_trace_context() -> dict[str, str] | None:
    """The current span's W3C trace context (``traceparent``, and ``tracestate`` when it
    fits the workload's bound), or ``None``: tracing is off, or no valid span is current.
    """
    if tracer() is None:
        return None
    from opentelemetry import trace
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    if not trace.get_current_span().get_span_context().is_valid:
        return None
    carrier: dict[str, str] = {}
    TraceContextTextMapPropagator().inject(carrier)
    if trace_context_problem(carrier) is not None:
        carrier.pop("tracestate", None)  # too long to keep: the trace goes on without it
    return carrier if trace_context_problem(carrier) is None else None


def with_trace_context(fields: dict[str, Any]) -> dict[str, Any]:
    """A submission's ``fields``, with the current span's trace context when they name
    none (:func:`current_trace_context`).
    """
    if fields.get("trace_context") is None:
        carrier = current_trace_context()
        if carrier is not None:
            fields["trace_context"] = carrier
    return fields


def inject_headers(headers: H) -> H:
    """``headers``, with the current context added (``traceparent``, and whatever else the
    application's propagators carry) when tracing is on and a span is current.
    """
    if tracer() is None:
        return headers
    from opentelemetry import propagate, trace

    if trace.get_current_span().get_span_context().is_valid:
        propagate.inject(headers)
    return headers


def _parent(carrier: dict[str, str] | None) -> OtelContext | None:
    """The context a stored ``carrier`` names (``None``: the current one)."""
    if carrier is None:
        return None
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    return TraceContextTextMapPropagator().extract(carrier)


def attributes(workload: Workload) -> dict[str, Any]:
    """What each of a worker's spans says of its workload."""
    return {
        "feltdb.workload_id": workload.workload_id,
        "feltdb.definition_id": workload.definition_id,
        "feltdb.attempt": workload.attempt_count,
        "feltdb.tenant_id": workload.tenant_id,
        "feltdb.application_id": workload.application_id,
    }


def traced_claim(claim: Callable[[], C], worker: Callable[[], str]) -> C:
    """``claim()``'s answer, the work a worker's claim took; when tracing, with a
    ``feltdb.claim`` span for each workload in it (:func:`record_claims`).
    """
    traced = tracer()
    if traced is None:
        return claim()
    began = time.time_ns()
    answer = claim()
    record_claims(traced, answer, began, worker)
    return answer


def record_claims(
    traced: Tracer, claimed: Iterable[ClaimedWork], began_ns: int, worker: Callable[[], str]
) -> None:
    """A ``feltdb.claim`` span for each workload ``claimed``: the claim call that took it
    (from ``began_ns`` to now), a child of the context the workload was submitted with;
    ``worker()`` names the worker.
    """
    ended = time.time_ns()
    for work in claimed:
        span = traced.start_span(
            "feltdb.claim",
            context=_parent(work.workload.trace_context),
            attributes={**attributes(work.workload), "feltdb.worker": worker()},
            start_time=began_ns,
        )
        span.end(end_time=ended)


def start_run(workload: Workload, worker: Callable[[], str]) -> Span | None:
    """The ``feltdb.run`` span of an attempt of ``workload``, started (a child of the
    context it was submitted with; ``worker()`` names the worker); ``None`` when tracing
    is off.
    """
    traced = tracer()
    if traced is None:
        return None
    return traced.start_span(
        "feltdb.run",
        context=_parent(workload.trace_context),
        attributes={**attributes(workload), "feltdb.worker": worker()},
    )


def running(span: Span | None) -> AbstractContextManager[Any]:
    """Make the run ``span`` current while the handler runs (its own spans nest under
    it), ending it at the end; nothing when ``span`` is ``None``.
    """
    if span is None:
        return _NOTHING
    from opentelemetry import trace

    used: AbstractContextManager[Any] = trace.use_span(span, end_on_exit=True)
    return used


def current(span: Span | None) -> AbstractContextManager[Any]:
    """Make ``span`` current while the block runs (an async handler's task: the run's
    spans nest under it there too), leaving it open; nothing when ``span`` is ``None``.
    """
    if span is None:
        return _NOTHING
    from opentelemetry import trace

    used: AbstractContextManager[Any] = trace.use_span(span, end_on_exit=False)
    return used


def child(run: Span | None, name: str, **extra: Any) -> AbstractContextManager[Any]:
    """A span ``name`` under the run ``run`` for as long as the block runs (a refusal
    raised in it is recorded as its error); nothing when ``run`` is ``None``.
    """
    if run is None:
        return _NOTHING
    return _child(run, name, extra)


@contextmanager
def _child(run: Span, name: str, extra: dict[str, Any]) -> Iterator[Span]:
    from opentelemetry import trace

    traced = tracer()
    if traced is None:  # the provider went away since the run began
        traced = trace.get_tracer("feltdb")
    parent = trace.set_span_in_context(run)
    with traced.start_as_current_span(name, context=parent, attributes=extra) as span:
        yield span


def start_child(run: Span | None, name: str, **extra: Any) -> Span | None:
    """A span ``name`` under ``run``, started now and ended by :func:`end` (a batched
    completion's, answered on another thread); ``None`` when ``run`` is ``None``.
    """
    if run is None:
        return None
    from opentelemetry import trace

    traced = tracer() or trace.get_tracer("feltdb")
    return traced.start_span(name, context=trace.set_span_in_context(run), attributes=extra)


def end(span: Span | None, error: BaseException | None = None) -> None:
    """End ``span`` (``error``: the failure it ended in, recorded as its error)."""
    if span is None:
        return
    if error is not None:
        failed(span, error)
    span.end()


def failed(span: Span | None, error: BaseException | str) -> None:
    """Mark ``span`` as ended in ``error`` (an exception, or a failure report's message)."""
    if span is None:
        return
    from opentelemetry.trace import Status, StatusCode

    if isinstance(error, BaseException):
        span.record_exception(error)
        error = f"{type(error).__name__}: {error}"
    span.set_status(Status(StatusCode.ERROR, error[:256]))
