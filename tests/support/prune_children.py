"""Child-process body for ``tests/reliability/test_prune_race.py``: a process that prunes.

A spawned child imports this module by name (``support.prune_children``; a spawned child
starts with its parent's ``sys.path``), so it takes plain arguments and answers plain
results on a queue.
"""

from __future__ import annotations

import os
from typing import Any

from feltdb import WorkloadStore
from feltdb.work.pruning import delete_due

BARRIER_TIMEOUT_S = 60


def prune_until_done(target: str, now: int, limit: int, barrier: Any, answers: Any) -> None:
    """Open the store at ``target``, read the ``limit`` workloads due first (the other
    child reads the same), wait at ``barrier``, delete them, then prune passes of ``limit``
    at ``now`` until one says nothing more is due. Puts on ``answers`` the ids this child
    pruned and how many due workloads it left because another writer pruned them first.
    """
    with WorkloadStore.open(target) as store:
        actor = f"pruner-{os.getpid()}"
        found = store.retention.due(now=now, limit=limit)
        barrier.wait(BARRIER_TIMEOUT_S)
        deleted = delete_due(store.db, found, actor, now)
        pruned = [item.workload_id for item in found if item.workload_id in deleted]
        changed = len(found) - len(deleted)
        while True:
            report = store.retention.prune(actor, now=now, limit=limit)
            pruned += [item["work_id"] for item in report.pruned]
            changed += report.changed
            if not report.more:
                answers.put((pruned, changed))
                return


def prune_log_once(target: str, through: int, export: str, barrier: Any, answers: Any) -> None:
    """Open the store at ``target``, wait at ``barrier``, prune its log up to ``through``
    exporting to ``export``; put on ``answers`` the report's JSON, or the refusal's code
    and message.
    """
    from pathlib import Path

    from feltdb import WorkloadError

    with WorkloadStore.open(target) as store:
        barrier.wait(BARRIER_TIMEOUT_S)
        try:
            report = store.audit.prune_log(Path(export), through, actor=f"human:p{os.getpid()}")
        except WorkloadError as error:
            answers.put(("refused", error.code, error.message))
            return
        answers.put(("pruned", report.to_json(), ""))
