"""The one unit of work: load what a command names, under the caller's scope; commit the
decision made on it, guarded by the version that was read; tell the observers.

Every operation of the authority goes through here, single call or batch: a single call is
:meth:`UnitOfWork.finish` of one :class:`~feltdb.work.batches.Step`, a batch is
:meth:`UnitOfWork.finish_many` of many, and both commit through the database's
``commit_many`` (a single call with the others that threads of this process commit at the
same moment, when group commit is on). A race between two writers is decided by the
store's compare-and-set, never by either writer's memory: the loser gets
``StorageConflict`` (``WORKLOAD_CONFLICT``) and commits nothing.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, TypeGuard, TypeVar

from feltdb.auth.scope import Scope
from feltdb.errors import ErrorCode, WorkloadError
from feltdb.records.workload import DURABLE_WORK_COLLECTION, Workload
from feltdb.storage.base import (
    Database,
    Mutation,
    PlannedCommit,
    Precondition,
    StorageConflict,
    StoredRow,
)
from feltdb.storage.group_commit import GroupCommit
from feltdb.storage.wakeups import Wakeups
from feltdb.work import inputs
from feltdb.work.batches import Batch, CommitMany, Step
from feltdb.work.changes import CommitObserver, Operation, WorkloadChange, announcer
from feltdb.work.concurrency import released
from feltdb.work.dependency_outputs import dependency_outputs
from feltdb.work.eligibility import DependenciesRead, read_dependencies
from feltdb.work.quotas import finished
from feltdb.work.recent import RecentCommits
from feltdb.work.rows import (
    MUTATED,
    LoadedWorkload,
    dependency_row,
    holding,
    planned_commit,
    same_application,
    workload_of,
)
from feltdb.work.states import TERMINAL_STATES

T = TypeVar("T")

log = logging.getLogger("feltdb.store")

Load = Callable[[str], LoadedWorkload]
"""The committed workload of an id, refusing what is missing or out of the caller's scope."""


