"""How a handler's ending becomes a report to the authority: pure decisions, no I/O.

A handler ends in one of three ways: it returns (the runtime completes the work), it raises
:class:`Retryable` or :class:`Permanent` (the author names the failure kind), or it raises
anything else (the runtime reports a ``worker_failure``). Whether the failure is retried is
never the worker's decision: the workload's retry policy decides on the reported kind and
effect, in the authority.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from feltdb.errors import ErrorCode, WorkloadError
from feltdb.fields import MAX_TEXT_CHARS

DEFAULT_RETRYABLE_KIND = "transient_connection"
"""The kind :class:`Retryable` reports by default: one the default retry policy retries."""

DEFAULT_PERMANENT_KIND = "permanent"
"""The kind :class:`Permanent` reports by default: one no default policy retries."""

UNEXPECTED_KIND = "worker_failure"
"""The kind of an exception the handler did not mean to raise; the default retry policy
retries it, as it retries a worker that died."""

INVALID_OUTPUT_KIND = "invalid_output"
"""The kind reported when the authority refuses the handler's return value as output."""

SHUTDOWN_KIND = UNEXPECTED_KIND
"""The kind reported for a handler still running when the grace period of a shutdown ends."""

WITHHELD = "the error text was withheld: the authority refused it as secret material"
"""The error reported instead of a message the authority refused as secret material."""

LEASE_LOST_CODES = frozenset(
    {
        ErrorCode.WORKLOAD_TIMED_OUT,
        ErrorCode.WORKLOAD_STALE_FENCE,
        ErrorCode.WORKLOAD_CLAIM_INVALID,
        ErrorCode.WORKLOAD_LEASE_EXPIRED,
    }
)
"""Refusals after which this worker no longer holds the work: it stops the handler and
reports nothing more (another worker, or the authority's recovery, owns what follows)."""

TRANSIENT_CODES = frozenset({ErrorCode.WORKLOAD_STORAGE_FAILURE, ErrorCode.WORKLOAD_CONFLICT})
"""Refusals worth sending the same report again: no answer arrived, the store failed, or a
concurrent commit (a maintenance pass, a heartbeat) won the race for the document."""


Effect = Literal["none", "unknown"]
"""What a failed attempt did outside feltdb: nothing, or perhaps something."""


class Retryable(Exception):
    """Raise from a handler: this attempt failed, and another attempt may succeed.

    ``kind`` names the failure for the retry policy (``retry_on``); the default,
    ``transient_connection``, is one the default policy retries. The message is the error
    the authority records (never include secrets: the authority refuses them). ``effect``
    says what the attempt did outside feltdb; left out, it is ``none`` when the handler
    had neither checkpointed nor called ``mark_side_effect``, and not said otherwise (an
    operator is told it is unknown). ``effect="unknown"`` is decided as a lost worker is.
    """

    def __init__(
        self, message: str = "", *, kind: str = DEFAULT_RETRYABLE_KIND, effect: Effect | None = None
    ) -> None:
        super().__init__(message)
        self.kind = kind
        self.effect = _checked_effect(effect)


class Permanent(Exception):
    """Raise from a handler: this work cannot succeed; do not try it again.

    ``kind`` names the failure (default ``permanent``); unless the workload's retry policy
    lists that kind, the work is dead-lettered for an operator. ``effect`` as for
    :class:`Retryable`.
    """

    def __init__(
        self, message: str = "", *, kind: str = DEFAULT_PERMANENT_KIND, effect: Effect | None = None
    ) -> None:
        super().__init__(message)
        self.kind = kind
        self.effect = _checked_effect(effect)


def _checked_effect(effect: str | None) -> Effect | None:
    if effect == "none":
        return "none"
    if effect == "unknown":
        return "unknown"
    if effect is None:
        return None
    raise ValueError(f"effect: 'none' or 'unknown', not {effect!r}")


class LeaseLost(Exception):
    """Raised inside a handler (by ``ctx.checkpoint``) when this worker no longer holds the
    work: a deadline passed, the lease expired or another claim fenced this one out. The
    runtime reports nothing for the attempt; let it propagate.
    """

    def __init__(self, error: WorkloadError) -> None:
        super().__init__(f"{error.code}: {error.message}")
        self.error = error


@dataclass(frozen=True)
class FailureReport:
    """What ``fail`` is told: the kind, the error text and what is known of effects."""

    kind: str
    error: str
    effect: str | None


def error_text(error: BaseException) -> str:
    """The text reported for ``error``: its message, never a traceback.

    An exception without a message is named by its type, so the record still says what
    happened. A message over the authority's bound (:data:`~feltdb.fields.MAX_TEXT_CHARS`)
    is cut to it, ending in ``…``, so the failure is still recorded; so is text that is not
    valid Unicode, made valid.
    """
    message = str(error).strip()
    name = type(error).__name__
    if isinstance(error, Retryable | Permanent):
        text = message or name
    else:
        text = f"{name}: {message}" if message else name
    text = text.encode("utf-8", "replace").decode("utf-8")
    if len(text) > MAX_TEXT_CHARS:
        text = text[: MAX_TEXT_CHARS - 1] + "…"
    return text


def failure_report(error: BaseException, *, progressed: bool) -> FailureReport:
    """The report for a handler that raised ``error``.

    ``Retryable``/``Permanent`` report their kind and the effect they name; naming none,
    ``none`` when the handler had not yet committed a checkpoint or marked a side effect
    (``progressed`` false), else nothing (the kind decides the retry; an operator is told
    the effect is unknown). Any other exception is a ``worker_failure`` whose effect is
    ``none`` before progress, else ``unknown``.
    """
    if isinstance(error, Retryable | Permanent):
        effect = error.effect if error.effect is not None or progressed else "none"
        return FailureReport(error.kind, error_text(error), effect)
    return FailureReport(UNEXPECTED_KIND, error_text(error), "unknown" if progressed else "none")


def is_lease_lost(error: WorkloadError) -> bool:
    """Whether ``error`` means this worker no longer holds the work."""
    return error.code in LEASE_LOST_CODES


def is_transient(error: WorkloadError) -> bool:
    """Whether the same report may be sent again after ``error``."""
    return error.code in TRANSIENT_CODES
