"""persist-queue (SQLiteAckQueue) draining N items; each item got, then acked.

Durability: persist-queue opens its connections with ``PRAGMA journal_mode=WAL`` and sets
nothing else, so ``synchronous`` would be SQLite's compiled default; this driver's
subclass adds ``PRAGMA synchronous=FULL`` to every connection it opens, as feltdb does.
Each ``get`` commits the item's ``unack`` mark and each ``ack`` its ``acked`` mark (two
commits per item); acked rows stay in the table (the record that they finished).

The queue is one file shared by P processes. persist-queue is thread-safe, not
process-safe: ``get`` selects the next ready row and then marks it in a second statement,
so two processes can take the same item. The driver counts what the processes took
against N and reports the surplus as duplicates.
"""

from __future__ import annotations

import sqlite3
import time
from typing import Any

from harness import child
from persistqueue import SQLiteAckQueue
from persistqueue.exceptions import Empty

from peers.cli import main


class FullSyncAckQueue(SQLiteAckQueue):  # type: ignore[misc]
    def _new_db_connection(self, path: str, multithreading: bool, timeout: float) -> Any:
        connection: sqlite3.Connection = super()._new_db_connection(path, multithreading, timeout)
        connection.execute("PRAGMA synchronous=FULL;")
        return connection


def open_queue(folder: str) -> FullSyncAckQueue:
    return FullSyncAckQueue(folder, auto_resume=False, timeout=60.0)


def prepare(folder: str, n: int) -> None:
    queue = open_queue(folder)
    dumps = queue._serializer.dumps
    now = time.time()
    statement = queue._SQL_INSERT.format(table_name=queue._table_name)
    with queue._putter as connection:
        connection.executemany(statement, [(dumps({"i": i}), now) for i in range(n)])
    assert queue._count() == n
    queue.close()


def work(folder: str, index: int) -> None:
    queue = open_queue(folder)
    at_go = child.wait_for_go()
    done = 0
    while True:
        try:
            item = queue.get(block=False, raw=True)
        except Empty:
            break
        queue.ack(item)
        done += 1
    child.report(done, at_go)


def count(folder: str) -> int:
    queue = open_queue(folder)
    return int(queue.acked_count())


if __name__ == "__main__":
    main(prepare, work, count, __doc__)
