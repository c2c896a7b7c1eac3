"""The read retention prunes from: the oldest keys of a state created before an instant."""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import pytest
from support.rows import put, work_index

from feltdb.storage.sqlite import SQLiteDatabase
from feltdb.storage.sqlite_file import QUERIES


@pytest.fixture
def db(tmp_path: Path) -> Iterator[SQLiteDatabase]:
    with closing(SQLiteDatabase(tmp_path / "store.db")) as database:
        yield database


def test_keys_come_oldest_first_of_the_state_and_up_to_the_instant(db: SQLiteDatabase) -> None:
    put(db, "late", work_index("SUCCEEDED", created_at=50))
    put(db, "b", work_index("SUCCEEDED", priority=9, created_at=10, tenant_id="t2"))
    put(db, "a", work_index("SUCCEEDED", created_at=10))
    put(db, "first", work_index("SUCCEEDED", priority=-3, created_at=5))
    put(db, "other", work_index("CANCELLED", created_at=1))

    found = db.keys_created_before("work", "SUCCEEDED", 40, None, limit=10)

    assert found == [(5, "first"), (10, "a"), (10, "b")]  # every tenant, by age, not priority
    assert db.keys_created_before("work", "SUCCEEDED", 40, (10, "a"), limit=10) == [(10, "b")]
    assert db.keys_created_before("work", "SUCCEEDED", 40, None, limit=2) == found[:2]
    assert db.keys_created_before("work", "SUCCEEDED", 40, None, limit=0) == []
    assert db.keys_created_before("work", "READY", 40, None, limit=10) == []


def test_the_read_is_of_the_index_alone(db: SQLiteDatabase, tmp_path: Path) -> None:
    query = QUERIES["keys_created_before"]
    params = dict.fromkeys(re.findall(r":(\w+)", query), 1)
    with closing(sqlite3.connect(tmp_path / "store.db")) as connection:
        plan = [row[3] for row in connection.execute("EXPLAIN QUERY PLAN " + query, params)]
    # The sort is of the matching keys (a top-N in bounded memory), never of documents.
    assert any("USING COVERING INDEX rows_by_state" in detail for detail in plan), plan
