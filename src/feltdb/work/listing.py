"""Listing an application's workloads: all of them, or a page at a time by a keyset seek
over the scheduling index, with what a reader's scope hides left out as if it did not
exist.
"""

from __future__ import annotations

import functools
import heapq
from collections.abc import Callable, Iterator
from typing import Final

import msgspec

from feltdb.auth.scope import Scope
from feltdb.records.codec import WorkloadPlace, stored_place, stored_workload_text
from feltdb.records.summary import WorkloadSummary
from feltdb.records.workload import DURABLE_WORK_COLLECTION, Workload, WorkloadDependency
from feltdb.storage.base import Database, StoredRow
from feltdb.storage.definition_pages import RangeColumn
from feltdb.work import inputs
from feltdb.work.cursors import cursor_of
from feltdb.work.eligibility import read_dependencies
from feltdb.work.inputs import Cursor
from feltdb.work.rows import dependency_row, workload_of
from feltdb.work.states import WorkloadState
from feltdb.work.summaries import summary_of

LIST_CHUNK_ROWS: Final = 16
"""Rows a list reads per statement: with those it answers, the most stored records it holds
at once."""

MAX_RANGES_MERGED: Final = 64
"""The most index ranges (a definition's or an environment's work in one state) a list
merges: a reader constrained to more than that reads the application's rows instead."""

MAX_DEPENDENCIES_READ: Final = 1024
"""The most dependencies a page reads (one statement) to tell what its ready work waits for."""

MAX_PAGE_CHARS: Final = 4 * 1024 * 1024
"""The most stored JSON (in characters) the workloads of one page may hold, past its first:
a page of large workloads holds fewer than its limit, and its cursor goes on."""

