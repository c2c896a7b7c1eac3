"""The space pruning frees: on SQLite each pass returns a bounded number of free pages to
the file system until none is left; on PostgreSQL none (autovacuum makes it reusable)."""

from __future__ import annotations

import sqlite3
from contextlib import closing

from support.finished import finish_many

from feltdb import WorkloadStore
from feltdb.server.maintenance import Maintenance
from feltdb.storage.targets import sqlite_path
from feltdb.work.pruning import MAX_PRUNE_BATCH, RECLAIM_PAGES, PruneReport
from feltdb.work.retention import DAY, RetentionPolicy

FINISHED_AT = 100
LATER = FINISHED_AT + 31 * DAY
FINISHED = 5000
"""Enough finished work that pruning it frees more than two passes' bound of pages."""


def file_pages(store_target: str) -> tuple[int, int]:
    """The SQLite file's page count and free pages."""
    path = sqlite_path(store_target)
    assert path is not None
    with closing(sqlite3.connect(path)) as connection:
        count = connection.execute("PRAGMA page_count").fetchone()[0]
        free = connection.execute("PRAGMA freelist_count").fetchone()[0]
    return count, free


def test_each_pass_returns_at_most_its_bound_of_free_pages_until_none_is_left(
    store: WorkloadStore, store_target: str
) -> None:
    ids = finish_many(store, FINISHED, FINISHED_AT)
    on_sqlite = sqlite_path(store_target) is not None
    pages_before = file_pages(store_target)[0] if on_sqlite else 0
    reports: list[PruneReport] = []
    shrunk_to: list[int] = []
    while not reports or reports[-1].again:
        reports.append(
            store.retention.prune("human:ops", RetentionPolicy(), LATER, limit=MAX_PRUNE_BATCH)
        )
        if on_sqlite:
            pages, free = file_pages(store_target)
            shrunk_to.append(pages)
            assert reports[-1].free_pages_left == free
    assert sum(len(report.pruned) for report in reports) == FINISHED
    if not on_sqlite:  # PostgreSQL: autovacuum's work, not a pass's
        assert all(
            (report.reclaimed_pages, report.reclaimed_bytes, report.free_pages_left) == (0, 0, 0)
            for report in reports
        )
        return
    returned = [report.reclaimed_pages for report in reports]
    # The bound, and the page-map pages that served it (one in about 800), each pass while
    # a bound's worth was left; then the rest; the file shorter by each pass's pages.
    assert len(reports) >= 2, returned
    assert all(RECLAIM_PAGES <= pages <= RECLAIM_PAGES + 4 for pages in returned), returned
    assert shrunk_to == [pages_before - sum(returned[: n + 1]) for n in range(len(reports))]
    assert all(report.reclaimed_bytes == report.reclaimed_pages * 4096 for report in reports)
    assert 0 < file_pages(store_target)[1] == reports[-1].free_pages_left < RECLAIM_PAGES
    # What a pass left, the next returns though nothing is due.
    last = store.retention.prune("human:ops", RetentionPolicy(), LATER)
    assert (last.pruned, last.reclaimed_pages, last.free_pages_left) == (
        [],
        reports[-1].free_pages_left,
        0,
    )
    assert file_pages(store_target)[1] == 0
    assert store.db.get_rows("system_durable_work", ids[:10]) == {}
    assert store.audit.verify().ok


def test_the_maintenance_loop_prunes_again_at_once_while_a_bound_of_free_pages_is_left(
    store: WorkloadStore, store_target: str
) -> None:
    finish_many(store, FINISHED, FINISHED_AT)
    # One large pass by hand frees more than its bound returns.
    first = store.retention.prune("human:ops", RetentionPolicy(), LATER, limit=MAX_PRUNE_BATCH)
    maintenance = Maintenance(store, lambda: LATER, RetentionPolicy())
    report = maintenance.prune_if_due(LATER)
    assert report is not None
    if sqlite_path(store_target) is None:
        assert first.free_pages_left == report.free_pages_left == 0
        assert report.again is report.more
        return
    assert first.free_pages_left >= RECLAIM_PAGES and first.again
    while report is not None and report.again:
        # A pass that left a bound's worth is followed by another at the next pass.
        report = maintenance.prune_if_due(LATER)
        assert report is not None
    assert report is not None and report.free_pages_left < RECLAIM_PAGES
    assert maintenance.prune_if_due(LATER) is None  # then a minute's wait