class UnitOfWork:
    """Reads and guarded commits of workloads over one database, and the observers told of
    each commit. Safe to share between threads.
    """

    def __init__(self, db: Database, *, group_commit: bool) -> None:
        self.db = db
        self.group = GroupCommit(db) if group_commit else None
        # On a database shared by processes that can wake each other (PostgreSQL), the
        # commits that may make work claimable are announced to their waiting claimers.
        self.wakeups: Wakeups | None = getattr(db, "wakeups", None)  # an older Database
        wakeups = self.wakeups
        self._observers: tuple[CommitObserver, ...] = (
            () if wakeups is None else (announcer(wakeups),)
        )
        self._observers_lock = threading.Lock()
        self.recent = RecentCommits()
        """The workloads this unit committed last: :meth:`run` decides on them unread."""

    def joined(self, connection: object | None) -> UnitOfWork:
        """This unit, or (given the caller's open transaction on ``connection``) a unit
        whose reads and commits run in that transaction (:meth:`Database.joined
        <feltdb.storage.base.Database.joined>`): no observer of this unit's is told of its
        commits, which are not durable until the caller commits (the joined database sends
        the wake-up hint in the caller's transaction).
        """
        if connection is None:
            return self
        return UnitOfWork(self.db.joined(connection), group_commit=False)

    # ---------------------------------------------------------------- observers

    def observe(self, observer: CommitObserver) -> Callable[[], None]:
        """Call ``observer`` after each durable commit; answers the unsubscribing function."""
        with self._observers_lock:
            self._observers = (*self._observers, observer)

        def unsubscribe() -> None:
            with self._observers_lock:
                self._observers = tuple(o for o in self._observers if o is not observer)

        return unsubscribe

    def notify(
        self, operation: Operation, loaded: LoadedWorkload | None, workload: Workload
    ) -> None:
        """Tell every observer of a durable commit of ``workload`` (``loaded``: as it was
        read; ``None`` for an admission).
        """
        if workload.concurrency_key is not None:
            released(workload)  # a slot this process saw full may be free now
        if workload.state in TERMINAL_STATES:
            finished(self.db, workload.tenant_id)  # a quota this process saw full may not be
        observers = self._observers
        if not observers:
            return
        seen = loaded.sequence if loaded is not None else 0
        history = workload.execution_history
        # The commit's events are the history's tail: read back from the end, never the
        # whole history of a long-lived workload on every commit.
        start = len(history)
        while start > 0 and history[start - 1].sequence > seen:
            start -= 1
        change = WorkloadChange(
            operation,
            workload,
            loaded.state if loaded is not None else None,
            tuple(history[start:]),
        )
        for observer in observers:
            try:
                observer(change)
            except Exception:
                # The commit is durable whatever an observer does: it is told, never asked.
                log.exception("commit observer %r failed on %s", observer, workload.workload_id)

    def announce(self) -> None:
        """Tell the claimers waiting on other processes that work may be claimable (after
        a change not made by a commit of this unit: an import, a rebuilt index).
        """
        if self.wakeups is not None:
            self.wakeups.announce()

    # ---------------------------------------------------------------- reading

    def read(self, workload_id: str, ahead: ReadAhead | None = None) -> LoadedWorkload | None:
        """The committed workload of ``workload_id`` (one keyed read, or what ``ahead``
        read of it), or ``None``.
        """
        if ahead is not None and workload_id in ahead.keys:
            row = ahead.rows.get(workload_id)
        else:
            row = self.db.get_row(DURABLE_WORK_COLLECTION, workload_id)
        return LoadedWorkload.of(workload_of(row), row.version) if row is not None else None

    def read_ahead(self, workload_ids: Iterable[object]) -> ReadAhead:
        """The workloads at ``workload_ids`` (at most a batch's), read in one statement;
        what is not an id is left for its own item to refuse.
        """
        keys = frozenset(key for key in workload_ids if is_identifier(key))
        return ReadAhead(keys, self.db.get_rows(DURABLE_WORK_COLLECTION, sorted(keys)))

    def load(
        self, workload_id: str, scope: Scope | None = None, ahead: ReadAhead | None = None
    ) -> LoadedWorkload:
        """The committed workload of ``workload_id``, in ``scope`` when one is given (from
        ``ahead`` when it read it).

        Raises:
            WorkloadError: ``WORKLOAD_INVALID`` (not an id); ``WORKLOAD_NOT_FOUND``, in
                the same words for work that is missing and for work outside ``scope``.
        """
        loaded = self.read(inputs.identifier(workload_id, "workload_id"), ahead)
        if loaded is None or (scope is not None and not in_scope(loaded.workload, scope)):
            raise WorkloadError(
                ErrorCode.WORKLOAD_NOT_FOUND,
                f"workload {workload_id} not found",
                {"workload_id": workload_id},
            )
        return loaded

    def loader(self, scope: Scope | None, ahead: ReadAhead | None = None) -> Load:
        """:meth:`load` under ``scope`` (from ``ahead`` when it read the workload)."""
        return partial(self.load, scope=scope, ahead=ahead)

    def dependencies(self, workload: Workload) -> DependenciesRead:
        """``workload``'s dependencies, each read now from the committed rows of its tenant
        and application (the caller's scope does not apply: a worker may depend on work it
        may not see); what a claim on this reading holds (:class:`DependenciesRead`).
        """
        row_of = partial(dependency_row, self.db.get_row, workload)
        return read_dependencies(workload.dependencies, row_of)

    def dependency_outputs(self, workload: Workload) -> tuple[dict[str, Any], list[str]]:
        """What ``workload``'s dependencies produced, read as :meth:`dependencies` reads
        them (:func:`~feltdb.work.dependency_outputs.dependency_outputs`).
        """
        row_of = partial(dependency_row, self.db.get_row, workload)
        return dependency_outputs(workload.dependencies, row_of)

    def results_ahead(self, result_ids: Iterable[object]) -> dict[str, list[StoredRow]]:
        """The workloads carrying each of ``result_ids`` (at most a batch's), read in one
        statement, for :meth:`result_owner`.
        """
        wanted = sorted({result_id for result_id in result_ids if is_identifier(result_id)})
        found = self.db.rows_with_result_ids(DURABLE_WORK_COLLECTION, wanted)
        return {result_id: found.get(result_id, []) for result_id in wanted}

    def result_owner(
        self,
        result_id: str,
        workload: Workload,
        ahead: Mapping[str, list[StoredRow]] | None = None,
    ) -> str | None:
        """The workload of ``workload``'s tenant and application whose committed result has
        ``result_id`` (read now, or by :meth:`results_ahead` into ``ahead``), or ``None``.
        Result ids are unique within an application: another tenant's result never
        refuses, and so never reveals, this one's.
        """
        if ahead is not None and result_id in ahead:
            rows = ahead[result_id]
        else:
            rows = self.db.rows_with_result_ids(DURABLE_WORK_COLLECTION, [result_id]).get(
                result_id, []
            )
        owners = [row.key for row in rows if same_application(row.document, workload)]
        return owners[0] if owners else None

    # ---------------------------------------------------------------- committing

    def write(self, plan: PlannedCommit) -> None:
        """Commit one plan: with the others that threads commit at the same moment, when
        group commit is on.

        Raises:
            StorageConflict: its guard was lost; WorkloadError: ``WORKLOAD_STORAGE_FAILURE``.
        """
        if self.group is not None:
            self.group.commit(plan)
            return
        [outcome] = self.db.commit_many([plan])
        if isinstance(outcome, StorageConflict):
            raise outcome

    def commit(
        self,
        loaded: LoadedWorkload,
        operation: Operation,
        held: Sequence[Precondition] = (),
        also: Sequence[Mutation] = (),
    ) -> None:
        """Commit the decided workload of ``loaded``, guarded by the version it was read
        at (and by ``held``, the rows its decision read besides), with the rows of ``also``,
        remember it, and tell the observers.
        """
        workload = loaded.workload
        planned = planned_commit(workload, MUTATED, loaded.version, operation.value)
        plan = holding(planned, held, also)
        self.write(plan)
        self.remember(plan, workload, loaded.version + 1)
        self.notify(operation, loaded, workload)

    def remember(self, plan: PlannedCommit, workload: Workload, version: int) -> None:
        """Keep ``workload``, committed at ``version`` by ``plan``, for the next command on
        it (:attr:`recent`); finished work is forgotten instead, for no command commits on
        it again (a replayed report would only be decided twice).
        """
        text = plan.mutations[0].encoded
        if text is None or workload.state in TERMINAL_STATES:
            self.recent.forget((workload.workload_id,))
        else:
            self.recent.remember(workload.workload_id, text, version)

    def run(self, scope: Scope | None, decide: Callable[[Load], Step[T]]) -> T:
        """Decide one command (``decide``, on what ``load`` answers under ``scope``) and
        :meth:`finish` its step. The workload is recalled unread when this unit committed
        it last; the answer stands only if its commit proves the recalled workload was
        current (the guard held). A lost guard, a refusal or an answer that commits nothing
        is decided again on a fresh read; so, once, is a step whose other rows read (its
        dependencies) changed before it committed.
        """
        recalled: list[str] = []

        def load(workload_id: str) -> LoadedWorkload:
            hit = self.recent.recall(workload_id)
            if hit is None or (scope is not None and not in_scope(hit.workload, scope)):
                return self.load(workload_id, scope)
            recalled.append(workload_id)
            return hit

        try:
            step = decide(load)
        except WorkloadError:
            if not recalled:
                raise
            step = None
        if recalled and (step is None or step.loaded is None or step.operation is None):
            self.recent.forget(recalled)
            return self.finish(decide(self.loader(scope)))
        assert step is not None  # decided, or decided again above
        try:
            return self.finish(step)
        except StorageConflict as conflict:
            if not recalled and not _lost_a_held_row(conflict, step.held):
                raise
            self.recent.forget(recalled)
            return self.finish(decide(self.loader(scope)))

    def finish(self, step: Step[T]) -> T:
        """Commit ``step``'s change, if any; then raise its refusal or answer its answer."""
        if step.loaded is not None and step.operation is not None:
            self.commit(step.loaded, step.operation, step.held, step.also)
        if step.refusal is not None:
            raise step.refusal
        return step.answer  # type: ignore[return-value]  # a step without refusal answers

    def finish_many(
        self,
        batch: Batch,
        steps: Sequence[Step[T] | WorkloadError],
        commit_many: CommitMany | None = None,
    ) -> list[T | WorkloadError]:
        """Commit every step's change in one transaction (by ``commit_many``, when given);
        answer each in order (its answer, its refusal, or the conflict of a lost guard).
        """
        return batch.commit(steps, self.notify, self.remember, commit_many)

    def batch(self, scope: Scope | None, ahead: ReadAhead | None = None) -> Batch:
        """A new batch whose reads are under ``scope`` (from ``ahead`` when it read them)."""
        return Batch(self.db, self.loader(scope, ahead))


@dataclass(frozen=True, slots=True)
class ReadAhead:
    """The workloads a batch read in one statement (:meth:`UnitOfWork.read_ahead`)."""

    keys: frozenset[str]
    """The ids read: one of them absent from ``rows`` has no workload."""
    rows: Mapping[str, StoredRow]


def is_identifier(value: object) -> TypeGuard[str]:
    """Whether ``value`` would pass as an id (:func:`~feltdb.work.inputs.identifier`)."""
    try:
        inputs.identifier(value, "id")
    except WorkloadError:
        return False
    return True


def in_scope(workload: Workload, scope: Scope) -> bool:
    """Whether ``scope`` admits ``workload``."""
    return scope.admits(
        workload.tenant_id, workload.application_id, workload.environment, workload.definition_id
    )


def _lost_a_held_row(conflict: StorageConflict, held: Sequence[Precondition]) -> bool:
    """Whether ``conflict`` is the loss of one of ``held``, a row the decision only read
    (its own workload's guard lost is the race's answer: ``WORKLOAD_CONFLICT``).
    """
    details = conflict.details or {}
    return any(
        (guard.collection, guard.key) == (details.get("collection"), details.get("key"))
        for guard in held
    )
