"""What the concurrency limits of one tenant's application hold now: each key a claim took
a slot of, its limit, and the workloads holding its slots (:mod:`feltdb.work.concurrency`).
"""

from __future__ import annotations

from typing import Final

from feltdb.auth.policy import OPERATE, READ, authorize_application
from feltdb.fields import MAX_CONCURRENCY_LIMIT
from feltdb.records.limits import ConcurrencyKey, ConcurrencyKeys
from feltdb.records.workload import DURABLE_WORK_COLLECTION
from feltdb.storage.base import Database
from feltdb.work import inputs
from feltdb.work.authority import Authority
from feltdb.work.concurrency import SLOTS_COLLECTION, holders_of, live_holders
from feltdb.work.concurrency_defaults import definition_limits, set_definition_limit

__all__ = ["MAX_KEYS_LISTED", "concurrency_keys", "concurrency_keys_as", "set_definition_limit_as"]

MAX_KEYS_LISTED: Final = 1000
"""The most keys one answer lists (those whose slots were taken most lately first are not
preferred: the first in the index's order)."""


def concurrency_keys(db: Database, tenant_id: str, application_id: str) -> ConcurrencyKeys:
    """Each concurrency key of the application a claim took a slot of, with its limit and
    its live holders (those whose rows still hold the claim they took it with), at most
    :data:`MAX_KEYS_LISTED`, by key.

    Raises:
        WorkloadError: ``WORKLOAD_STORAGE_FAILURE``.
    """
    rows = db.list_rows(
        SLOTS_COLLECTION,
        tenant_id=tenant_id,
        application_id=application_id,
        limit=MAX_KEYS_LISTED + 1,
    )
    named = {row.key: holders_of(row) for row in rows[:MAX_KEYS_LISTED]}
    holders = [holder for named_holders in named.values() for holder in named_holders]
    held = db.get_rows(DURABLE_WORK_COLLECTION, holders) if holders else {}
    keys = []
    for row in rows[:MAX_KEYS_LISTED]:
        key, limit = row.document.get("key"), row.document.get("limit")
        if not isinstance(key, str):
            continue
        live = live_holders(named[row.key], held)
        keys.append(
            ConcurrencyKey(
                key=key, limit=limit if type(limit) is int else None, holders=sorted(live)
            )
        )
    keys.sort(key=lambda entry: entry.key)
    defaults = definition_limits(db, tenant_id, application_id)
    return ConcurrencyKeys(keys=keys, complete=len(rows) <= MAX_KEYS_LISTED, definitions=defaults)


def set_definition_limit_as(
    acting: Authority, definition_id: str, limit: int | None, now: int
) -> None:
    """Set (``None``: remove) the default concurrency limit of ``definition_id``'s new work
    in ``acting``'s application (``workload:operate`` over the whole of it, unconstrained),
    recorded as its subject's: :func:`~feltdb.work.concurrency_defaults.set_definition_limit`.

    Raises:
        WorkloadError: ``WORKLOAD_UNAUTHORIZED``; ``WORKLOAD_INVALID`` (the definition, a
            limit not 1 to 10,000); ``WORKLOAD_CONFLICT``; ``WORKLOAD_STORAGE_FAILURE``.
    """
    acting.whole_application(
        lambda grant: authorize_application(grant, OPERATE), "a definition's limit is"
    )
    definition_id = inputs.identifier(definition_id, "definition_id")
    if limit is not None:
        limit = inputs.integer(limit, "limit", 1, MAX_CONCURRENCY_LIMIT)
    scope = acting.scope
    set_definition_limit(
        acting.store.db, scope.tenant_id, scope.application_id, definition_id, limit,
        actor=acting.actor, now=now,
    )  # fmt: skip


def concurrency_keys_as(acting: Authority) -> ConcurrencyKeys:
    """:func:`concurrency_keys` of ``acting``'s application, to a caller that may read all
    of it (``workload:read``, unconstrained: a key's holders are any definition's work).

    Raises:
        WorkloadError: ``WORKLOAD_UNAUTHORIZED``; ``WORKLOAD_STORAGE_FAILURE``.
    """
    acting.whole_application(
        lambda grant: authorize_application(grant, READ), "the concurrency keys are"
    )
    scope = acting.scope
    return concurrency_keys(acting.store.db, scope.tenant_id, scope.application_id)