SummaryPage = tuple[list[WorkloadSummary], Cursor | None]
"""A page of a list, summarized, and the cursor of the next page (``None``: the last)."""


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
) -> SummaryPage:
    """One page of an application's workloads, summarized (optionally of one ``state``, of one
    ``definition``), after ``after``, the cursor the previous page answered (``None``: the
    first page).

    ``scope`` (a reader's) hides work outside it as if it did not exist, and ``definition``
    keeps only work of that definition: rows are read on, past what is left out, until
    ``limit`` workloads are found or the list ends, so a short page or a cursor tells a
    reader nothing of what it may not see. A list of some definitions (``definition``, or
    a scope narrowed to them), or else of a scope narrowed to some environments, reads only
    their index ranges (one per state and definition or environment, at most
    :data:`MAX_RANGES_MERGED`), merged in the list's order; past that many it reads the
    application's rows, :data:`LIST_CHUNK_ROWS` at a time.

    Bounded whatever the records hold: rows are read :data:`LIST_CHUNK_ROWS` at a time,
    each placed (:func:`~feltdb.records.codec.stored_place`) before it is decoded, and only
    the kept ones decoded, one at a time, each summarized
    (:func:`~feltdb.work.summaries.summary_of`) and let go before the next; a page stops
    early, its cursor set, once the workloads it holds would pass :data:`MAX_PAGE_CHARS`
    of stored JSON (it always holds one).

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
    where = (tenant_id, application_id, listed)
    states = 1 if listed is not None else len(WorkloadState)
    column, values = _ranges_read(scope, definition)
    if values and len(values) * states <= MAX_RANGES_MERGED:
        rows = _merged_ranges(db, where, (column, sorted(values)), after)
    else:
        rows = _application_rows(db, where, after)
    return _read_page(db, rows, limit, shown)


Placed = tuple[StoredRow, str, WorkloadPlace]
"""A row read for a list, its stored text, and where it stands."""


def _placed(row: StoredRow) -> Placed:
    text = row.text if row.text is not None else stored_workload_text(workload_of(row))
    return row, text, stored_place(row.key, text)


def _read_page(
    db: Database, rows: Iterator[Placed], limit: int, shown: Callable[[WorkloadPlace], bool]
) -> SummaryPage:
    """:func:`page`'s choosing: of ``rows``, in the list's order, those ``shown`` keeps, up
    to ``limit`` and the page's size bound; and the cursor of the next page.
    """
    found: list[WorkloadSummary] = []
    depending: dict[int, list[WorkloadDependency]] = {}
    held = 0
    following: Cursor | None = None
    for row, text, place in rows:
        if not shown(place):
            continue
        if len(found) == limit or (found and held + len(text) > MAX_PAGE_CHARS):
            following = cursor_of(found[-1])
            break
        workload = workload_of(row)
        if workload.dependencies and workload.state is WorkloadState.READY:
            depending[len(found)] = workload.dependencies
        found.append(summary_of(workload))
        held += len(text)
    return _with_waits(db, found, depending), following


def _with_waits(
    db: Database, found: list[WorkloadSummary], depending: dict[int, list[WorkloadDependency]]
) -> list[WorkloadSummary]:
    """``found``, each ready workload of ``depending`` (by its place) telling the first
    dependency it waits for, read in one statement of at most
    :data:`MAX_DEPENDENCIES_READ` rows (a workload whose dependencies are not all among
    them tells none).
    """
    # An ordered set, filled no further than the bound: a page of 500 ready workloads of
    # 1,024 dependencies each must not cost a scan of a half-million-long list per id.
    wanted: dict[str, None] = {}
    for dependencies in depending.values():
        for dependency in dependencies:
            if len(wanted) == MAX_DEPENDENCIES_READ:
                break
            wanted.setdefault(dependency.workload_id)
    read = list(wanted)
    rows = db.get_rows(DURABLE_WORK_COLLECTION, read) if read else {}
    for place, dependencies in depending.items():
        if any(d.workload_id not in wanted for d in dependencies):
            continue
        summary = found[place]
        row_of = functools.partial(dependency_row, _reader(rows), summary)
        awaited = read_dependencies(dependencies, row_of).awaited
        if awaited is not None:
            found[place] = msgspec.structs.replace(summary, waits_for=awaited)
    return found


def _reader(rows: dict[str, StoredRow]) -> Callable[[str, str], StoredRow | None]:
    """The rows read, as a row reader of the workload collection."""
    return lambda collection, key: rows.get(key)


def _application_rows(
    db: Database, where: tuple[str, str, str | None], after: Cursor | None
) -> Iterator[Placed]:
    """The application's rows (in a state, unless ``None``) after ``after``, read
    :data:`LIST_CHUNK_ROWS` at a time.
    """
    tenant_id, application_id, state = where
    while True:
        rows = db.page_rows(
            DURABLE_WORK_COLLECTION, tenant_id, application_id, state, after,
            limit=LIST_CHUNK_ROWS,
        )  # fmt: skip
        for row in rows:
            placed = _placed(row)
            after = _position(placed[2])
            yield placed
        if len(rows) < LIST_CHUNK_ROWS:
            return


def _merged_ranges(
    db: Database,
    where: tuple[str, str, str | None],
    ranged: tuple[RangeColumn, list[str]],
    after: Cursor | None,
) -> Iterator[Placed]:
    """The rows whose column ``ranged[0]`` holds one of ``ranged[1]`` (definitions, or
    environments), in a state, else in every state, after ``after``, in the list's order:
    one index range each (``rows_by_definition``, ``rows_by_environment``), merged. Each
    range reads a share of :data:`LIST_CHUNK_ROWS` at a time, so the rows held stay about
    that many.
    """
    tenant_id, application_id, state = where
    column, values = ranged
    states = [state] if state is not None else [s.value for s in WorkloadState]
    chunk = max(1, LIST_CHUNK_ROWS // (len(states) * len(values)))

    def one_range(state: str, value: str) -> Iterator[tuple[tuple[int, int, str], Placed]]:
        position = after
        while True:
            rows = db.page_rows_in_range(
                DURABLE_WORK_COLLECTION, tenant_id, application_id, state, (column, value),
                position, limit=chunk,
            )  # fmt: skip
            for row in rows:
                placed = _placed(row)
                position = _position(placed[2])
                yield (-position[0], position[1], position[2]), placed
            if len(rows) < chunk:
                return

    ranges = [one_range(s, v) for s in states for v in values]
    for _, placed in heapq.merge(*ranges, key=lambda entry: entry[0]):
        yield placed


def _position(place: WorkloadPlace) -> Cursor:
    return place.priority, place.created_at, place.workload_id


def _ranges_read(scope: Scope | None, definition: str | None) -> tuple[RangeColumn, frozenset[str]]:
    """The definitions or the environments a list may read alone, whichever are fewer
    (none: it reads the whole application); ``_shown`` still keeps only the work of both.
    """
    definitions = frozenset({definition}) if definition is not None else frozenset()
    if scope is not None and definition is None:
        definitions = scope.definitions
    environments = scope.environments if scope is not None else frozenset()
    narrowed: list[tuple[RangeColumn, frozenset[str]]] = [
        ("definition_id", definitions),
        ("environment", environments),
    ]
    given = [(column, values) for column, values in narrowed if values]
    if not given:
        return "definition_id", frozenset()
    return min(given, key=lambda ranged: len(ranged[1]))


def _shown(place: WorkloadPlace, *, scope: Scope | None, definition: str | None) -> bool:
    """Whether a page shows the workload at ``place`` to a reader in ``scope``."""
    if definition is not None and place.definition_id != definition:
        return False
    return scope is None or scope.admits(
        place.tenant_id, place.application_id, place.environment, place.definition_id
    )
