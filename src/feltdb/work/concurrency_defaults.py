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

from typing import Any, Final

import msgspec

from feltdb.records.workload import Workload
from feltdb.storage.base import Database, Mutation, RowIndex
from feltdb.work.concurrency import DEFINITION_KEY_PREFIX, slot_key
from feltdb.work.settings import Remembered, write_setting

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
        read[named] = _REMEMBERED.value(db, named, lambda: _default_of(db, named))
    limit = read[named]
    if limit is None:
        return workload
    key = DEFINITION_KEY_PREFIX + workload.definition_id
    return msgspec.structs.replace(workload, concurrency_key=key, concurrency_limit=limit)


DEFAULTS_TTL_S: Final = 1.0
"""How long a process trusts a default it read: a change made by another process applies
to work that process admits within this long (this one's own change, at once)."""
_REMEMBERED: Final[Remembered[Named, int | None]] = Remembered(DEFAULTS_TTL_S)
"""The defaults read lately, per store: an admission reads a definition's once a second."""


def _default_of(db: Database, named: Named) -> int | None:
    """``named``'s default limit as committed now (``None``: none)."""
    row = db.get_row(DEFAULTS_COLLECTION, _key(*named))
    found = row.document.get("limit") if row is not None else None
    return found if type(found) is int and found > 0 else None


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
    mutation = Mutation(DEFAULTS_COLLECTION, key, document, index)
    write_setting(db, row, mutation, audit, f"the limit of definition {definition_id!r}")
    _REMEMBERED.forget(db, (tenant_id, application_id, definition_id))


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
