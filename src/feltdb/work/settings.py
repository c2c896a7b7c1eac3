"""A store's settings (a definition's default limit, a rate limit, an application's aging
period, a quota): each one row, written guarded and audited (:func:`write_setting`), and
remembered by a process for a moment (:class:`Remembered`): one read a second, not one a
claim or an admission.

A setting (a definition's default limit, an application's aging period, the quotas of a
tenant) is read from its row when asked and trusted for ``ttl_s``; a change made by this
process forgets it at once, one made by another process applies within ``ttl_s``. Kept per
store (forgotten with it) and bounded per store, the least recently read out first.
"""

from __future__ import annotations

import secrets
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any, Final, Generic, TypeVar

from feltdb.errors import ErrorCode, WorkloadError
from feltdb.storage.base import Database, Mutation, Precondition, StorageConflict, StoredRow

__all__ = ["MOST_REMEMBERED", "Remembered", "write_setting"]

MOST_REMEMBERED: Final = 4096
"""The most settings a process remembers of one store, by default."""

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class Remembered(Generic[K, V]):
    """Values of settings by key, per store, each trusted for ``ttl_s`` seconds."""

    def __init__(self, ttl_s: float, most: int = MOST_REMEMBERED) -> None:
        self._ttl_s = ttl_s
        self._most = most
        self._stores: weakref.WeakKeyDictionary[Database, OrderedDict[K, tuple[V, float]]]
        self._stores = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()

    def value(self, db: Database, key: K, read: Callable[[], V]) -> V:
        """``key``'s value in ``db``: as read within the last ``ttl_s``, else ``read()``
        now (and remembered).
        """
        # A database joined to a caller's transaction remembers its store's settings.
        db = getattr(db, "joined_to", None) or db
        at = time.monotonic()
        with self._lock:
            hit = self._stores.get(db, OrderedDict()).get(key)
        if hit is not None and at - hit[1] < self._ttl_s:
            return hit[0]
        found = read()
        with self._lock:
            remembered = self._stores.setdefault(db, OrderedDict())
            remembered[key] = (found, at)
            remembered.move_to_end(key)
            while len(remembered) > self._most:
                remembered.popitem(last=False)
        return found

    def forget(self, db: Database, key: K) -> None:
        """Read ``key`` again next time (this process changed it)."""
        with self._lock:
            self._stores.get(getattr(db, "joined_to", None) or db, OrderedDict()).pop(key, None)


def write_setting(
    db: Database,
    row: StoredRow | None,
    mutation: Mutation,
    audit: dict[str, Any],
    what: str,
) -> None:
    """Commit ``mutation`` of a setting's row (``row``: as read before it, ``None``:
    absent), guarded by that version, as every write of feltdb's (a deletion must be: the
    audit chain's check of missing rows relies on it on PostgreSQL), with ``audit``.

    Raises:
        WorkloadError: ``WORKLOAD_CONFLICT`` (naming ``what``, the setting) if the row
            was written since it was read; ``WORKLOAD_STORAGE_FAILURE``.
    """
    collection, key = mutation.collection, mutation.key
    guard = (
        Precondition(collection, key, require_absent=True)
        if row is None
        else Precondition(collection, key, expected_version=row.version)
    )
    try:
        db.commit("settings_tx_" + secrets.token_hex(12), [mutation], [guard], audit)
    except StorageConflict:
        raise WorkloadError(
            ErrorCode.WORKLOAD_CONFLICT, f"{what} was changed meanwhile: try again"
        ) from None
