"""Finding work by text: a workload whose id or idempotency key holds the text.

Neither is indexed for substrings, so a search reads the list a page at a time (the
store's keyset pages, in their order) and keeps what matches, at most :data:`SEARCH_SCAN`
workloads per call, and tells how far it got (its cursor goes on from there). The bound is
of the work the reader sees: each page is the store's (``WorkloadStore.page``), which
reads past the work a narrowed reader may not see, as every list does, so that no cursor
ever names hidden work.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from feltdb.records.summary import WorkloadSummary
from feltdb.work.cursors import cursor_of
from feltdb.work.inputs import Cursor

SEARCH_SCAN = 2000
"""The most workloads one search reads."""
SEARCH_BATCH = 500
"""Workloads asked for per page read."""
MAX_QUERY_CHARS = 200
"""The longest text searched for."""

PageReader = Callable[[Cursor | None, int], tuple[list[WorkloadSummary], Cursor | None]]
"""Reads the page after a cursor, of at most so many workloads: ``(page, next cursor)``."""


@dataclass(frozen=True, slots=True)
class Found:
    """A search's (or a plain page's) workloads, the cursor to go on from (``None``: the
    list's end), and how many workloads were read to find them.
    """

    items: list[WorkloadSummary] = field(default_factory=list)
    after: Cursor | None = None
    read: int = 0


def matches(workload: WorkloadSummary, text: str) -> bool:
    """Whether ``workload``'s id or idempotency key holds ``text``, ignoring case."""
    folded = text.casefold()
    return folded in workload.workload_id.casefold() or folded in (
        workload.idempotency_key.casefold()
    )


def search(
    read: PageReader,
    text: str | None,
    after: Cursor | None,
    limit: int,
    scan: int = SEARCH_SCAN,
    batch: int = SEARCH_BATCH,
) -> Found:
    """The first ``limit`` workloads after ``after`` that match ``text`` (``None``: one
    page, unfiltered), from at most ``scan`` workloads read, ``batch`` a page.
    """
    if text is None:
        page, following = read(after, limit)
        return Found(page, following, len(page))
    found: list[WorkloadSummary] = []
    read_so_far = 0
    cursor = after
    # Bounded by pages asked for, not by workloads returned: a page filtered by definition
    # may come back empty while the list goes on.
    for _ in range(-(-scan // batch)):
        page, cursor = read(cursor, batch)
        read_so_far += len(page)
        for index, workload in enumerate(page):
            if matches(workload, text):
                found.append(workload)
                if len(found) == limit:
                    rest = index + 1 < len(page) or cursor is not None
                    return Found(found, cursor_of(workload) if rest else None, read_so_far)
        if cursor is None:
            break
    return Found(found, cursor, read_so_far)
