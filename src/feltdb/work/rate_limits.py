"""Rate limits: at most N starts of a named limit's work per period, per key, decided in
the claim's own commit.

An application's operator names a limit (``smtp``: 10 starts a second) with
:func:`set_rate_limit`; a workload names the limit (``rate_limit``) and, optionally, a key
within it (``rate_key``: a customer, an account; none: one key for the whole limit). Each
(limit, key) of a tenant's application has one *window* row in :data:`WINDOWS_COLLECTION`:
the instants (whole seconds, the authority's clock) of the starts within the last period,
counted per second. A claim of such work reads the limit and the window inside its
transaction; it claims only while the window holds fewer than N starts, and writes the
window again, with its own start added and the expired seconds gone, in the claim's own
commit, guarded by the version read. Two claims of one key, in two processes or on two
servers, cannot both commit on the same count. A claim counts as a start: what becomes of
the attempt afterwards gives nothing back.

At the limit, a claim takes other work (:mod:`feltdb.work.claiming`) and notes how long
until the next start is allowed (:class:`StartHeld`): when nothing else was claimable, the
HTTP claim answers that in ``Retry-After`` and its long-poll looks again by then. A claim
by id is refused ``WORKLOAD_NOT_YET_ELIGIBLE`` with the instant it may start.

Work naming a limit that is not set (or was removed) runs unlimited. A change of a limit
applies to the claims that begin after it commits.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from feltdb.errors import WorkloadError
from feltdb.fields import MAX_RATE_PERIOD_S, MAX_RATE_STARTS
from feltdb.records.limits import RateLimit
from feltdb.records.workload import Workload
from feltdb.storage.base import (
    Database,
    Mutation,
    Precondition,
    RowIndex,
    RowReader,
    StoredRow,
)
from feltdb.work.concurrency import Saturation, SlotRows, slot_key
from feltdb.work.settings import write_setting

__all__ = [
    "LIMITS_COLLECTION",
    "MAX_RATE_LIMITS_LISTED",
    "RATE_HELD",
    "WINDOWS_COLLECTION",
    "StartHeld",
    "StartTaken",
    "next_start_in",
    "rate_limits",
    "set_rate_limit",
    "take_start",
    "window_key",
]

LIMITS_COLLECTION: Final = "system_rate_limits"
WINDOWS_COLLECTION: Final = "system_rate_windows"
RATE_SET: Final = "limits.rate_set"
"""The audit kind of a change of a rate limit."""
MAX_RATE_LIMITS_LISTED: Final = 1000
"""The most rate limits one answer lists (by name)."""


def limit_key(tenant_id: str, application_id: str, name: str) -> str:
    """The row key of the limit ``name`` of a tenant's application."""
    return slot_key(tenant_id, application_id, name)


def window_key(tenant_id: str, application_id: str, name: str, key: str) -> str:
    """The window row's key of ``key`` under the limit ``name`` (each part length-prefixed:
    names may hold any character).
    """
    return slot_key(tenant_id, application_id, f"{len(name)}:{name}/{key}")


@dataclass(frozen=True, slots=True)
class StartTaken:
    """A start taken: the window row to write in the claim's commit, and its guard."""

    mutation: Mutation
    guard: Precondition


@dataclass(frozen=True, slots=True)
class StartHeld:
    """No start now: ``wait_s`` seconds until the window allows one; 0 when this
    transaction already took a start of the window (the next transaction may take one).
    """

    wait_s: int


def _limit_of(row: StoredRow | None) -> RateLimit | None:
    """The limit a row holds (``None``: no row, or one not of this shape)."""
    if row is None:
        return None
    name, starts, period = (row.document.get(k) for k in ("name", "starts", "period_s"))
    if not isinstance(name, str) or type(starts) is not int or type(period) is not int:
        return None
    if not (1 <= starts <= MAX_RATE_STARTS and 1 <= period <= MAX_RATE_PERIOD_S):
        return None
    return RateLimit(name=name, starts=starts, period_s=period)


def _window(row: StoredRow | None, now: int, period_s: int) -> list[list[int]]:
    """The ``[second, starts]`` entries of a window row still within the period at
    ``now`` (in order; an entry ahead of ``now``, from a clock ahead of this one, counts).
    """
    entries = row.document.get("starts") if row is not None else None
    if not isinstance(entries, list):
        return []
    kept = [
        [entry[0], entry[1]]
        for entry in entries[: MAX_RATE_STARTS + 1]
        if isinstance(entry, list)
        and len(entry) == 2
        and all(type(part) is int for part in entry)
        and entry[0] > now - period_s
        and entry[1] > 0
    ]
    return sorted(kept)


