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

import secrets
import threading
import time
import weakref
from typing import Any, Final

from feltdb.errors import ErrorCode, WorkloadError
from feltdb.storage.base import Database, Mutation, Precondition, RowIndex, StorageConflict
from feltdb.work.concurrency import slot_key

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


class _Remembered:
    """Periods read lately, per store and application (bounded; forgotten with the store)."""

    def __init__(self) -> None:
        self._stores: weakref.WeakKeyDictionary[Database, dict[Scope, tuple[int | None, float]]]
        self._stores = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()

    def period(self, db: Database, scope: Scope) -> int | None:
        at = time.monotonic()
        with self._lock:
            hit = self._stores.get(db, {}).get(scope)
        if hit is not None and at - hit[1] < AGING_TTL_S:
            return hit[0]
        row = db.get_row(AGING_COLLECTION, _key(scope))
        found = row.document.get("aging_s") if row is not None else None
        period = found if type(found) is int and 1 <= found <= MAX_AGING_S else None
        with self._lock:
            remembered = self._stores.setdefault(db, {})
            if len(remembered) >= 4096:
                remembered.clear()
            remembered[scope] = (period, at)
        return period

    def forget(self, db: Database, scope: Scope) -> None:
        with self._lock:
            self._stores.get(db, {}).pop(scope, None)


_REMEMBERED: Final = _Remembered()


def aging_period(db: Database, scope: Scope) -> int | None:
    """The aging period of the ``scope`` (tenant, application), in seconds (``None``:
    none), as read within the last :data:`AGING_TTL_S`. A read that fails says none.
    """
    try:
        return _REMEMBERED.period(db, scope)
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
    guard = (
        Precondition(AGING_COLLECTION, key, require_absent=True)
        if row is None
        else Precondition(AGING_COLLECTION, key, expected_version=row.version)
    )
    index = RowIndex(tenant_id=scope[0], application_id=scope[1])
    try:
        db.commit(
            "limits_tx_" + secrets.token_hex(12),
            [Mutation(AGING_COLLECTION, key, document, index)],
            [guard],
            audit,
        )
    except StorageConflict:
        raise WorkloadError(
            ErrorCode.WORKLOAD_CONFLICT, "the aging period was changed meanwhile: try again"
        ) from None
    finally:
        _REMEMBERED.forget(db, scope)
