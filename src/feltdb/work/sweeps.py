"""The maintenance sweeps through the unit of work: time out work past a deadline, and
recover work whose lease lapsed, reading only what the scheduling index says is due.

Each decision is made on the committed version of the workload, and committed guarded by
it: a workload another writer changed first (in a race, its own sweep) is left to it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from feltdb.errors import ErrorCode, WorkloadError
from feltdb.records.workload import DURABLE_WORK_COLLECTION, Workload
from feltdb.storage.base import StorageConflict
from feltdb.work import recovery
from feltdb.work.changes import Operation
from feltdb.work.deadlines import deadline_breach
from feltdb.work.rows import LoadedWorkload, workload_of
from feltdb.work.scheduling import row_index
from feltdb.work.unit import UnitOfWork

log = logging.getLogger("feltdb.store")

MAINTENANCE_BATCH = 256
"""Due workloads a sweep reads per index query."""


def enforce_deadlines(unit: UnitOfWork, now: int) -> list[str]:
    """Time out every workload past one of its deadlines; the ids timed out. Deadlines come
    from committed timestamps, so the decision is the same after a restart and on any
    writer; a workload another writer changed first is left to it.
    """

    def time_out(workload: Workload) -> Workload | None:
        breach = deadline_breach(workload, now)
        if breach is None:
            return None
        return recovery.time_out_past_deadline(workload, breach[0], breach[1], now)

    return sweep(unit, "deadline_at", now, time_out, Operation.DEADLINE)


def recover_expired(unit: UnitOfWork, now: int) -> list[str]:
    """Recover every workload whose lease lapsed (its worker is presumed lost); the ids
    recovered. The attempt is recorded lost and the retry policy decides ``READY`` or
    ``DEAD_LETTER``; a workload another writer recovered (or completed) first is left to it.
    """

    def recover(workload: Workload) -> Workload | None:
        if not recovery.lease_lapsed(workload, now):
            return None
        return recovery.recover(workload, now)

    return sweep(unit, "lease_expires_at", now, recover, Operation.RECOVER)


def sweep(
    unit: UnitOfWork,
    column: str,
    now: int,
    act: Callable[[Workload], Workload | None],
    operation: Operation,
) -> list[str]:
    """Apply ``act`` to every workload the index says is due on ``column`` at ``now``;
    ``act`` re-decides on the committed version and answers the workload it decided
    (``None``: nothing to do).
    """
    acted: list[str] = []
    # Every key looked at, acted on or not. A row passed over may stay due (a stale
    # index, a lost race) or leave (a race lost to a completion): so each read skips the
    # keys already seen, not a count of them, and reads enough past them to find
    # MAINTENANCE_BATCH new ones if there are that many.
    seen: set[str] = set()
    while True:
        due = unit.db.rows_due(
            DURABLE_WORK_COLLECTION, column, now, limit=len(seen) + MAINTENANCE_BATCH
        )
        fresh = [row for row in due if row.key not in seen]
        if not fresh:
            return acted
        for row in fresh:
            seen.add(row.key)
            loaded = LoadedWorkload.of(workload_of(row), row.version)
            decided = act(loaded.workload)
            if decided is None:
                continue  # not due after all (the index was stale)
            try:
                unit.commit(loaded.decided(decided), operation)
            except StorageConflict:
                # Another writer committed this workload first (in a race, its own
                # recovery). Nothing of ours was committed; if it still needs acting
                # on, the next pass sees it.
                continue
            except WorkloadError as error:
                if error.code != ErrorCode.WORKLOAD_INVALID.value:
                    raise
                # One workload that cannot be changed (a record past every bound, written
                # before records had one) must not stop the pass for all the others.
                log.warning("%s: %s skipped: %s", operation.value, row.key, error.message)
                continue
            acted.append(row.key)


def rebuild_indexes(unit: UnitOfWork) -> int:
    """Recompute every workload's scheduling index from its committed document (after an
    upgrade that changes how the index is derived, or to repair one): the index is derived,
    the document is the authority. Documents, versions and the revision are untouched.
    Answers how many rows were rewritten.
    """
    rebuilt = 0
    for row in unit.db.list_rows(DURABLE_WORK_COLLECTION):
        if unit.db.update_index(DURABLE_WORK_COLLECTION, row.key, row_index(workload_of(row))):
            rebuilt += 1
    if rebuilt:
        unit.announce()  # a repaired index may make work claimable
    return rebuilt
