"""Aging, set per application: low-priority work that has waited long enough is claimed
ahead of newer higher-priority work, so a steady stream of urgent work never starves it.

An application's operator sets a period A (``feltdb limits aging A``): at each claim, a
workload counts as one priority higher for every A seconds since it was created, and the
claim's first read starts at the level whose oldest work is then highest
(:mod:`feltdb.storage.aging`). With none set (the default), claims follow priority alone.
A claim reads the period once a second at most per process (:data:`AGING_TTL_S`): a
change made in another process applies within a second.
"""

from __future__ import annotations

from typing import Any, Final

from feltdb.errors import WorkloadError
from feltdb.storage.base import Database, Mutation, RowIndex
from feltdb.work.concurrency import slot_key
from feltdb.work.settings import Remembered, write_setting

__all__ = ["AGING_COLLECTION", "MAX_AGING_S", "aging_period", "set_aging"]

AGING_COLLECTION: Final = "system_claim_aging"
AGING_SET: Final = "limits.aging_set"
"""The audit kind of a change of an application's aging period."""
MAX_AGING_S: Final = 86_400 * 30
"""The longest aging period: 30 days for one step of priority."""
AGING_TTL_S: Final = 1.0
"""How long a process trusts the period it read."""

Scope = tuple[str, str]


def _key(scope: Scope) -> str:
    return slot_key(*scope, "aging")


_REMEMBERED: Final[Remembered[Scope, int | None]] = Remembered(AGING_TTL_S)


def _period_of(db: Database, scope: Scope) -> int | None:
    """``scope``'s aging period as committed now (``None``: none)."""
    row = db.get_row(AGING_COLLECTION, _key(scope))
    found = row.document.get("aging_s") if row is not None else None
    return found if type(found) is int and 1 <= found <= MAX_AGING_S else None


def aging_period(db: Database, scope: Scope) -> int | None:
    """The aging period of the ``scope`` (tenant, application), in seconds (``None``:
    none), as read within the last :data:`AGING_TTL_S`. A read that fails says none.
    """
    try:
        return _REMEMBERED.value(db, scope, lambda: _period_of(db, scope))
    except WorkloadError:
        return None


def set_aging(db: Database, scope: Scope, aging_s: int | None, *, actor: str, now: int) -> None:
    """Set (``None``: remove) the aging period of the ``scope``, in one audited commit.

    Raises:
        WorkloadError: ``WORKLOAD_CONFLICT`` if it was changed meanwhile;
            ``WORKLOAD_STORAGE_FAILURE``.
    """
    key = _key(scope)
    row = db.get_row(AGING_COLLECTION, key)
    if aging_s is None and row is None:
        return
    document: dict[str, Any] | None = (
        None if aging_s is None else {"aging_s": aging_s, "set_by": actor, "set_at": now}
    )
    audit = {
        "kind": AGING_SET, "actor": actor, "tenant": scope[0], "application": scope[1],
        "aging_s": aging_s, "at": now,
    }  # fmt: skip
    index = RowIndex(tenant_id=scope[0], application_id=scope[1])
    mutation = Mutation(AGING_COLLECTION, key, document, index)
    try:
        write_setting(db, row, mutation, audit, "the aging period")
    finally:
        _REMEMBERED.forget(db, scope)
