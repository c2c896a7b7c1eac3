"""Admission throughput: ``admit`` one at a time against ``admit_many`` in batches; and, on
SQLite, what bounds ``admit_many`` (:func:`admission_parts`)."""

from __future__ import annotations

import contextlib
import sqlite3
import time
from pathlib import Path
from typing import Any

from harness.collector import collector_time

from feltdb import WorkloadStore
from feltdb.records.codec import stored_workload_text
from feltdb.work.admission import new_workload, validate_admission
from feltdb.work.admitting import workload_id_of
from feltdb_runs import backlog
from feltdb_runs.drains import target_for

SINGLE_CAP = 2000
"""Single admissions are one fsync'd commit each: at most this many are timed."""

PARTS_BATCH = 1000
"""The batch :func:`admission_parts` admits and writes by, as the best ``admit_many`` rate."""


def admit_rates(backend: str, n: int, batches: tuple[int, ...] = (100, 1000)) -> dict[str, Any]:
    rates: dict[str, Any] = {}
    singles = min(n, SINGLE_CAP)
    with target_for(backend, "admit_single") as (target, _), WorkloadStore.open(target) as store:
        requests = backlog.requests(singles)
        began = time.perf_counter()
        for request in requests:
            store.admit(request)
        rates["admit"] = {"workloads": singles, "per_s": singles / (time.perf_counter() - began)}
    for size in batches:
        count = max(n, size)
        with target_for(backend, f"admit_{size}") as (target, _):
            with WorkloadStore.open(target) as store:
                requests = backlog.requests(count)
                began = time.perf_counter()
                for first in range(0, count, size):
                    store.admit_many(requests[first : first + size])
                took = time.perf_counter() - began
        rates[f"admit_many({size})"] = {"workloads": count, "per_s": count / took}
    return rates


def admission_parts(n: int) -> dict[str, float]:
    """What one admission of ``admit_many`` (batches of :data:`PARTS_BATCH`) costs on
    SQLite, in µs, by part, measured in one process on the same disk:

    - ``admit_many_us``: the whole call, wall clock (as :func:`admit_rates` times it);
    - ``gc_us``: of that, the cyclic garbage collector's time (``gc.callbacks``);
    - ``statements_us``: the rows and log entries that run wrote, written again into a
      fresh store file by ``executemany``, a transaction per batch (WAL, full sync): the
      two ``INSERT``s an admission is, with no Python per row, wall clock;
    - ``checks_us``: ``validate_admission`` of each request, CPU;
    - ``record_us``: building each workload and its stored text, CPU.
    """
    with target_for("sqlite", "admit_parts") as (target, home):
        requests = backlog.requests(n)
        with WorkloadStore.open(target) as store, collector_time() as collecting:
            began = time.perf_counter()
            answers = []
            for first in range(0, n, PARTS_BATCH):
                answers += store.admit_many(requests[first : first + PARTS_BATCH])
            took = time.perf_counter() - began
        refused = [answer for answer in answers if isinstance(answer, Exception)]
        if refused:
            raise RuntimeError(f"admission refused: {refused[0]}")
        statements = _statements_alone(Path(target), home / "again.db")
        began = time.process_time()
        for request in requests:
            validate_admission(request)
        checks = time.process_time() - began
        began = time.process_time()
        for request in requests:
            stored_workload_text(new_workload(request, workload_id_of(request)))
        record = time.process_time() - began
    return {
        "workloads": n,
        "admit_many_us": took / n * 1e6,
        "gc_us": collecting.seconds / n * 1e6,
        "statements_us": statements / n * 1e6,
        "checks_us": checks / n * 1e6,
        "record_us": record / n * 1e6,
    }


def _statements_alone(written: Path, again: Path) -> float:
    """Seconds to write ``written``'s rows and log entries again into a fresh store at
    ``again``, :data:`PARTS_BATCH` of each a transaction, by ``executemany``.

    A little less than the store's own statements do: each row and entry is written with
    its revision as a literal, where the store computes it (``MAX(commit_revision)``, one
    index seek), and with no ``ON CONFLICT`` nor ``RETURNING``; so the figure is a floor.
    """
    WorkloadStore.open(again).close()  # the store's schema, as a new store has it
    with contextlib.closing(sqlite3.connect(written)) as source:
        rows = source.execute("SELECT * FROM rows ORDER BY revision").fetchall()
        entries = source.execute("SELECT * FROM transactions ORDER BY commit_revision").fetchall()
    if not rows or len(rows) != len(entries):
        raise RuntimeError(f"{len(rows)} rows and {len(entries)} log entries: one each expected")
    target = sqlite3.connect(again, isolation_level=None)
    try:
        target.execute("PRAGMA synchronous = FULL")
        insert_row = f"INSERT INTO rows VALUES ({', '.join('?' * len(rows[0]))})"
        insert_entry = f"INSERT INTO transactions VALUES ({', '.join('?' * len(entries[0]))})"
        began = time.perf_counter()
        for first in range(0, len(rows), PARTS_BATCH):
            target.execute("BEGIN IMMEDIATE")
            target.executemany(insert_row, rows[first : first + PARTS_BATCH])
            target.executemany(insert_entry, entries[first : first + PARTS_BATCH])
            target.execute("COMMIT")
        return time.perf_counter() - began
    finally:
        target.close()
