"""Free pages of a SQLite store returned to the file system, a bounded number a call
(:mod:`feltdb.storage.reclaiming`), on real files."""

from __future__ import annotations

import sqlite3
import threading
from contextlib import closing
from pathlib import Path

import pytest
from test_sqlite import make_schema_1_store

from feltdb.errors import ErrorCode, WorkloadError
from feltdb.storage import Mutation
from feltdb.storage.reclaiming import MAX_RECLAIM_PAGES, SpaceReturned
from feltdb.storage.sqlite import SQLiteDatabase

PAGE = 4096
NOTHING = SpaceReturned(0, 0, 0)


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "store.db"


def pragma(path: Path, name: str) -> int:
    with closing(sqlite3.connect(path)) as connection:
        value: int = connection.execute(f"PRAGMA {name}").fetchone()[0]
        return value


def file_pages(path: Path) -> int:
    """The file's size in pages, after the log is folded into it."""
    with closing(sqlite3.connect(path)) as connection:
        connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return path.stat().st_size // PAGE


def written_then_deleted(db: SQLiteDatabase, rows: int) -> None:
    """``rows`` rows of about 3 KB each written, then deleted: their pages are free."""
    keys = [f"k{n}" for n in range(rows)]
    for first in range(0, rows, 100):
        db.commit(
            f"fill-{first}",
            [
                Mutation("work", key, {"text": key + "x" * 3000})
                for key in keys[first : first + 100]
            ],
        )
    db.commit("empty", [Mutation("work", key, None) for key in keys])


def test_a_new_store_file_keeps_a_page_map_to_return_free_pages(path: Path) -> None:
    SQLiteDatabase(path).close()
    assert pragma(path, "auto_vacuum") == 2  # INCREMENTAL
    SQLiteDatabase(path).close()  # opening it again changes nothing
    assert pragma(path, "auto_vacuum") == 2


def test_free_pages_go_back_at_most_the_bound_a_call_until_none_is_left(path: Path) -> None:
    with closing(SQLiteDatabase(path)) as db:
        written_then_deleted(db, 600)
        free, pages = pragma(path, "freelist_count"), pragma(path, "page_count")
        assert free > 5 * 64
        returned: list[SpaceReturned] = []
        while not returned or returned[-1].left:
            returned.append(db.reclaim_space(64))
            assert returned[-1].left == pragma(path, "freelist_count")
            assert pragma(path, "page_count") == pages - sum(step.pages for step in returned)
        # Each call moved 64 pages at most, and cut the file by them and the page-map
        # pages that served them (one in about 800).
        assert all(64 <= step.pages <= 65 for step in returned[:-1]), returned
        assert 1 <= returned[-1].pages <= 65
        assert all(step.bytes == step.pages * PAGE for step in returned)
        assert sum(step.pages for step in returned) >= free
        assert pragma(path, "freelist_count") == 0
        assert file_pages(path) == pragma(path, "page_count")  # the file itself shrank
        assert db.reclaim_space(64) == NOTHING
        assert db.get_row("work", "k0") is None
        db.commit("again", [Mutation("work", "k0", {"text": "back"})])  # the store still works


def test_a_file_made_without_the_page_map_is_left_as_it_is(path: Path) -> None:
    make_schema_1_store(path)  # as an older release made it: auto_vacuum NONE
    with closing(SQLiteDatabase(path)) as db:  # upgraded in place, and it works
        written_then_deleted(db, 200)
        free, pages = pragma(path, "freelist_count"), pragma(path, "page_count")
        assert free > 0
        assert db.reclaim_space(MAX_RECLAIM_PAGES) == NOTHING
        assert (pragma(path, "freelist_count"), pragma(path, "page_count")) == (free, pages)
        assert pragma(path, "auto_vacuum") == 0
        db.commit("after", [Mutation("work", "k", {"text": "reuses a free page"})])
        assert pragma(path, "page_count") == pages


def test_returning_pages_waits_for_the_write_lock_as_every_write_does(path: Path) -> None:
    with closing(SQLiteDatabase(path)) as db:
        written_then_deleted(db, 100)
    with closing(SQLiteDatabase(path, busy_timeout_ms=50)) as db:
        holder = sqlite3.connect(path, isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")
        try:
            with pytest.raises(WorkloadError) as raised:
                db.reclaim_space(8)
            assert raised.value.code == ErrorCode.WORKLOAD_STORAGE_FAILURE
            assert "reclaim space" in raised.value.message
            assert "locked by other writers" in raised.value.message
        finally:
            holder.execute("ROLLBACK")
            holder.close()
        assert db.reclaim_space(8).pages >= 8
        # A second writer that starts while pages are returned waits its turn, unharmed.
        writer = threading.Thread(
            target=lambda: db.commit("during", [Mutation("work", "during", {"n": 1})])
        )
        writer.start()
        db.reclaim_space(MAX_RECLAIM_PAGES)
        writer.join()
        assert db.get_row("work", "during") is not None


@pytest.mark.parametrize("max_pages", [-1, MAX_RECLAIM_PAGES + 1])
def test_a_bound_outside_its_range_is_refused(path: Path, max_pages: int) -> None:
    with closing(SQLiteDatabase(path)) as db:
        written_then_deleted(db, 20)
        free = pragma(path, "freelist_count")
        with pytest.raises(WorkloadError) as raised:
            db.reclaim_space(max_pages)
        assert raised.value.code == ErrorCode.WORKLOAD_INVALID
        assert "max_pages" in raised.value.message
        assert db.reclaim_space(0) == NOTHING
        assert pragma(path, "freelist_count") == free
