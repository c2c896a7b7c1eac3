"""The workers view: each worker the store's own records name, read at a bounded cost.

Nothing is kept of a worker but what its claims and the log say, so the view is the same
from every server on one database:

- the leases held now: the current claims of the work in :data:`HELD_STATES`, read a page
  at a time through the scheduling index (:meth:`~feltdb.storage.base.Database.page_rows`),
  at most :data:`MAX_HELD_READ` workloads in all (seen by the reader or not);
- completions and failures: the audit records of the newest
  :data:`~feltdb.storage.base.Database.recent_operations` log entries (at most
  :data:`ACTIVITY_SCAN`) of the last :data:`~feltdb.records.workers.RATE_MINUTES` whole
  minutes, each counted for the worker whose attempt it ended (``attempt_worker_id``;
  records written before it was kept are not counted).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

from feltdb.auth.scope import Scope
from feltdb.records.workers import (
    MAX_DEFINITIONS,
    MAX_LEASES,
    MAX_WORKERS,
    RATE_MINUTES,
    STALE_AFTER_SECONDS,
    HeldLease,
    WorkerSeen,
    WorkersSeen,
)
from feltdb.records.workload import DURABLE_WORK_COLLECTION, Workload
from feltdb.storage.base import Database
from feltdb.work.changes import Operation
from feltdb.work.cursors import cursor_of
from feltdb.work.inputs import Cursor
from feltdb.work.rows import workload_of
from feltdb.work.states import WorkloadState

__all__ = ["WorkersSeen", "workers_seen"]

HELD_STATES: Final = (
    WorkloadState.CLAIMED, WorkloadState.RUNNING, WorkloadState.CHECKPOINTED,
    WorkloadState.CANCELLATION_REQUESTED,
)  # fmt: skip
"""The states in which work's current claim is a lease its worker holds."""
MAX_HELD_READ: Final = 2_000
"""The most workloads in :data:`HELD_STATES` one view reads, every state's together."""
HELD_PAGE: Final = 250
"""Workloads read per page of held work."""
ACTIVITY_SCAN: Final = 20_000
"""The most log entries one view reads for completions and failures."""
COMPLETED: Final = frozenset({Operation.COMPLETE.value})
"""The operations counted as a worker's completion: its reported result."""
FAILED: Final = frozenset({Operation.FAIL.value, Operation.DEADLINE.value, Operation.RECOVER.value})
"""The operations counted as a worker's failure: its reported failure, a deadline that
ended its attempt, its lease expired (the worker presumed lost)."""


@dataclass(slots=True)
class _Tally:
    """What the records read say of one worker, as they are read."""

    leases: list[HeldLease] = field(default_factory=list)
    definitions: set[str] = field(default_factory=set)
    completed: int = 0
    failed: int = 0


def workers_seen(db: Database, scope: Scope, now: int) -> WorkersSeen:
    """The workers of ``scope``'s application at ``now`` (unix seconds), as the work
    ``scope`` sees names them: the leases they hold and, for a reader who sees the whole
    application, their completions and failures per minute over the last
    :data:`~feltdb.records.workers.RATE_MINUTES` whole minutes. A worker is stale when its
    freshest heartbeat is older than :data:`~feltdb.records.workers.STALE_AFTER_SECONDS`
    or a lease it holds has expired. Freshest heartbeat first (workers holding no lease
    last, by id), at most :data:`~feltdb.records.workers.MAX_WORKERS`.

    Raises:
        WorkloadError: ``WORKLOAD_STORAGE_FAILURE``.
    """
    tallies: dict[str, _Tally] = {}
    complete = _read_held(db, scope, tallies)
    counted = not scope.narrowed
    if counted:
        complete = _read_activity(db, scope, now, tallies) and complete
    seen = [_seen(worker, tally, now) for worker, tally in tallies.items()]
    seen.sort(key=lambda w: (-(w.last_heartbeat or -(2**53)), w.worker_id))
    return WorkersSeen(
        now=now, workers=seen[:MAX_WORKERS], minutes=RATE_MINUTES,
        complete=complete and len(seen) <= MAX_WORKERS, counted=counted,
    )  # fmt: skip


def _read_held(db: Database, scope: Scope, tallies: dict[str, _Tally]) -> bool:
    """Tally the leases of the work in :data:`HELD_STATES` that ``scope`` sees, reading at
    most :data:`MAX_HELD_READ` workloads; whether every one was read.
    """
    read = 0
    for state in HELD_STATES:
        after: Cursor | None = None
        while True:
            if read >= MAX_HELD_READ:
                return False
            rows = db.page_rows(
                DURABLE_WORK_COLLECTION, scope.tenant_id, scope.application_id, state.value,
                after, limit=min(HELD_PAGE, MAX_HELD_READ - read),
            )  # fmt: skip
            if not rows:
                break
            read += len(rows)
            for workload in map(workload_of, rows):
                after = cursor_of(workload)
                _tally_lease(workload, scope, tallies)
    return True


def _tally_lease(workload: Workload, scope: Scope, tallies: dict[str, _Tally]) -> None:
    claim = workload.current_claim
    if claim is None or not scope.admits(
        workload.tenant_id, workload.application_id, workload.environment,
        workload.definition_id,
    ):  # fmt: skip
        return
    tally = tallies.setdefault(claim.worker_id, _Tally())
    tally.definitions.add(workload.definition_id)
    tally.leases.append(
        HeldLease(
            workload_id=workload.workload_id, definition_id=workload.definition_id,
            state=workload.state.value, expires_at=claim.expires_at,
            last_heartbeat=claim.last_heartbeat,
        )
    )  # fmt: skip


def _read_activity(db: Database, scope: Scope, now: int, tallies: dict[str, _Tally]) -> bool:
    """Tally each worker's completions and failures in the last
    :data:`~feltdb.records.workers.RATE_MINUTES` whole minutes up to ``now``; whether the
    log read reached back to the window's start.
    """
    since = now - now % 60 - (RATE_MINUTES - 1) * 60
    entries, floor = db.recent_operations(
        scope.tenant_id, scope.application_id, since, ACTIVITY_SCAN
    )
    for entry in entries:
        if entry.worker is None:
            continue
        if entry.operation in COMPLETED:
            tallies.setdefault(entry.worker, _Tally()).completed += 1
        elif entry.operation in FAILED:
            tallies.setdefault(entry.worker, _Tally()).failed += 1
    # The read stopped short of the window when its oldest entry is inside it.
    return floor is None or floor < since


def _seen(worker: str, tally: _Tally, now: int) -> WorkerSeen:
    """One worker's entry, its lists cut to their bounds (leases expiring first)."""
    leases = sorted(tally.leases, key=lambda lease: (lease.expires_at, lease.workload_id))
    freshest = max((lease.last_heartbeat for lease in leases), default=None)
    expired = sum(1 for lease in leases if lease.expires_at <= now)
    reason = None
    if expired:
        reason = f"{expired} lease{'s' if expired > 1 else ''} expired"
    elif freshest is not None and now - freshest > STALE_AFTER_SECONDS:
        reason = f"no heartbeat for over {STALE_AFTER_SECONDS} s"
    return WorkerSeen(
        worker_id=worker, definitions=sorted(tally.definitions)[:MAX_DEFINITIONS],
        leases=leases[:MAX_LEASES], lease_count=len(leases), last_heartbeat=freshest,
        completed=tally.completed, failed=tally.failed,
        completed_per_minute=round(tally.completed / RATE_MINUTES, 2),
        failed_per_minute=round(tally.failed / RATE_MINUTES, 2),
        stale=reason is not None, stale_reason=reason,
    )  # fmt: skip
