"""Two processes prune one store at once (a SQLite file shared by both, one PostgreSQL
database): each finished workload is deleted exactly once, by one of them, logged once,
nothing fails, and the audit chain verifies afterwards.

Each child opens its own ``WorkloadStore``, so the race is decided by the guarded
deletions alone. Both read the same first :data:`LIMIT` due workloads, wait for each other,
then delete them, so at least that pass overlaps whatever the machine's timing; then both
prune small passes until none is due.
"""

from __future__ import annotations

import multiprocessing
from collections import Counter
from collections.abc import Callable

from support import prune_children
from support.finished import finish_many

from feltdb import WorkloadStore
from feltdb.records.workload import DURABLE_WORK_COLLECTION as WORK
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
