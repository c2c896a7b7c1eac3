"""Listing an application's workloads: all of them, or a page at a time by a keyset seek
over the scheduling index, with what a reader's scope hides left out as if it did not
exist.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Final

from feltdb.auth.scope import Scope
from feltdb.records.codec import WorkloadPlace, stored_place, stored_workload_text
from feltdb.records.workload import DURABLE_WORK_COLLECTION, Workload
from feltdb.storage.base import Database
from feltdb.work import inputs
from feltdb.work.cursors import cursor_of
from feltdb.work.inputs import Cursor
from feltdb.work.rows import workload_of
from feltdb.work.states import WorkloadState

LIST_CHUNK_ROWS: Final = 16
"""Rows a list reads per statement: with those it answers, the most stored records it holds
at once."""

MAX_PAGE_CHARS: Final = 4 * 1024 * 1024
"""The most stored JSON (in characters) the workloads of one page may hold, past its first:
a page of large workloads holds fewer than its limit, and its cursor goes on."""


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
    """One page of an application's workloads (optionally of one ``state``, of one
    ``definition``), after ``after``, the cursor the previous page answered (``None``: the
    first page).

    ``scope`` (a reader's) hides work outside it as if it did not exist, and ``definition``
    keeps only work of that definition: rows are read on, past what is left out, until
    ``limit`` workloads are found or the list ends, so a short page or a cursor tells a
    reader nothing of what it may not see. (The index holds neither environment nor
    definition for a page's order: a reader that sees little of a large application reads
    past all it may not see, :data:`LIST_CHUNK_ROWS` rows at a time.)

    Bounded whatever the records hold: rows are read :data:`LIST_CHUNK_ROWS` at a time,
    each placed (:func:`~feltdb.records.codec.stored_place`) before it is decoded, and only
    the kept ones decoded; a page stops early, its cursor set, once the workloads it holds
    would pass :data:`MAX_PAGE_CHARS` of stored JSON (it always holds one).

    A keyset seek over the scheduling index (:meth:`Database.page_rows`), never an
    offset scan, so every page costs the same. Returns the page and the cursor of the
    next one: the ``(priority, created_at, workload_id)`` of the page's last workload, or
    ``None`` when no workload it would show follows.

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
    shown = functools.partial(_shown, scope=scope, definition=definition)
    return _read_page(db, (tenant_id, application_id, listed), after, limit, shown)


def _read_page(
    db: Database,
    where: tuple[str, str, str | None],
    after: Cursor | None,
    limit: int,
    shown: Callable[[WorkloadPlace], bool],
) -> tuple[list[Workload], Cursor | None]:
    """:func:`page`'s reading: of the application's rows (in a state) ``where`` names,
    those ``shown`` keeps, after ``after``, up to ``limit`` and the page's size bound.
    """
    tenant_id, application_id, state = where
    found: list[Workload] = []
    held = 0
    while True:
        rows = db.page_rows(
            DURABLE_WORK_COLLECTION, tenant_id, application_id, state, after,
            limit=LIST_CHUNK_ROWS,
        )  # fmt: skip
        for row in rows:
            text = row.text if row.text is not None else stored_workload_text(workload_of(row))
            place = stored_place(row.key, text)
            after = (place.priority, place.created_at, place.workload_id)
            if not shown(place):
                continue
            if len(found) == limit or (found and held + len(text) > MAX_PAGE_CHARS):
                return found, cursor_of(found[-1])
            found.append(workload_of(row))
            held += len(text)
        if len(rows) < LIST_CHUNK_ROWS:
            return found, None


def _shown(place: WorkloadPlace, *, scope: Scope | None, definition: str | None) -> bool:
    """Whether a page shows the workload at ``place`` to a reader in ``scope``."""
    if definition is not None and place.definition_id != definition:
        return False
    return scope is None or scope.admits(
        place.tenant_id, place.application_id, place.environment, place.definition_id
    )
