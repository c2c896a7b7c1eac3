"""Two processes prune one store at once (a SQLite file shared by both, one PostgreSQL
database): each finished workload is deleted exactly once, by one of them, logged once,
nothing fails, and the audit chain verifies afterwards. Two processes prune the log itself
at once, while a third writes: one chain, every deleted entry exported.

Each child opens its own ``WorkloadStore``, so the race is decided by the guarded
deletions alone. Both read the same first :data:`LIMIT` due workloads, wait for each other,
then delete them, so at least that pass overlaps whatever the machine's timing; then both
prune small passes until none is due.
"""

from __future__ import annotations

import json
import multiprocessing
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from support import prune_children
from support.finished import finish_many

from feltdb import WorkloadStore
from feltdb.records.workload import DURABLE_WORK_COLLECTION as WORK
from feltdb.work.log_export import check_export
from feltdb.work.pruning import PRUNED
from feltdb.work.retention import DAY

CTX = multiprocessing.get_context("spawn")
WORKLOADS = 600
LIMIT = 40
FINISHED_AT = 100
ROUND_TIMEOUT_S = 180


def test_two_processes_pruning_one_store_delete_each_workload_once(
    new_target: Callable[..., str],
) -> None:
    target = new_target()
    with WorkloadStore.open(target) as store:
        ids = finish_many(store, WORKLOADS, FINISHED_AT)
        kept = finish_many(store, 10, FINISHED_AT + 20 * DAY, prefix="young")
    barrier, answers = CTX.Barrier(2), CTX.Queue()
    arguments = (target, FINISHED_AT + 31 * DAY, LIMIT, barrier, answers)
    children = [
        CTX.Process(target=prune_children.prune_until_done, args=arguments) for _ in range(2)
    ]
    for child in children:
        child.start()
    (first, first_changed), (second, second_changed) = [
        answers.get(timeout=ROUND_TIMEOUT_S) for _ in children
    ]
    for child in children:
        child.join(ROUND_TIMEOUT_S)
        assert child.exitcode == 0
    # Both read the same first LIMIT workloads before either deleted: one of them pruned
    # each, and the other left it as changed.
    assert first_changed + second_changed >= LIMIT
    counted = Counter(first + second)
    assert sorted(counted) == sorted(ids)
    assert set(counted.values()) == {1}  # each once, by one of them
    with WorkloadStore.open(target) as store:
        logged = Counter(
            item["work_id"]
            for entry in store.db.committed_transactions_after(0)
            if entry.audit is not None and entry.audit.get("kind") == PRUNED
            for item in entry.audit["pruned"]
        )
        assert logged == counted
        assert not any(store.db.get_row(WORK, workload_id) for workload_id in ids)
        assert all(store.db.get_row(WORK, workload_id) for workload_id in kept)
        report = store.audit.verify()
        assert report.ok, report.problem


def test_two_processes_pruning_the_log_while_work_goes_on_leave_one_chain(
    new_target: Callable[..., str], tmp_path: Path
) -> None:
    target = new_target()
    with WorkloadStore.open(target) as store:
        finish_many(store, 300, FINISHED_AT)
        report = store.audit.verify()
        through = report.head_revision
        logged = [e.commit_revision for e in store.db.committed_transactions_after(0)]
    barrier, answers = CTX.Barrier(3), CTX.Queue()
    children = [
        CTX.Process(
            target=prune_children.prune_log_once,
            args=(target, through, str(tmp_path / f"{place}.jsonl"), barrier, answers),
        )
        for place in range(2)
    ]
    for child in children:
        child.start()
    with WorkloadStore.open(target) as store:
        barrier.wait(ROUND_TIMEOUT_S)
        # Work goes on meanwhile: rows the pruners write again are written by this too.
        finish_many(store, 200, FINISHED_AT + 1, prefix="during")
    outcomes = [answers.get(timeout=ROUND_TIMEOUT_S) for _ in children]
    for child in children:
        child.join(ROUND_TIMEOUT_S)
        assert child.exitcode == 0
    assert any(kind == "pruned" for kind, _, _ in outcomes), outcomes
    assert all(kind == "pruned" or code == "WORKLOAD_CONFLICT" for kind, code, _ in outcomes), (
        outcomes
    )
    exported: set[int] = set()
    for place in range(2):
        export = tmp_path / f"{place}.jsonl"
        if export.exists():
            check_export(export)
            lines = export.read_text().splitlines()[1:-1]
            exported |= {json.loads(line)["revision"] for line in lines}
    assert exported == set(logged)  # every entry deleted is in an export
    with WorkloadStore.open(target) as store:
        report = store.audit.verify()
        assert report.ok, report.problem
        assert report.pruned_through == through
        assert min(e.commit_revision for e in store.db.committed_transactions_after(0)) > through
