"""Listing an application's workloads: all of them, or a page at a time by a keyset seek
over the scheduling index, with what a reader's scope hides left out as if it did not
exist.
"""

from __future__ import annotations

from feltdb.auth.scope import Scope
from feltdb.records.workload import DURABLE_WORK_COLLECTION, Workload
from feltdb.storage.base import Database
from feltdb.work import inputs
from feltdb.work.cursors import cursor_of
from feltdb.work.inputs import Cursor
from feltdb.work.rows import workload_of
from feltdb.work.states import WorkloadState
from feltdb.work.unit import in_scope


def every_workload(db: Database, tenant_id: str, application_id: str) -> list[Workload]:
    """An application's committed workloads: priority descending, then oldest first."""
    rows = db.list_rows(
        DURABLE_WORK_COLLECTION,
        tenant_id=inputs.identifier(tenant_id, "tenant_id"),
        application_id=inputs.identifier(application_id, "application_id"),
    )
    return [workload_of(row) for row in rows]


def page(
    db: Database,
    tenant_id: str,
    application_id: str,
    *,
    state: WorkloadState | str | None,
    definition: str | None,
    after: Cursor | None,
    limit: int,
    scope: Scope | None,
) -> tuple[list[Workload], Cursor | None]:
    """One page of an application's workloads (optionally of one ``state``), after
    ``after``, the cursor the previous page answered (``None``: the first page).

    ``definition`` keeps only work of that definition id. The index does not hold the
    definition, so it filters the page that was read: a filtered page may hold fewer
    than ``limit`` workloads, even none, while the cursor goes on; follow it to the end.

    ``scope`` (a reader's) hides work outside it as if it did not exist: hidden work is
    never in a page and never its cursor, and pages are read on until ``limit``
    visible workloads are found or the list ends, so neither a short page nor a cursor
    tells the reader anything of what it may not see. The price: a reader that sees
    little of a large application reads past all it may not see.

    A keyset seek over the scheduling index (:meth:`Database.page_rows`), never an
    offset scan, so every page costs the same. Returns the page and the cursor of the
    next one: the ``(priority, created_at, workload_id)`` of the page's last workload,
    or ``None`` when no workload follows it (one extra row is read to know).

    Raises:
        WorkloadError: ``WORKLOAD_INVALID`` (a bad limit, state or cursor);
            ``WORKLOAD_STORAGE_FAILURE``.
    """
    tenant_id = inputs.identifier(tenant_id, "tenant_id")
    application_id = inputs.identifier(application_id, "application_id")
    limit = inputs.integer(limit, "limit", 1)
    listed = inputs.state(state)
    after = inputs.cursor(after) if after is not None else None
    if definition is not None:
        definition = inputs.identifier(definition, "definition")
    found: list[Workload] = []
    while len(found) <= limit:
        rows = db.page_rows(
            DURABLE_WORK_COLLECTION, tenant_id, application_id, listed, after, limit=limit + 1
        )
        batch = [workload_of(row) for row in rows]
        found.extend(workload for workload in batch if scope is None or in_scope(workload, scope))
        if len(batch) <= limit:
            break
        after = cursor_of(batch[-1])
    kept = found[:limit]
    # The cursor is the last workload read, kept or not, so no page is read twice.
    following = cursor_of(kept[-1]) if len(found) > limit and kept else None
    if definition is not None:
        kept = [workload for workload in kept if workload.definition_id == definition]
    return kept, following
