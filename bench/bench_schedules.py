"""The scheduler's pass (``store.schedules.run_due``): what one pass costs over S
schedules when nothing is due (the cost every server pays each maintenance interval), and
when each has one occurrence due (one ``admit_many`` and one guarded commit a schedule).

Runs on a SQLite file in a temporary directory and, given a URL (``--target`` or
``FELTDB_TEST_PG``), on PostgreSQL. Each schedule is in its own application (the bound is
100 an application), one cron and one interval alternately.

Usage: python bench/bench_schedules.py [--schedules 100,1000] [--rounds 5] [--out FILE]
       (scripts/with-postgres python bench/bench_schedules.py uses FELTDB_TEST_PG)
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from feltdb import GrantSigner, Subject, WorkloadStore
from feltdb.auth.policy import application_grant

START = 1_800_000_000  # on the hour
SIGNER = GrantSigner("bench", b"a secret key of 16 bytes or more")
OPS = Subject.human("ops")


def seed(store: WorkloadStore, count: int, tenant: str) -> None:
    """``count`` schedules of ``tenant``, each due every hour on the hour."""
    for n in range(count):
        app = f"app{n}"
        grant = SIGNER.sign(application_grant(
            OPS, tenant, app, {"workload:execute"}, issued_at=0, expires_at=START * 2))  # fmt: skip
        recurrence: dict[str, Any] = {"cron": "0 * * * *"} if n % 2 else {"interval_s": 3600}
        store.schedules.create(
            {"schedule_id": f"s{n}", "template": {"definition_id": "d", "input": n},
             **recurrence},
            tenant_id=tenant, application_id=app, requested_by=OPS,
            authorization_snapshot=grant, now=START,
        )  # fmt: skip


def measure(target: str, count: int, rounds: int) -> dict[str, Any]:
    """Milliseconds per pass with nothing due, and with one occurrence due a schedule."""
    tenant = f"bench-{time.time_ns()}"  # a store given by URL may hold an earlier run's
    with WorkloadStore.open(target) as store:
        seed(store, count, tenant)
        idle = []
        for _ in range(rounds):
            began = time.perf_counter()
            assert store.schedules.run_due(now=START + 10) == []
            idle.append((time.perf_counter() - began) * 1000)
        due = []
        for hour in range(1, rounds + 1):
            began = time.perf_counter()
            admitted = store.schedules.run_due(now=START + 3600 * hour, most=count)
            due.append((time.perf_counter() - began) * 1000)
            assert len(admitted) == count, len(admitted)
        for n in range(count):  # the next size's passes read only its own
            store.schedules.delete(tenant, f"app{n}", f"s{n}", "human:ops")
    return {
        "schedules": count,
        "idle_pass_ms": round(statistics.median(idle), 2),
        "due_pass_ms": round(statistics.median(due), 2),
        "per_occurrence_ms": round(statistics.median(due) / count, 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--schedules", default="100,1000")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--target", default=os.environ.get("FELTDB_TEST_PG"))
    parser.add_argument("--out", type=Path)
    arguments = parser.parse_args()
    sizes = [int(size) for size in arguments.schedules.split(",")]
    results = []
    with tempfile.TemporaryDirectory() as folder:
        for size in sizes:
            sqlite = measure(str(Path(folder) / f"s{size}.db"), size, arguments.rounds)
            results.append({"backend": "sqlite", **sqlite})
            print(json.dumps(results[-1]))
    if arguments.target:
        for size in sizes:
            postgres = measure(arguments.target, size, arguments.rounds)
            results.append({"backend": "postgres", **postgres})
            print(json.dumps(results[-1]))
    if arguments.out is not None:
        arguments.out.write_text(json.dumps({"results": results}, indent=2))


if __name__ == "__main__":
    main()
