"""Commits per second: N single-row plans committed one ``commit`` each, against
``commit_many`` in batches of 1, 10 and 100 (one transaction, one sync to disk, a batch).

Each plan is what the work layer commits for one workload: one row, guarded
``require_absent``, with an audit record. Runs on a SQLite file in a temporary directory
(WAL, ``synchronous=FULL``) and, given a URL (``--target`` or ``FELTDB_TEST_PG``), on
PostgreSQL (``synchronous_commit`` as the server has it, on by default). ``--savepoints``
adds a row for batches of 100 with a ``SAVEPOINT`` around every plan, the design
``feltdb.storage.writes`` does not take (it sets one only around plans of two guards).
``--arrays`` adds, on PostgreSQL, batches of 2, 3, 4, 5, 10 and 100 written by arrays
(``feltdb.storage.array_writes``, the default there) and plan by plan, alternately, each
``--rounds`` times, and the same for batches of updates guarded by version (claims).

Usage: python bench/bench_commit_many.py [--plans 2000] [--target postgresql://…]
       [--savepoints] [--arrays [--rounds 3]]
       (scripts/with-postgres python bench/bench_commit_many.py uses FELTDB_TEST_PG)
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from feltdb.storage import engine, writes
from feltdb.storage.base import (
    Commit,
    Database,
    Mutation,
    PlannedCommit,
    Precondition,
    RowIndex,
    StorageConflict,
)
from feltdb.storage.dialect import Session
from feltdb.storage.targets import open_database

BATCHES = (1, 10, 100)


def plans(run: str, count: int) -> list[PlannedCommit]:
    """``count`` plans of one new row each, as an admission commits them."""
    made = []
    for n in range(count):
        key = f"{run}-{n:06d}"
        document = {"workload_id": key, "state": "ready", "input": {"n": n, "pad": "x" * 200}}
        index = RowIndex("t", "app", "ready", n % 10, n, definition_id="d")
        made.append(
            PlannedCommit(
                f"op-{key}",
                [Mutation("work", key, document, index)],
                [Precondition("work", key, require_absent=True)],
                {"kind": "created", "work_id": key, "tenant": "t", "application": "app"},
            )
        )
    return made


def one_commit_each(db: Database, planned: Sequence[PlannedCommit]) -> None:
    for p in planned:
        db.commit(p.operation_id, p.mutations, p.preconditions, p.audit)


def batched(size: int) -> Callable[[Database, Sequence[PlannedCommit]], None]:
    def run(db: Database, planned: Sequence[PlannedCommit]) -> None:
        for first in range(0, len(planned), size):
            answers = db.commit_many(planned[first : first + size])
            assert all(isinstance(answer, Commit) for answer in answers), answers

    return run


def updates(planned: Sequence[PlannedCommit], version: int) -> list[PlannedCommit]:
    """A claim of each row ``planned`` wrote, now at ``version``: one update, guarded."""
    return [
        PlannedCommit(
            f"{p.operation_id}:v{version}",
            [Mutation("work", m.key, {**(m.document or {}), "state": "claimed"}, m.index)],
            [Precondition("work", m.key, expected_version=version)],
            p.audit,
        )
        for p in planned
        for m in p.mutations
    ]


def _savepoint_every_plan(
    session: Session,
    queries: writes.Queries,
    batch: Sequence[writes.PreparedCommit],
    *,
    arrays: bool = False,
) -> list[Commit | StorageConflict]:
    answers: list[Commit | StorageConflict] = []
    for prepared in batch:
        session.execute(queries["savepoint"], {})
        answers.append(writes.write_plan(session, queries, prepared, len(answers)))
        session.execute(queries["release_savepoint"], {})
    return answers


@contextmanager
def savepoint_every_plan() -> Iterator[None]:
    """``commit_many`` with a ``SAVEPOINT`` around every plan (no plan of this bench loses)."""
    module = vars(engine)  # the name SQLEngine.commit_many calls
    module["write_batch"] = _savepoint_every_plan
    try:
        yield
    finally:
        module["write_batch"] = writes.write_batch


def measure(target: str, count: int, with_savepoints: bool) -> list[dict[str, Any]]:
    modes: list[tuple[str, Callable[[Database, Sequence[PlannedCommit]], None], bool]] = [
        ("commit, one each", one_commit_each, False),
        *((f"commit_many x{size}", batched(size), False) for size in BATCHES),
    ]
    if with_savepoints:
        modes.append(("commit_many x100, savepoint per plan", batched(100), True))
    rows = []
    db = open_database(target)
    try:
        for number, (name, run, savepoints) in enumerate(modes):
            planned = plans(f"r{int(time.time())}m{number}", count)
            with savepoint_every_plan() if savepoints else contextlib.nullcontext():
                started = time.perf_counter()
                run(db, planned)
                seconds = time.perf_counter() - started
            rows.append(
                {
                    "mode": name,
                    "seconds": round(seconds, 3),
                    "commits_per_s": round(count / seconds),
                }
            )
    finally:
        db.close()
    return rows


ARRAY_BATCHES = (2, 3, 4, 5, 10, 100)


def measure_arrays(target: str, count: int, rounds: int) -> list[dict[str, Any]]:
    """Batches written by arrays and plan by plan, alternately: inserts, then updates."""
    rows: list[dict[str, Any]] = []
    db = open_database(target)
    dialect = db._dialect  # type: ignore[attr-defined]
    try:
        for number in range(rounds):
            for size in ARRAY_BATCHES:
                for arrays in (True, False):
                    dialect.array_writes = arrays
                    how = "arrays" if arrays else "plan by plan"
                    planned = plans(f"a{int(time.time())}r{number}s{size}{arrays}", count)
                    for kind, batch in (("insert", planned), ("update", updates(planned, 1))):
                        started = time.perf_counter()
                        batched(size)(db, batch)
                        seconds = time.perf_counter() - started
                        rows.append(
                            {
                                "mode": f"commit_many x{size} {kind}s, {how}",
                                "round": number,
                                "seconds": round(seconds, 3),
                                "commits_per_s": round(count / seconds),
                            }
                        )
    finally:
        db.close()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--plans", type=int, default=2000)
    parser.add_argument("--target", default=os.environ.get("FELTDB_TEST_PG"))
    parser.add_argument("--savepoints", action="store_true")
    parser.add_argument("--arrays", action="store_true")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", default=str(Path(__file__).parent / "results/commit_many.json"))
    args = parser.parse_args()
    results: dict[str, list[dict[str, Any]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        results["sqlite"] = measure(str(Path(tmp) / "bench.db"), args.plans, args.savepoints)
    if args.target:
        results["postgresql"] = measure(args.target, args.plans, args.savepoints)
        if args.arrays:
            results["postgresql"] += measure_arrays(args.target, args.plans, args.rounds)
    print(f"{args.plans} single-row plans")
    print(f"{'backend':<11} {'mode':<42} {'seconds':>8} {'commits/s':>10}")
    for backend, rows in results.items():
        for row in rows:
            print(
                f"{backend:<11} {row['mode']:<42} {row['seconds']:>8.3f} {row['commits_per_s']:>10}"
            )
    Path(args.out).write_text(
        json.dumps(
            {
                "benchmark": "commit vs commit_many, single-row require_absent plans",
                "plans": args.plans,
                "results": results,
            },
            indent=2,
        )
        + "\n"
    )


if __name__ == "__main__":
    main()
