"""Choosing the work ``claim_next`` claims, inside the transaction that selected it.

The store asks the database to select a batch of ready candidates and hold them
(``Database.commit_selected``); :class:`CandidateChoice` looks through them for the first
this worker may run and plans its commit, or settles one found past a deadline or out of
attempts as ``claim`` would. It runs inside the selecting transaction, so the rows it sees
are the rows it commits against.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass

from feltdb.errors import WorkloadError
from feltdb.storage.base import PlannedCommit, RowReader, StoredRow
from feltdb.work import lifecycle, recovery
from feltdb.work.changes import Operation
from feltdb.work.deadlines import deadline_breach
from feltdb.work.models import Workload, WorkloadClaim
from feltdb.work.rows import MUTATED, LoadedWorkload, dependency_state, planned_commit, workload_of
from feltdb.work.scheduling import dependencies_satisfied


@dataclass(slots=True)
class CandidateChoice:
    """What ``claim_next`` asks of each batch of candidates, inside the transaction that
    selected them, and what it chose.
    """

    worker: str
    held: frozenset[str]
    lease_ms: int
    now: int
    definitions: frozenset[str] | None
    environments: frozenset[str] | None
    examined: int = 0
    chosen: tuple[LoadedWorkload, Operation] | None = None
    granted: WorkloadClaim | None = None

    def choose(self, rows: Sequence[StoredRow], read: RowReader) -> PlannedCommit | None:
        """The commit of the first candidate this worker may run, claimed; or, if it turns
        out past a deadline or out of attempts, settled as ``claim`` would settle it.
        ``None`` when no candidate will do.
        """
        # It may run again if the backend retries the transaction, so it starts afresh.
        self.examined, self.chosen, self.granted = len(rows), None, None
        for row in rows:
            loaded = LoadedWorkload.of(workload_of(row), row.version)
            workload = loaded.workload
            # The definitions are a guard only: the selection already holds nothing else.
            if (
                self.definitions is not None and workload.definition_id not in self.definitions
            ) or (self.environments is not None and workload.environment not in self.environments):
                continue
            if not workload.capability_snapshot <= self.held or not dependencies_satisfied(
                workload, functools.partial(dependency_state, read, workload)
            ):
                continue
            operation = self._settle(workload)
            if operation is None:
                continue  # not claimable after all: never fail the whole search
            self.chosen = (loaded, operation)
            return planned_commit(workload, MUTATED, row.version)
        return None

    def _settle(self, workload: Workload) -> Operation | None:
        breach = deadline_breach(workload, self.now)
        if breach is not None:
            recovery.time_out_past_deadline(workload, breach[0], breach[1], self.now)
            return Operation.DEADLINE
        if recovery.budget_exhausted(workload):
            recovery.dead_letter_exhausted(workload, self.now)
            return Operation.EXHAUSTED
        try:
            self.granted = lifecycle.claim(
                workload, self.worker, self.held, self.now, self.lease_ms
            )
        except WorkloadError:
            return None
        return Operation.CLAIM
