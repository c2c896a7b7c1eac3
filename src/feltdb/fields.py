"""Field types shared by the records of several layers."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Annotated, Any

import msgspec
from annotated_types import Ge, Le
from pydantic import AfterValidator, BeforeValidator, PlainSerializer, StrictInt, WithJsonSchema


def as_frozenset(value: Any) -> Any:
    """Accept any iterable but a string, bytes or mapping as the members of a set.

    The members are handed on as a list, so that validation turns each into its type
    (a subject from ``{"kind", "id"}``) before they are hashed; a bare string is passed on
    unchanged, so validation refuses it rather than splitting it into characters.
    """
    if type(value) is list:  # what JSON holds: every stored document's sets (the hot path)
        return value
    if isinstance(value, str | bytes | dict | set | frozenset):
        return value
    if isinstance(value, Iterable):
        return list(value)
    return value


def sorted_list(value: frozenset[Any]) -> list[Any]:
    """A set's members in order, which is how sets serialize (like the reference's BTreeSet)."""
    return sorted(value)


StringSet = Annotated[
    frozenset[str],
    BeforeValidator(as_frozenset),
    PlainSerializer(sorted_list, return_type=list[str]),
]
"""A set of strings: accepts any iterable, compares as a set, serializes sorted."""

MAX_SAFE_INTEGER = 2**53 - 1
"""The largest integer a JSON number keeps exactly in every client (JavaScript's
``Number.MAX_SAFE_INTEGER``). Every integer feltdb stores is within it, so sums such as
``now + lease_ms // 1000`` stay far inside SQLite's and PostgreSQL's 64-bit integers."""

MAX_NOW = MAX_SAFE_INTEGER - MAX_SAFE_INTEGER // 1000
"""The latest instant the authority accepts as ``now``: every instant it derives from one
(``now`` plus a lease, a backoff delay or an extension, each at most
:data:`MAX_SAFE_INTEGER` milliseconds) is then a storable :data:`Instant` too. About the
year 285,000,000."""

Instant = Annotated[
    StrictInt,
    Ge(-MAX_SAFE_INTEGER),
    Le(MAX_SAFE_INTEGER),
    msgspec.Meta(ge=-MAX_SAFE_INTEGER, le=MAX_SAFE_INTEGER),
]
"""Unix time in whole seconds."""

Count = Annotated[StrictInt, Ge(0), Le(MAX_SAFE_INTEGER), msgspec.Meta(ge=0, le=MAX_SAFE_INTEGER)]
"""A non-negative integer: counts, versions, tokens, durations in milliseconds."""

Priority = Annotated[
    StrictInt, Ge(-(2**31)), Le(2**31 - 1), msgspec.Meta(ge=-(2**31), le=2**31 - 1)
]
"""A priority: a signed 32-bit integer, as in the reference; higher runs first."""

MAX_CONCURRENCY_LIMIT = 1000
"""The largest concurrency limit a workload may name (each claim of limited work reads the
rows of the key's live claims, at most this many, in one statement outside its
transaction and one by one inside it)."""

ConcurrencyLimit = Annotated[
    StrictInt, Ge(1), Le(MAX_CONCURRENCY_LIMIT), msgspec.Meta(ge=1, le=MAX_CONCURRENCY_LIMIT)
]
"""How many workloads of one concurrency key may hold a live claim at once."""

MAX_RATE_STARTS = 1000
"""The most starts a rate limit allows a period (a limit's window row keeps at most this
many entries)."""
MAX_RATE_PERIOD_S = 86_400
"""The longest period of a rate limit, in seconds: a day."""

MAX_ID_CHARS = 256
"""The longest identifier, in characters: ids, keys, names, kinds, capabilities, tenants,
applications, environments, definitions, subjects, workers, result ids."""

MAX_SUBJECT_CHARS = MAX_ID_CHARS + len("connection:")
"""The longest subject written ``KIND:ID`` (a worker name, an actor): an identifier and
the longest kind."""

MAX_PATH_CHARS = 1024
"""The longest artifact path or URI."""

MAX_TEXT_CHARS = 4096
"""The longest free text, in characters: reasons and error messages."""

MAX_LIST_ITEMS = 1024
"""The most items of a list argument (capabilities, artifacts, dependencies, scopes)."""

MAX_DOCUMENT_BYTES = 1024 * 1024
"""The largest JSON document (input, checkpoint state, output), as canonical UTF-8 JSON:
1 MiB, the same bound as the server's request body, so the library admits nothing the
server would refuse."""

MAX_JSON_DEPTH = 64
"""The deepest a JSON document (input, checkpoint state, output) may nest: a scalar at the
top is depth 0, and each object or array around it adds one."""

