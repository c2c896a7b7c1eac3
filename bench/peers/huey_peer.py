"""huey (SqliteHuey) draining N no-op tasks; one consumer loop per process.

Durability: ``SqliteHuey(journal_mode="wal", fsync=True)``. huey's ``SqliteStorage``
defaults to WAL and, with ``fsync=None``, leaves ``synchronous`` at SQLite's default;
``fsync=True`` makes it run ``PRAGMA synchronous=2`` (FULL) on every connection, as
feltdb's store does. A task's return value is stored (huey's result store, the ``kv``
table), so each task costs huey a dequeue commit (``begin exclusive``, select, delete) and
a result commit: its record that the task finished.

Each worker process runs huey's own execution path, ``huey.dequeue()`` then
``huey.execute(task)`` (what a consumer worker thread does, without its idle polling),
until the queue is empty.
"""

from __future__ import annotations

from pathlib import Path

from harness import child
from huey import SqliteHuey

from peers.cli import main


def make(folder: str) -> tuple[SqliteHuey, object]:
    huey = SqliteHuey(
        "bench", filename=str(Path(folder) / "huey.db"), journal_mode="wal", fsync=True
    )

    @huey.task()
    def noop(i: int) -> bool:
        return True

    return huey, noop


def prepare(folder: str, n: int) -> None:
    Path(folder).mkdir(parents=True, exist_ok=True)
    huey, noop = make(folder)
    rows = [(huey.storage.name, huey.serialize_task(noop.s(i)), 0) for i in range(n)]  # type: ignore[attr-defined]
    with huey.storage.db(commit=True) as cursor:
        cursor.executemany("insert into task (queue, data, priority) values (?, ?, ?)", rows)
    assert huey.pending_count() == n


def work(folder: str, index: int) -> None:
    huey, _ = make(folder)
    at_go = child.wait_for_go()
    done = 0
    while (task := huey.dequeue()) is not None:
        huey.execute(task)
        done += 1
    child.report(done, at_go)


def count(folder: str) -> int:
    huey, _ = make(folder)
    rows = huey.storage.sql(
        "select count(*) from kv where queue = ?", (huey.storage.name,), results=True
    )
    return int(rows[0][0])


if __name__ == "__main__":
    main(prepare, work, count, __doc__)