def _held_for(entries: list[list[int]], limit: RateLimit, now: int) -> int | None:
    """Seconds until ``entries`` allow another start under ``limit`` (``None``: now)."""
    if sum(count for _, count in entries) < limit.starts:
        return None
    # The oldest second leaves the window first; one start is all a claim needs.
    return max(1, entries[0][0] + limit.period_s - now)


def take_start(
    workload: Workload, now: int, read: RowReader, taken: SlotRows
) -> StartTaken | StartHeld | None:
    """A start of ``workload``'s rate limit at ``now``, read with ``read`` inside the
    claiming transaction: taken, or held (:class:`StartHeld`); ``None`` when its limit is
    not set (the work runs unlimited). One start of a window per transaction (``taken``,
    updated here), as one slot of a concurrency key: see
    :func:`~feltdb.work.concurrency.take_slot`.
    """
    assert workload.rate_limit is not None
    tenant, application = workload.tenant_id, workload.application_id
    key = window_key(tenant, application, workload.rate_limit, workload.rate_key or "")
    if key in taken:
        return StartHeld(0)
    limit = _limit_of(read(LIMITS_COLLECTION, limit_key(tenant, application, workload.rate_limit)))
    if limit is None:
        return None
    row = read(WINDOWS_COLLECTION, key)
    entries = _window(row, now, limit.period_s)
    wait = _held_for(entries, limit, now)
    if wait is not None:
        return StartHeld(wait)
    taken.add(key)
    if entries and entries[-1][0] == now:
        entries[-1][1] += 1
    else:
        entries.append([now, 1])
        entries.sort()
    document: dict[str, Any] = {
        "name": workload.rate_limit,
        "key": workload.rate_key or "",
        "starts": entries,
    }
    guard = (
        Precondition(WINDOWS_COLLECTION, key, require_absent=True)
        if row is None
        else Precondition(WINDOWS_COLLECTION, key, expected_version=row.version)
    )
    index = RowIndex(tenant_id=tenant, application_id=application)
    return StartTaken(Mutation(WINDOWS_COLLECTION, key, document, index), guard)


RATE_HELD: Final = Saturation()
"""The windows this process's claims found at their limit lately: a later claim checks
one (:func:`next_start_in`, two reads) before it reads the backlog of its work."""


def next_start_in(
    db: Database, scope: tuple[str, str], rate: tuple[str, str], now: int
) -> int | None:
    """Seconds until the window of ``rate`` (limit name, key) in the ``scope`` (tenant,
    application) allows a start, as committed now (outside any transaction: a hint);
    ``None``: now, or not known. A read that fails says now: the choice decides on the
    rows it holds.
    """
    try:
        limit = _limit_of(db.get_row(LIMITS_COLLECTION, limit_key(*scope, rate[0])))
        if limit is None:
            return None
        row = db.get_row(WINDOWS_COLLECTION, window_key(*scope, *rate))
    except WorkloadError:
        return None
    return _held_for(_window(row, now, limit.period_s), limit, now)


def set_rate_limit(
    db: Database,
    scope: tuple[str, str],
    name: str,
    limit: tuple[int, int] | None,
    *,
    actor: str,
    now: int,
) -> None:
    """Set the limit ``name`` of the ``scope`` (tenant, application) to ``limit`` (starts,
    period in seconds), or remove it (``None``), in one audited commit.

    Raises:
        WorkloadError: ``WORKLOAD_CONFLICT`` if it was changed meanwhile;
            ``WORKLOAD_STORAGE_FAILURE``.
    """
    tenant_id, application_id = scope
    key = limit_key(tenant_id, application_id, name)
    row = db.get_row(LIMITS_COLLECTION, key)
    if limit is None and row is None:
        return  # nothing to remove
    document: dict[str, Any] | None = None
    if limit is not None:
        document = {"name": name, "starts": limit[0], "period_s": limit[1], "set_by": actor}
    audit = {
        "kind": RATE_SET, "actor": actor, "tenant": tenant_id, "application": application_id,
        "name": name, "starts": None if limit is None else limit[0],
        "period_s": None if limit is None else limit[1], "at": now,
    }  # fmt: skip
    index = RowIndex(tenant_id=tenant_id, application_id=application_id)
    mutation = Mutation(LIMITS_COLLECTION, key, document, index)
    write_setting(db, row, mutation, audit, f"the rate limit {name!r}")


def rate_limits(db: Database, tenant_id: str, application_id: str) -> list[RateLimit]:
    """The application's rate limits, by name (at most :data:`MAX_RATE_LIMITS_LISTED`)."""
    rows = db.list_rows(
        LIMITS_COLLECTION,
        tenant_id=tenant_id,
        application_id=application_id,
        limit=MAX_RATE_LIMITS_LISTED,
    )
    found = [limit for limit in map(_limit_of, rows) if limit is not None]
    return sorted(found, key=lambda limit: limit.name)
