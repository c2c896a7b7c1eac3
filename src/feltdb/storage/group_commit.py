"""Group commit: single commits arriving at once from several threads, written in one
transaction (one sync to disk) instead of one each.

The first thread to arrive while no commit is being written leads: it takes every plan
waiting (its own among them), writes them with :meth:`Database.commit_many`, and hands
each waiting thread its own answer. Threads that arrive while it writes wait; when the
leader is done, the first of them leads the next group. Nothing waits on a timer, so a
lone commit costs what it always did; under load a group grows to what arrived during
one write, which is when a sync to disk would have been paid per commit.

Each plan keeps its own preconditions (a guard lost fails that plan alone, exactly as
:meth:`Database.commit` would have raised it), and each thread is answered only after the
group's transaction committed: nothing is acknowledged before it is durable.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Sequence

from feltdb.errors import ErrorCode, WorkloadError
from feltdb.limits import MAX_PLANS_PER_BATCH
from feltdb.storage.base import (
    Commit,
    Database,
    PlannedCommit,
    storage_failure,
)

__all__ = ["CommitMany", "GroupCommit"]


class _Waiting:
    """One thread's plan, and what became of it (or that it leads the next group)."""

    __slots__ = ("answer", "leads", "passed_on", "plan", "ready")

    def __init__(self, plan: PlannedCommit) -> None:
        self.plan = plan
        self.answer: Commit | WorkloadError | BaseException | None = None
        self.leads = False
        """Whether this thread leads (it arrived with none leading, or was handed the lead)."""
        self.passed_on = False
        """Whether it has handed the lead on (or given it up): once only."""
        self.ready = threading.Event()


CommitMany = Callable[[list[PlannedCommit]], Sequence[Commit | WorkloadError]]
"""Writes a group's plans in one transaction: per plan, its commit, its lost guard, or its
refusal (raised to its own thread)."""


class GroupCommit:
    """Commits plans of concurrent threads over ``db`` in shared transactions.

    Args:
        db: the database written to.
        max_plans: the most plans one transaction takes (at most
            :data:`~feltdb.limits.MAX_PLANS_PER_BATCH`).
        commit_many: how a group is written (``db.commit_many`` unless told).
    """

    def __init__(
        self,
        db: Database,
        *,
        max_plans: int = MAX_PLANS_PER_BATCH,
        commit_many: CommitMany | None = None,
    ) -> None:
        self.db = db
        self._commit_many = commit_many
        self.max_plans = max(1, min(max_plans, MAX_PLANS_PER_BATCH))
        self._lock = threading.Lock()
        self._queue: deque[_Waiting] = deque()
        self._leading = False

    def commit(self, plan: PlannedCommit) -> Commit:
        """Commit ``plan`` as :meth:`Database.commit` would, possibly in one transaction
        with other threads' plans; answers once that transaction is durable.

        Raises:
            StorageConflict: a guard of ``plan`` was lost (the others' may still commit).
            WorkloadError: as :meth:`Database.commit` raises for ``plan``.
        """
        waiting = _Waiting(plan)
        try:
            with self._lock:
                self._queue.append(waiting)
                waiting.leads = not self._leading
                self._leading = True
            if not waiting.leads:
                waiting.ready.wait()
            if waiting.leads:
                self._lead(waiting)
        except BaseException:
            # Interrupted (a KeyboardInterrupt in the main thread, say) while waiting or
            # leading: never leave a plan queued for nobody, nor the lead with nobody.
            with self._lock:
                if waiting in self._queue:
                    self._queue.remove(waiting)
                if waiting.leads:
                    self._pass_lead(waiting)
            raise
        answer = waiting.answer
        if answer is None:  # cannot happen: every member is answered before it is woken
            raise storage_failure("a group commit answered nothing for this commit")
        if isinstance(answer, BaseException):
            raise answer
        return answer

    def _lead(self, own: _Waiting) -> None:
        """Write groups until ``own`` is answered, then hand the lead to the next waiter."""
        try:
            while own.answer is None:
                with self._lock:
                    count = min(self.max_plans, len(self._queue))
                    group = [self._queue.popleft() for _ in range(count)]
                try:
                    self._write(group)
                finally:
                    for waiting in group:
                        if waiting.answer is None:  # the write was interrupted part-way
                            waiting.answer = storage_failure(
                                "the group's commit was interrupted: it may or may not have "
                                "been written"
                            )
                        if waiting is not own:
                            waiting.ready.set()
        finally:
            with self._lock:
                if own in self._queue:  # interrupted before its own plan was written
                    self._queue.remove(own)
                self._pass_lead(own)

    def _pass_lead(self, leader: _Waiting) -> None:
        """Under the lock: hand the lead to the first waiter, or give it up (once)."""
        if leader.passed_on:
            return
        leader.passed_on = True
        if self._queue:
            successor = self._queue[0]
            successor.leads = True
            successor.ready.set()
        else:
            self._leading = False

    def _write(self, group: Sequence[_Waiting]) -> None:
        """Commit ``group``'s plans, giving each its own answer."""
        try:
            writing = self.db.commit_many if self._commit_many is None else self._commit_many
            outcomes = writing([waiting.plan for waiting in group])
        except WorkloadError as error:
            if error.code != ErrorCode.WORKLOAD_INVALID or len(group) == 1:
                for waiting in group:
                    waiting.answer = _copy(error)
                return
            # One plan the database refused refuses the whole transaction: commit each on
            # its own, so that only that plan's thread is refused.
            for waiting in group:
                self._write([waiting])
            return
        for waiting, outcome in zip(group, outcomes, strict=True):
            waiting.answer = outcome


def _copy(error: WorkloadError) -> WorkloadError:
    """``error`` for one member of a group: each thread raises its own exception object."""
    return WorkloadError(error.code, error.message, error.details)
