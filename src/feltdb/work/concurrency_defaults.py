"""Concurrency limits configured per definition: the default for new work of a definition
that names no concurrency key of its own (:mod:`feltdb.work.concurrency`).

An application's operator may set, for one definition, how many of its workloads hold a
claim at once. It is applied at admission: a workload of that definition admitted without
a ``concurrency_key`` is given the key ``definition:DEFINITION`` and that limit, written in
its record as if it had asked for them, so the claim path reads nothing more (the
definition's work shares one key; work naming that same key shares it too). A change
applies to work admitted after it (by another process, within :data:`DEFAULTS_TTL_S`: a
process reads a definition's default once a second at most); work already admitted keeps
the limit it was given.
Work naming a key of its own keeps its own.
"""

from __future__ import annotations

import secrets
import threading
import time
import weakref
from typing import Any, Final

import msgspec

from feltdb.errors import ErrorCode, WorkloadError
from feltdb.records.workload import Workload
from feltdb.storage.base import Database, Mutation, Precondition, RowIndex, StorageConflict
from feltdb.work.concurrency import DEFINITION_KEY_PREFIX, slot_key

__all__ = [
    "DEFAULTS_COLLECTION",
    "Defaults",
    "definition_limits",
    "set_definition_limit",
    "with_default_limit",
]

DEFAULTS_COLLECTION: Final = "system_concurrency_defaults"
LIMITS_SET: Final = "limits.definition_set"
"""The audit kind of a change of a definition's default limit."""
MAX_DEFAULTS_LISTED: Final = 1000

Named = tuple[str, str, str]
"""A definition of a tenant's application: (tenant, application, definition)."""
Defaults = dict[Named, int | None]
"""Default limits read by one admission call, by (tenant, application, definition)."""


def _key(tenant_id: str, application_id: str, definition_id: str) -> str:
    return slot_key(tenant_id, application_id, definition_id)


def with_default_limit(db: Database, workload: Workload, read: Defaults) -> Workload:
    """``workload`` (new, not yet admitted), with its definition's default limit if it has
    one and the workload names no key of its own; ``read``: the defaults this call read,
    updated (a batch of one definition reads its default once).
    """
    if workload.concurrency_key is not None:
        return workload
    named = (workload.tenant_id, workload.application_id, workload.definition_id)
    if named not in read:
        read[named] = _REMEMBERED.limit(db, named)
    limit = read[named]
    if limit is None:
        return workload
    key = DEFINITION_KEY_PREFIX + workload.definition_id
    return msgspec.structs.replace(workload, concurrency_key=key, concurrency_limit=limit)


DEFAULTS_TTL_S: Final = 1.0
"""How long a process trusts a default it read: a change made by another process applies
to work that process admits within this long (this one's own change, at once)."""
REMEMBERED_MAX: Final = 4096
"""The most (tenant, application, definition) defaults a process remembers per store."""


class _Remembered:
    """Defaults read lately, per store, so that an admission reads a definition's default
    once a second at most, not once a workload (bounded; forgotten with their store).
    """

    def __init__(self) -> None:
        self._stores: weakref.WeakKeyDictionary[Database, dict[Named, tuple[int | None, float]]]
        self._stores = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()

    def limit(self, db: Database, named: Named) -> int | None:
        at = time.monotonic()
        with self._lock:
            hit = self._stores.get(db, {}).get(named)
        if hit is not None and at - hit[1] < DEFAULTS_TTL_S:
            return hit[0]
        row = db.get_row(DEFAULTS_COLLECTION, _key(*named))
        found = row.document.get("limit") if row is not None else None
        limit = found if type(found) is int and found > 0 else None
        with self._lock:
            remembered = self._stores.setdefault(db, {})
            if len(remembered) >= REMEMBERED_MAX:
                remembered.clear()
            remembered[named] = (limit, at)
        return limit

    def forget(self, db: Database, named: Named) -> None:
        with self._lock:
            self._stores.get(db, {}).pop(named, None)


_REMEMBERED: Final = _Remembered()


def set_definition_limit(
    db: Database,
    tenant_id: str,
    application_id: str,
    definition_id: str,
    limit: int | None,
    *,
    actor: str,
    now: int,
) -> None:
    """Set (``None``: remove) ``definition_id``'s default limit in a tenant's application,
    in one audited commit.

    Raises:
        WorkloadError: ``WORKLOAD_CONFLICT`` if it was changed meanwhile;
            ``WORKLOAD_STORAGE_FAILURE``.
    """
    document: dict[str, Any] | None = (
        None
        if limit is None
        else {"definition_id": definition_id, "limit": limit, "set_by": actor, "set_at": now}
    )
    index = RowIndex(tenant_id=tenant_id, application_id=application_id)
    key = _key(tenant_id, application_id, definition_id)
    row = db.get_row(DEFAULTS_COLLECTION, key)
    if document is None and row is None:
        return  # nothing to remove
    audit = {
        "kind": LIMITS_SET, "actor": actor, "tenant": tenant_id, "application": application_id,
        "definition_id": definition_id, "limit": limit, "at": now,
    }  # fmt: skip
    # Guarded by the version read, as every write of feltdb's (a deletion must be: the
    # audit chain's check of missing rows relies on it on PostgreSQL).
    guard = (
        Precondition(DEFAULTS_COLLECTION, key, require_absent=True)
        if row is None
        else Precondition(DEFAULTS_COLLECTION, key, expected_version=row.version)
    )
    mutation = Mutation(DEFAULTS_COLLECTION, key, document, index)
    try:
        db.commit("limits_tx_" + secrets.token_hex(12), [mutation], [guard], audit)
        _REMEMBERED.forget(db, (tenant_id, application_id, definition_id))
    except StorageConflict:
        raise WorkloadError(
            ErrorCode.WORKLOAD_CONFLICT,
            f"the limit of definition {definition_id!r} was changed meanwhile: try again",
        ) from None


def definition_limits(db: Database, tenant_id: str, application_id: str) -> dict[str, int]:
    """The application's default limits, by definition (at most
    :data:`MAX_DEFAULTS_LISTED`).
    """
    rows = db.list_rows(
        DEFAULTS_COLLECTION,
        tenant_id=tenant_id,
        application_id=application_id,
        limit=MAX_DEFAULTS_LISTED,
    )
    found = {}
    for row in rows:
        definition, limit = row.document.get("definition_id"), row.document.get("limit")
        if isinstance(definition, str) and type(limit) is int:
            found[definition] = limit
    return dict(sorted(found.items()))
