"""Checking the arguments of the authority's operations: types, ranges and lengths.

Every operation of :class:`~feltdb.work.store.WorkloadStore` checks what it is given here,
before it reads anything, so bad input is refused with ``WORKLOAD_INVALID`` naming the
field and commits nothing. The bounds are :mod:`feltdb.fields`'s: identifiers at most
:data:`~feltdb.fields.MAX_ID_CHARS` characters with no NUL, free text (reasons, errors) at
most :data:`~feltdb.fields.MAX_TEXT_CHARS`, and no string that is not valid Unicode text
(a lone surrogate cannot be stored as UTF-8).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from feltdb.errors import ErrorCode, WorkloadError
from feltdb.fields import (
    MAX_ID_CHARS,
    MAX_LIST_ITEMS,
    MAX_SAFE_INTEGER,
    MAX_SUBJECT_CHARS,
    MAX_TEXT_CHARS,
    text_problem,
)
from feltdb.limits import MAX_PLANS_PER_BATCH
from feltdb.work.states import WorkloadState

MAX_BATCH_ITEMS = MAX_PLANS_PER_BATCH
"""The most items one batch operation takes: what one transaction commits."""
DEFAULT_LEASE_MS = 30_000
"""The lease a claim gets, and the extension a heartbeat asks for, unless told otherwise."""
DEFAULT_MAX_LEASE_MS = 24 * 3600 * 1000
"""The longest lease (and heartbeat extension) a store grants unless told otherwise: a
day. A crashed worker's work is recovered at most this long after its last heartbeat."""

Cursor = tuple[int, int, str]
"""Where a page of :meth:`WorkloadStore.page` ends: (priority, created_at, workload_id)."""


def invalid(field: str, message: str) -> WorkloadError:
    """``WORKLOAD_INVALID`` naming ``field``."""
    return WorkloadError(ErrorCode.WORKLOAD_INVALID, f"{field}: {message}", {"fields": [field]})


def identifier(value: Any, field: str, *, max_chars: int = MAX_ID_CHARS) -> str:
    """``value`` if it is a non-blank identifier: a string of at most ``max_chars``
    characters, without NUL, that is valid Unicode text.

    Raises:
        WorkloadError: ``WORKLOAD_INVALID`` naming ``field``.
    """
    if not isinstance(value, str) or not value.strip():
        raise invalid(field, "must be a non-empty string")
    problem = text_problem(value, max_chars, identifier=True)
    if problem is not None:
        raise invalid(field, problem)
    return value


def actor(value: Any, field: str = "actor") -> str:
    """An actor or worker name (a subject written ``KIND:ID``, or a bare name), as
    :func:`identifier` but up to :data:`~feltdb.fields.MAX_SUBJECT_CHARS` characters.

    Raises:
        WorkloadError: ``WORKLOAD_INVALID`` naming ``field``.
    """
    return identifier(value, field, max_chars=MAX_SUBJECT_CHARS)


def text(value: Any, field: str, *, max_chars: int = MAX_TEXT_CHARS) -> str:
    """``value`` if it is non-empty free text (an error message) within ``max_chars``.

    Raises:
        WorkloadError: ``WORKLOAD_INVALID`` naming ``field``.
    """
    if not isinstance(value, str) or not value:
        raise invalid(field, "must be a non-empty string")
    problem = text_problem(value, max_chars, identifier=False)
    if problem is not None:
        raise invalid(field, problem)
    return value


def integer(value: Any, field: str, minimum: int, maximum: int = MAX_SAFE_INTEGER) -> int:
    """``value`` if it is an integer (not a bool) in ``[minimum, maximum]``.

    Raises:
        WorkloadError: ``WORKLOAD_INVALID`` naming ``field``.
    """
    if isinstance(value, bool) or not isinstance(value, int):
        raise invalid(field, "must be an integer")
    if value < minimum:
        raise invalid(field, f"must be at least {minimum}")
    if value > maximum:
        raise invalid(field, f"must be at most {maximum}")
    return value


def batch(value: Any, field: str) -> list[Any]:
    """``value`` as the items of a batch: a sequence of at most :data:`MAX_BATCH_ITEMS`
    (one transaction's worth).

    Raises:
        WorkloadError: ``WORKLOAD_INVALID`` naming ``field``.
    """
    if isinstance(value, str | bytes) or not isinstance(value, Sequence):
        raise invalid(field, "must be a list")
    items = list(value)
    if len(items) > MAX_BATCH_ITEMS:
        raise invalid(field, f"must hold at most {MAX_BATCH_ITEMS} items (one transaction)")
    return items


def identifiers(value: Any, field: str, *, max_chars: int = MAX_ID_CHARS) -> list[str]:
    """``value`` as a list of identifiers (at most :data:`MAX_LIST_ITEMS`); a bare string
    is refused rather than taken as a sequence of one-letter strings.

    Raises:
        WorkloadError: ``WORKLOAD_INVALID`` naming ``field``.
    """
    if isinstance(value, str | bytes) or not isinstance(value, Iterable):
        raise invalid(field, "must be a list of strings")
    items = list(value)
    if len(items) > MAX_LIST_ITEMS:
        raise invalid(field, f"must hold at most {MAX_LIST_ITEMS} items")
    for item in items:
        identifier(item, field, max_chars=max_chars)
    return items


def capabilities(value: Iterable[str]) -> frozenset[str]:
    """The capabilities a worker holds, as a set of identifiers."""
    return frozenset(identifiers(value, "capabilities"))


def reason(value: Any) -> str | None:
    """An operator's or decider's reason, stripped; ``None`` when absent or blank.

    Raises:
        WorkloadError: ``WORKLOAD_INVALID`` for a non-string or text over the bound.
    """
    if value is not None and not isinstance(value, str):
        raise invalid("reason", "must be a string or None")
    if value is None or not value.strip():
        return None
    return text(value.strip(), "reason")


def lease(value: Any, field: str, maximum: int) -> int:
    """A lease or heartbeat extension in milliseconds, from 0 to ``maximum``.

    Below a second is accepted, as the reference accepts it: leases are whole seconds
    (``now + ms // 1000``), so a lease under 1000 ms expires at once and a heartbeat of 0
    hands the work to recovery.

    Raises:
        WorkloadError: ``WORKLOAD_INVALID`` naming ``field``.
    """
    return integer(value, field, 0, maximum)


def cursor(value: Any) -> Cursor:
    """A page cursor: ``(priority, created_at, workload_id)``.

    Raises:
        WorkloadError: ``WORKLOAD_INVALID`` naming ``after``.
    """
    if not isinstance(value, tuple | list) or len(value) != 3 or not isinstance(value[2], str):
        raise invalid("after", "must be (priority, created_at, workload_id)")
    problem = text_problem(value[2], MAX_ID_CHARS, identifier=True)
    if problem is not None:
        raise invalid("after", f"its workload id {problem}")
    for number in value[:2]:
        if isinstance(number, bool) or not isinstance(number, int):
            raise invalid("after", "its priority and created_at must be integers")
        if abs(number) > MAX_SAFE_INTEGER:
            raise invalid("after", f"its numbers must be at most {MAX_SAFE_INTEGER} in size")
    return value[0], value[1], value[2]


def state(value: Any) -> str | None:
    """A workload state's value (``None`` stays ``None``: any state).

    Raises:
        WorkloadError: ``WORKLOAD_INVALID`` naming ``state``.
    """
    if value is None:
        return None
    try:
        return WorkloadState(value).value
    except ValueError:
        raise invalid("state", f"not a workload state: {value!r}") from None