MAX_RECORD_BYTES = 8 * 1024 * 1024
"""The largest a workload's stored record may grow, as UTF-8 JSON: its input and output (at
most 1 MiB each), its checkpoints' states, its history and attempts. A change that would
pass it (most often a checkpoint) is refused, so every read of one workload stays bounded;
a worker with large state checkpoints a reference to where it keeps it."""

RECORD_HEADROOM_BYTES = 1024 * 1024
"""Room past :data:`MAX_RECORD_BYTES` kept for what the authority itself records on a
workload (a recovery, a deadline, a claim, a cancellation: an event each): a worker's
checkpoint, result or failure report is held to the bound, the authority's own changes only
to the bound plus this, so a record filled by its worker never blocks the maintenance that
recovers or times it out."""

MAX_CHECKPOINTS = 1000
"""The most checkpoints one workload keeps; the next is refused."""

MAX_KEY_CHARS = 1024
"""The longest object key of a JSON document (input, checkpoint state, output), in
characters: checked before anything else is done with the key."""


TRACEPARENT_PATTERN = "^00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$"
"""A W3C ``traceparent`` of version ``00`` (55 characters): the trace id, the parent span
id and the trace flags, in lowercase hex."""
MAX_TRACESTATE_CHARS = 512
"""The longest ``tracestate`` a workload keeps (W3C Trace Context asks propagators to
carry at least 512 characters of it)."""

_TRACEPARENT = re.compile(TRACEPARENT_PATTERN)


def trace_context_problem(carrier: dict[str, str]) -> str | None:
    """What makes ``carrier`` unacceptable as a workload's trace context, or ``None``: it
    holds ``traceparent`` (:data:`TRACEPARENT_PATTERN`; one OpenTelemetry finds invalid,
    such as an all-zero trace id, is kept, and continues no trace) and may hold
    ``tracestate`` (text of at most :data:`MAX_TRACESTATE_CHARS` characters without NUL:
    its members are OpenTelemetry's to read), nothing else.
    """
    unknown = sorted(set(carrier) - {"traceparent", "tracestate"})
    if unknown:
        return f"holds only traceparent and tracestate (not {', '.join(unknown)[:64]})"
    parent = carrier.get("traceparent")
    if parent is None:
        return "traceparent is required"
    if not _TRACEPARENT.fullmatch(parent):
        return "traceparent must be 00-<32 hex>-<16 hex>-<2 hex> (W3C, lowercase)"
    problem = text_problem(carrier.get("tracestate", ""), MAX_TRACESTATE_CHARS, identifier=True)
    return None if problem is None else f"tracestate {problem}"


def _checked_trace_context(carrier: dict[str, str]) -> dict[str, str]:
    problem = trace_context_problem(carrier)
    if problem is not None:
        raise ValueError(problem)
    return carrier


TraceContext = Annotated[
    dict[str, str],
    AfterValidator(_checked_trace_context),
    WithJsonSchema(
        {
            "type": "object",
            "properties": {
                # Its length too, so that no reading of "$" admits a trailing newline.
                "traceparent": {
                    "type": "string",
                    "pattern": TRACEPARENT_PATTERN,
                    "minLength": 55,
                    "maxLength": 55,
                },
                "tracestate": {
                    "type": "string",
                    "maxLength": MAX_TRACESTATE_CHARS,
                    "pattern": "^[^\\u0000]*$",
                },
            },
            "required": ["traceparent"],
            "additionalProperties": False,
        }
    ),
]
"""A W3C trace context (``traceparent``, and ``tracestate`` if any) as a carrier of
OpenTelemetry's propagators: see :func:`trace_context_problem` for its bounds."""


def text_problem(value: str, max_chars: int, *, identifier: bool) -> str | None:
    """What makes ``value`` unacceptable as text of at most ``max_chars`` characters (an
    ``identifier`` also refuses NUL), or ``None`` when nothing does.

    Text must be valid Unicode: a lone surrogate (U+D800 to U+DFFF alone, which JSON's
    escapes can produce) has no UTF-8 encoding, so it could be neither stored nor hashed.
    """
    if len(value) > max_chars:
        return f"must be at most {max_chars} characters (got {len(value)})"
    if identifier and "\x00" in value:
        return "must not contain NUL"
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return "must be valid Unicode text (it holds a lone surrogate)"
    return None


def instant_text(seconds: float) -> str:
    """Unix ``seconds`` as people read them everywhere feltdb shows a time (messages, the
    command line, the dashboard): ``2026-12-01 10:30:00 UTC``. An instant beyond the
    calendar's years is written as its seconds.
    """
    from datetime import UTC, datetime

    try:
        return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    except (OverflowError, ValueError, OSError):
        return f"{seconds:.0f} (unix seconds)"
