"""``WorkloadStore``: the workload authority's facade.

Every operation is: read the committed workload (one keyed read), decide with a pure
function of :mod:`feltdb.work.lifecycle`, and apply the decision as one guarded commit: a
compare-and-set on the document version that was read. A race between two writers (two
threads, two processes, two machines) is therefore decided by the store, never by either
writer's memory: the loser gets ``WORKLOAD_CONFLICT`` and commits nothing, and its next
read sees what the winner committed.
"""

from __future__ import annotations

import builtins
import functools
import logging
import os
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from feltdb.auth import SignedGrant, Subject
from feltdb.auth.policy import covers, within_constraints, workload_uri
from feltdb.auth.scope import Scope
from feltdb.errors import ErrorCode, WorkloadError
from feltdb.fields import MAX_NOW, MAX_PATH_CHARS, iso_instant
from feltdb.storage import audit_chain
from feltdb.storage.audit_chain import ChainReport
from feltdb.storage.base import (
    CommittedTransaction,
    Database,
    PlannedCommit,
    StorageConflict,
)
from feltdb.storage.canonical import content_hash
from feltdb.storage.group_commit import GroupCommit
from feltdb.storage.targets import open_database
from feltdb.storage.wakeups import Wakeups
from feltdb.work import (
    audit,
    inputs,
    legacy,
    lifecycle,
    operators,
    overview,
    recovery,
    revocations,
    sessions,
)
from feltdb.work.admission import new_workload, replay, validate_admission
from feltdb.work.approvals import decided_answer, ensure_approver_permitted
from feltdb.work.batches import Batch, Completion, Heartbeat, Step
from feltdb.work.changes import CommitObserver, Operation, WorkloadChange, announcer
from feltdb.work.claimed import ClaimedWork, LeaseRenewal
from feltdb.work.claiming import CandidateChoice
from feltdb.work.cursors import cursor_of
from feltdb.work.deadlines import deadline_breach
from feltdb.work.identities import workload_id_for
from feltdb.work.inputs import DEFAULT_LEASE_MS, DEFAULT_MAX_LEASE_MS, Cursor
from feltdb.work.models import (
    DURABLE_WORK_COLLECTION,
    ApprovalDecision,
    CreateWorkload,
    Workload,
    WorkloadCheckpoint,
    WorkloadClaim,
    WorkloadExecutionContext,
    WorkloadResult,
)
from feltdb.work.revocations import REVOKED_GRANTS_COLLECTION, revoked_grant_key
from feltdb.work.rows import (
    CREATED,
    MUTATED,
    LoadedWorkload,
    planned_commit,
    same_application,
    workload_of,
)
from feltdb.work.safety import ensure_safe, ensure_safe_text
from feltdb.work.scheduling import row_index
from feltdb.work.states import ApprovalOutcome, WorkloadState

__all__ = [
    "DEFAULT_LEASE_MS",
    "REVOKED_GRANTS_COLLECTION",
    "WorkloadStore",
    "revoked_grant_key",
]

T = TypeVar("T")

log = logging.getLogger("feltdb.store")

CANDIDATE_BATCH = 32
"""Candidates ``claim_next`` reads per index query; most claims need only the first."""
MAINTENANCE_BATCH = 256
"""Due workloads ``enforce_deadlines``/``recover_expired`` read per index query."""


class WorkloadStore:
    """The workload authority over one :class:`~feltdb.storage.base.Database`.

    Safe to share between threads. Two stores on one target (in one process or several)
    are two writers of one store: each sees the other's commits at once.

    Every per-workload operation takes an optional ``scope`` (a
    :class:`~feltdb.auth.scope.Scope`): work outside it is answered
    ``WORKLOAD_NOT_FOUND``, in the words missing work is, from the one read the operation
    makes anyway.
    """

    def __init__(
        self,
        db: Database,
        *,
        max_lease_ms: int = DEFAULT_MAX_LEASE_MS,
        group_commit: bool = True,
    ) -> None:
        """Act on ``db``. The store does not own it unless opened with :meth:`open`.

        Args:
            db: the database.
            max_lease_ms: the longest lease or heartbeat extension granted (a day by
                default); a longer one is refused ``WORKLOAD_INVALID``.
            group_commit: gather single operations that threads of this process commit
                at the same moment into one transaction (one sync to disk), each keeping
                its own guard and answered only once durable
                (:class:`~feltdb.storage.group_commit.GroupCommit`). On by default.
        """
        self.db = db
        self.max_lease_ms = inputs.integer(max_lease_ms, "max_lease_ms", 1000)
        self._group = GroupCommit(db) if group_commit else None
        self._owns_db = False
        # On a database shared by processes that can wake each other (PostgreSQL), the
        # commits that may make work claimable are announced to their waiting claimers.
        self._wakeups: Wakeups | None = getattr(db, "wakeups", None)  # an older Database
        wakeups = self._wakeups
        self._observers: tuple[CommitObserver, ...] = (
            () if wakeups is None else (announcer(wakeups),)
        )
        self._observers_lock = threading.Lock()

    @classmethod
    def open(
        cls, target: str | os.PathLike[str], *, max_lease_ms: int = DEFAULT_MAX_LEASE_MS
    ) -> WorkloadStore:
        """Open the store at ``target``: a file path or ``sqlite:///path`` (embedded SQLite),
        or ``postgresql://…``. Creates an embedded store that does not exist yet.
        ``max_lease_ms`` is as for the constructor.

        Raises:
            WorkloadError: ``WORKLOAD_STORAGE_FAILURE`` when the target cannot be opened.
        """
        store = cls(open_database(target), max_lease_ms=max_lease_ms)
        store._owns_db = True
        return store

    def close(self) -> None:
        """Close the database if this store opened it."""
        if self._owns_db:
            self.db.close()

    def __enter__(self) -> WorkloadStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---------------------------------------------------------------- observers

    def observe(self, observer: CommitObserver) -> Callable[[], None]:
        """Call ``observer`` after each durable commit of a workload by this store, with
        the :class:`~feltdb.work.changes.WorkloadChange`; answers the function that
        unsubscribes it. Commits of other writers of the same database are not seen.
        """
        with self._observers_lock:
            self._observers = (*self._observers, observer)

        def unsubscribe() -> None:
            with self._observers_lock:
                self._observers = tuple(o for o in self._observers if o is not observer)

        return unsubscribe

    def _notify(
        self, operation: Operation, loaded: LoadedWorkload | None, workload: Workload
    ) -> None:
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

    # ---------------------------------------------------------------- reading and writing

    def _read(self, workload_id: str) -> LoadedWorkload | None:
        row = self.db.get_row(DURABLE_WORK_COLLECTION, workload_id)
        return LoadedWorkload.of(workload_of(row), row.version) if row is not None else None

    def _load(self, workload_id: str, scope: Scope | None = None) -> LoadedWorkload:
        loaded = self._read(inputs.identifier(workload_id, "workload_id"))
        if loaded is None or (scope is not None and not _in_scope(loaded.workload, scope)):
            raise WorkloadError(
                ErrorCode.WORKLOAD_NOT_FOUND,
                f"workload {workload_id} not found",
                {"workload_id": workload_id},
            )
        return loaded

    def _commit(self, loaded: LoadedWorkload, operation: Operation) -> None:
        """Commit the edited workload of ``loaded``, guarded by the version it was read at,
        and tell the observers.

        Raises:
            WorkloadError: ``WORKLOAD_CONFLICT`` when another writer committed first;
                ``WORKLOAD_STORAGE_FAILURE``.
        """
        workload = loaded.workload
        self._write(planned_commit(workload, MUTATED, loaded.version, operation.value))
        self._notify(operation, loaded, workload)

    def _write(self, plan: PlannedCommit) -> None:
        """Commit one plan: with the others that threads commit at the same moment, when group
        commit is on.
        """
        if self._group is not None:
            self._group.commit(plan)
        else:
            self.db.commit(plan.operation_id, plan.mutations, plan.preconditions, plan.audit)

    def _enforce_deadline(self, loaded: LoadedWorkload, now: int) -> None:
        """Refuse a call on work past a deadline, timing it out first, in the same way the
        maintenance pass would have.
        """
        refusal = _deadline_passed(loaded, now)
        if refusal is not None:
            self._commit(loaded, Operation.DEADLINE)
            raise refusal

    def _finish(self, step: Step[T]) -> T:
        """Commit ``step``'s change, if any; then raise its refusal or answer its answer."""
        if step.loaded is not None and step.operation is not None:
            self._commit(step.loaded, step.operation)
        if step.refusal is not None:
            raise step.refusal
        return step.answer  # type: ignore[return-value]  # a step without refusal answers

    def _change(
        self,
        workload_id: str,
        now: int,
        operation: Operation,
        change: Callable[[Workload], T],
        *,
        scope: Scope | None,
        enforce_deadlines: bool = True,
    ) -> T:
        """Load, refuse work past a deadline (unless told not to), edit with ``change``,
        commit: one guarded commit of one workload. Answers what ``change`` answers.
        """
        loaded = self._load(workload_id, scope)
        if enforce_deadlines:
            self._enforce_deadline(loaded, now)
        answer = change(loaded.workload)
        self._commit(loaded, operation)
        return answer

    # ---------------------------------------------------------------- requesters

    def admit(self, request: CreateWorkload) -> tuple[Workload, bool]:
        """Create a workload, or answer with the one this requester already created under
        the same key. ``True`` when this call created it.

        The key is scoped to the tenant, the application and the requester, so one
        requester's key can never return, reveal or block another's workload. A repeated
        key is answered with the original only for an equivalent request.

        Raises:
            WorkloadError: ``WORKLOAD_INVALID``, ``WORKLOAD_SECRET_REJECTED``,
                ``WORKLOAD_UNAUTHORIZED`` (checked before any replay: the snapshot does not
                bind the requester, or its grant does not cover the new workload),
                ``IDEMPOTENCY_KEY_REUSED`` naming every differing field.
        """
        step = self._admission_step(request, {})
        if step.loaded is None:
            return step.answer  # type: ignore[return-value]  # a replay
        workload = step.loaded.workload
        try:
            self._write(planned_commit(workload, CREATED, None, Operation.ADMIT.value))
        except StorageConflict:
            return self._converge(step.loaded.workload.workload_id, request)
        self._notify(Operation.ADMIT, None, workload)
        return workload, True

    def admit_many(
        self, requests: Sequence[CreateWorkload]
    ) -> builtins.list[tuple[Workload, bool] | WorkloadError]:
        """:meth:`admit` for each request, committed in one transaction: answers in order,
        each what the single call answers. A request repeating an earlier one's key (or
        depending on one) is decided as if the earlier one were already admitted.
        """
        requests = inputs.batch(requests, "requests")
        batch = Batch(self.db, self._load)
        admitted: dict[str, Workload] = {}
        steps: builtins.list[Step[tuple[Workload, bool]] | WorkloadError] = []
        for request in requests:
            try:
                step = self._admission_step(request, admitted)
            except WorkloadError as refusal:
                steps.append(refusal)
                continue
            if step.loaded is not None:
                admitted[step.loaded.workload.workload_id] = step.loaded.workload
            steps.append(step)
        answers = batch.commit(steps, self._notify)
        # A lost guard on an admission: another writer admitted that identity first, and
        # each item of it converges on what that writer committed, as admit would.
        for n, (decided, answer) in enumerate(zip(steps, answers, strict=True)):
            if isinstance(answer, StorageConflict) and isinstance(decided, Step):
                loaded = decided.loaded
                key = loaded.workload.workload_id if loaded is not None else decided.depends_on
                try:
                    answers[n] = self._converge(str(key), requests[n])
                except WorkloadError as refusal:
                    answers[n] = refusal
        return answers

    def _admission_step(
        self, request: CreateWorkload, admitted: dict[str, Workload]
    ) -> Step[tuple[Workload, bool]]:
        """Decide an admission: the new workload to commit, or the replay of one already
        committed (or in ``admitted``, earlier in the same batch).
        """
        if not isinstance(request, CreateWorkload):
            request = CreateWorkload.parse(request)
        validate_admission(request)
        workload_id = workload_id_for(
            request.tenant_id, request.application_id, request.requested_by, request.idempotency_key
        )
        # The snapshot must cover the work it authorizes, before anything is read.
        resource = workload_uri(request.application_id, workload_id)
        if not covers(request.authorization_snapshot.grant, resource):
            raise WorkloadError(
                ErrorCode.WORKLOAD_UNAUTHORIZED,
                f"the grant does not cover resource {resource!r}",
                {"missing": "resource"},
            )
        self._ensure_dependencies_visible(request, admitted)
        earlier = admitted.get(workload_id)  # admitted earlier in the same batch
        if earlier is not None:
            return Step(answer=replay(earlier, request), depends_on=workload_id)
        # Another writer may have admitted this identity: ask the store, by key.
        existing = self._read(workload_id)
        if existing is not None:
            return Step(answer=replay(existing.workload, request))
        workload = new_workload(request, workload_id)
        return Step(LoadedWorkload.of(workload, 0), Operation.ADMIT, (workload, True))

    def _converge(self, workload_id: str, request: CreateWorkload) -> tuple[Workload, bool]:
        """After losing an admission's require-absent guard: the replay of what the other
        writer committed.
        """
        committed = self._read(workload_id)
        if committed is None:
            raise WorkloadError(
                ErrorCode.WORKLOAD_CONFLICT, f"workload {workload_id} was admitted concurrently"
            )
        return replay(committed.workload, request)

    def _ensure_dependencies_visible(
        self, request: CreateWorkload, admitted: dict[str, Workload]
    ) -> None:
        """Refuse a dependency on work the request's grant may not see: work that is missing,
        of another tenant or application, outside the grant's resource scopes, or outside
        its constraints. Work in ``admitted`` (earlier in the same batch) counts as there.

        The refusal is the same in every case, so no requester learns whether work it may
        not see exists, nor (through when its own work becomes claimable) its state.
        """
        grant = request.authorization_snapshot.grant
        for index, dependency in enumerate(request.dependencies):
            planned = admitted.get(dependency.workload_id)
            if planned is not None:
                document: dict[str, Any] | None = planned.model_dump(
                    include={"tenant_id", "application_id", "environment", "definition_id"}
                )
            else:
                row = self.db.get_row(DURABLE_WORK_COLLECTION, dependency.workload_id)
                document = row.document if row is not None else None
            if (
                document is None
                or not same_application(document, request)
                or not covers(grant, workload_uri(request.application_id, dependency.workload_id))
                or not within_constraints(
                    grant, str(document.get("environment")), str(document.get("definition_id"))
                )
            ):
                raise inputs.invalid(
                    f"dependencies.{index}.workload_id",
                    f"no workload {dependency.workload_id} in this tenant and application",
                )

    def create(self, request: CreateWorkload) -> Workload:
        """:meth:`admit`, answering only the workload."""
        return self.admit(request)[0]

    def get(self, workload_id: str, *, scope: Scope | None = None) -> Workload:
        """The committed workload.

        Raises:
            WorkloadError: ``WORKLOAD_NOT_FOUND`` (also for work outside ``scope``).
        """
        return self._load(workload_id, scope).workload

    def list(self, tenant_id: str, application_id: str) -> builtins.list[Workload]:
        """An application's committed workloads: priority descending, then oldest first."""
        rows = self.db.list_rows(
            DURABLE_WORK_COLLECTION,
            tenant_id=inputs.identifier(tenant_id, "tenant_id"),
            application_id=inputs.identifier(application_id, "application_id"),
        )
        return [workload_of(row) for row in rows]

    def page(
        self,
        tenant_id: str,
        application_id: str,
        *,
        state: WorkloadState | str | None = None,
        definition: str | None = None,
        after: Cursor | None = None,
        limit: int = 50,
        scope: Scope | None = None,
    ) -> tuple[builtins.list[Workload], Cursor | None]:
        """One page of :meth:`list` (optionally of one ``state``), after ``after``, the
        cursor the previous page answered (``None``: the first page).

        ``definition`` keeps only work of that definition id. The index does not hold the
        definition, so it filters the page that was read: a filtered page may hold fewer
        than ``limit`` workloads, even none, while the cursor goes on; follow it to the end.

        ``scope`` (a reader's) hides work outside it as if it did not exist: hidden work is
        never in a page and never its cursor, and pages are read on until ``limit``
        visible workloads are found or the list ends, so neither a short page nor a cursor
        tells the reader anything of what it may not see. The price: a reader that sees
        little of a large application reads past all it may not see.

        A keyset seek over the scheduling index (:meth:`Database.page_rows`), never an
        offset scan, so every page costs the same. Returns the page and the cursor of the
        next one: the ``(priority, created_at, workload_id)`` of the page's last workload,
        or ``None`` when no workload follows it (one extra row is read to know).

        Raises:
            WorkloadError: ``WORKLOAD_INVALID`` (a bad limit, state or cursor);
                ``WORKLOAD_STORAGE_FAILURE``.
        """
        tenant_id = inputs.identifier(tenant_id, "tenant_id")
        application_id = inputs.identifier(application_id, "application_id")
        limit = inputs.integer(limit, "limit", 1)
        listed = inputs.state(state)
        after = inputs.cursor(after) if after is not None else None
        if definition is not None:
            definition = inputs.identifier(definition, "definition")
        found: builtins.list[Workload] = []
        while len(found) <= limit:
            rows = self.db.page_rows(
                DURABLE_WORK_COLLECTION, tenant_id, application_id, listed, after, limit=limit + 1
            )
            batch = [workload_of(row) for row in rows]
            found.extend(
                workload for workload in batch if scope is None or _in_scope(workload, scope)
            )
            if len(batch) <= limit:
                break
            after = cursor_of(batch[-1])
        page = found[:limit]
        # The cursor is the last workload read, kept or not, so no page is read twice.
        following = cursor_of(page[-1]) if len(found) > limit and page else None
        if definition is not None:
            page = [workload for workload in page if workload.definition_id == definition]
        return page, following

    def cancel(
        self, workload_id: str, actor: str, now: int | None = None, *, scope: Scope | None = None
    ) -> WorkloadState:
        """Cancel: at once when no worker holds it, otherwise by request to its worker.

        Raises:
            WorkloadError: ``WORKLOAD_TRANSITION_DENIED`` for finished work.
        """
        at = _now(now)
        actor = inputs.actor(actor)
        loaded = self._load(workload_id, scope)
        if loaded.state is WorkloadState.CANCELLATION_REQUESTED:
            return loaded.state  # already requested: nothing to commit
        state = operators.cancel(loaded.workload, actor, at)
        self._commit(loaded, Operation.CANCEL)
        return state

    # ---------------------------------------------------------------- workers

    def claim(
        self,
        workload_id: str,
        worker: str,
        capabilities: Iterable[str],
        now: int | None = None,
        lease_ms: int = DEFAULT_LEASE_MS,
        *,
        scope: Scope | None = None,
    ) -> WorkloadClaim:
        """Claim a ready workload under a fresh fencing token and a lease of ``lease_ms``.

        Raises:
            WorkloadError: ``WORKLOAD_TIMED_OUT`` (a deadline passed; it was timed out),
                ``WORKLOAD_ATTEMPTS_EXHAUSTED`` (budget spent; it was dead-lettered),
                ``WORKLOAD_APPROVAL_PENDING``, ``WORKLOAD_REJECTED``, ``WORKLOAD_NOT_READY``,
                ``WORKLOAD_NOT_YET_ELIGIBLE``, ``WORKLOAD_CAPABILITY_DENIED``,
                ``WORKLOAD_CONFLICT``.
        """
        at = _now(now)
        worker = inputs.actor(worker, "worker")
        held = inputs.capabilities(capabilities)
        lease = inputs.lease(lease_ms, "lease_ms", self.max_lease_ms)
        loaded = self._load(workload_id, scope)
        self._enforce_deadline(loaded, at)
        workload = loaded.workload
        if recovery.budget_exhausted(workload):
            # Ready work that has used its budget (an operator re-arm beyond it, or a record
            # left by unbounded recovery) is dead-lettered rather than claimed again.
            recovery.dead_letter_exhausted(workload, at)
            self._commit(loaded, Operation.EXHAUSTED)
            raise WorkloadError(
                ErrorCode.WORKLOAD_ATTEMPTS_EXHAUSTED,
                f"workload has used its attempt budget of {workload.attempt_count}",
            )
        granted = lifecycle.claim(workload, worker, held, at, lease)
        self._commit(loaded, Operation.CLAIM)
        return granted

    def claim_next(
        self,
        tenant_id: str,
        application_id: str,
        worker: str,
        capabilities: Iterable[str],
        now: int | None = None,
        lease_ms: int = DEFAULT_LEASE_MS,
        *,
        definitions: Iterable[str] | None = None,
        environments: Iterable[str] | None = None,
    ) -> WorkloadClaim | None:
        """Claim the first eligible, dependency-satisfied, capability-matching workload of
        an application, in priority order; ``None`` when there is none.

        ``definitions`` and ``environments`` (``None``: any) narrow the choice to work of
        those definition ids and environments, as a worker serving some definitions, or a
        grant constrained to them, needs. Work outside them is never claimed.

        Selection reads the scheduling index, never the whole collection. A candidate that
        turns out past a deadline or out of attempts is timed out or dead-lettered, as
        :meth:`claim` would, and the next one is tried; so is one another writer claimed
        first.
        """
        at = _now(now)
        choice = CandidateChoice(
            worker=inputs.actor(worker, "worker"),
            held=inputs.capabilities(capabilities),
            lease_ms=inputs.lease(lease_ms, "lease_ms", self.max_lease_ms),
            now=at,
            definitions=_optional_set(definitions, "definitions"),
            environments=_optional_set(environments, "environments"),
        )
        claimed = self._claim_up_to(tenant_id, application_id, choice)
        return claimed[0].claim if claimed else None

    def claim_many(
        self,
        tenant_id: str,
        application_id: str,
        worker: str,
        capabilities: Iterable[str],
        limit: int,
        now: int | None = None,
        lease_ms: int = DEFAULT_LEASE_MS,
        *,
        definitions: Iterable[str] | None = None,
        environments: Iterable[str] | None = None,
        start: bool = False,
    ) -> builtins.list[WorkloadClaim]:
        """Up to ``limit`` claims, chosen as :meth:`claim_next` chooses, in priority order,
        committed in one transaction per batch of candidates read; with ``start``, each is
        also started in the same commit (its history holds the claim and the start, as two
        calls would leave it). Fewer, or none, when fewer are claimable.

        Raises:
            WorkloadError: ``WORKLOAD_INVALID`` (``limit`` is 1 to
                :data:`~feltdb.work.inputs.MAX_BATCH_ITEMS`).
        """
        claimed = self.claim_work(
            tenant_id, application_id, worker, capabilities, limit, now, lease_ms,
            definitions=definitions, environments=environments, start=start,
        )  # fmt: skip
        return [work.claim for work in claimed]

    def claim_work(
        self,
        tenant_id: str,
        application_id: str,
        worker: str,
        capabilities: Iterable[str],
        limit: int,
        now: int | None = None,
        lease_ms: int = DEFAULT_LEASE_MS,
        *,
        definitions: Iterable[str] | None = None,
        environments: Iterable[str] | None = None,
        start: bool = True,
    ) -> builtins.list[ClaimedWork]:
        """:meth:`claim_many` (started unless ``start=False``), each claim answered with
        the workload as its commit left it: what a worker needs to run it, with no read.
        """
        choice = CandidateChoice(
            worker=inputs.actor(worker, "worker"),
            held=inputs.capabilities(capabilities),
            lease_ms=inputs.lease(lease_ms, "lease_ms", self.max_lease_ms),
            now=_now(now),
            definitions=_optional_set(definitions, "definitions"),
            environments=_optional_set(environments, "environments"),
            wanted=inputs.integer(limit, "limit", 1, inputs.MAX_BATCH_ITEMS),
            start=bool(start),
        )
        return self._claim_up_to(tenant_id, application_id, choice)

    def _claim_up_to(
        self, tenant_id: str, application_id: str, choice: CandidateChoice
    ) -> builtins.list[ClaimedWork]:
        """Claim up to ``choice.wanted`` of the application's ready work, batch after
        batch of candidates from the scheduling index, each batch one transaction.
        """
        tenant_id = inputs.identifier(tenant_id, "tenant_id")
        application_id = inputs.identifier(application_id, "application_id")
        wanted, offset = choice.wanted, 0
        granted: builtins.list[ClaimedWork] = []
        while len(granted) < wanted:
            choice.wanted = wanted - len(granted)
            choice.reset()
            outcomes = self.db.commit_selected_many(
                DURABLE_WORK_COLLECTION,
                tenant_id,
                application_id,
                WorkloadState.READY.value,
                choice.now,
                choice.choose,
                limit=max(CANDIDATE_BATCH, choice.wanted),
                offset=offset,
                # Only the ranges of work this worker may take are read: a worker never
                # pages through a backlog of another definition, or of work needing a
                # capability or an environment it lacks. (choose still checks each.)
                partitions=choice.partitions(),
            )
            progressed = False
            for (loaded, operation, claim), outcome in zip(choice.chosen, outcomes, strict=True):
                if isinstance(outcome, StorageConflict):
                    continue  # the rows are held while chosen: another writer cannot win
                progressed = True
                self._notify(operation, loaded, loaded.workload)
                if claim is not None:
                    granted.append(ClaimedWork(claim, loaded.workload))
            if progressed:
                continue  # what was chosen left the ready set: look again from here
            if choice.examined < max(CANDIDATE_BATCH, choice.wanted):
                break
            offset += choice.examined  # a whole batch this worker cannot run: page past it
        return granted

    def start(
        self,
        workload_id: str,
        claim_id: str,
        worker: str,
        fencing_token: int,
        now: int | None = None,
        *,
        scope: Scope | None = None,
    ) -> None:
        """Start the claimed attempt.

        Raises:
            WorkloadError: ``WORKLOAD_TIMED_OUT``, the fence's codes
                (``WORKLOAD_CLAIM_INVALID``, ``WORKLOAD_STALE_FENCE``,
                ``WORKLOAD_LEASE_EXPIRED``), ``WORKLOAD_TRANSITION_DENIED``,
                ``WORKLOAD_CONFLICT``.
        """
        at = _now(now)
        token = inputs.integer(fencing_token, "fencing_token", 0)
        claim_id = inputs.identifier(claim_id, "claim_id")
        self._change(
            workload_id,
            at,
            Operation.START,
            lambda workload: lifecycle.start(workload, claim_id, worker, token, at),
            scope=scope,
        )

    def heartbeat(
        self,
        workload_id: str,
        claim_id: str,
        worker: str,
        fencing_token: int,
        now: int | None = None,
        extend_ms: int = DEFAULT_LEASE_MS,
        *,
        scope: Scope | None = None,
    ) -> WorkloadClaim:
        """Record a heartbeat and extend the lease to ``now + extend_ms``.

        Raises:
            WorkloadError: ``WORKLOAD_TIMED_OUT``, the fence's codes, ``WORKLOAD_CONFLICT``.
        """
        beat = Heartbeat(workload_id, claim_id, worker, fencing_token, extend_ms)
        load = functools.partial(self._load, scope=scope)
        return self._finish(self._heartbeat_step(beat, _now(now), load))

    def heartbeat_many(
        self,
        heartbeats: Sequence[Heartbeat],
        now: int | None = None,
        *,
        scope: Scope | None = None,
    ) -> builtins.list[WorkloadClaim | WorkloadError]:
        """:meth:`heartbeat` for each item, committed in one transaction: answers in order,
        each what the single call answers (the extended claim, or its refusal).
        """
        renewed = self.renew_leases(heartbeats, now, scope=scope)
        return [r if isinstance(r, WorkloadError) else r.claim for r in renewed]

    def renew_leases(
        self,
        heartbeats: Sequence[Heartbeat],
        now: int | None = None,
        *,
        scope: Scope | None = None,
    ) -> builtins.list[LeaseRenewal | WorkloadError]:
        """:meth:`heartbeat_many`, each extended claim answered with whether cancellation
        of its work was requested: all a worker's heartbeat needs to learn, with no read.
        """
        at = _now(now)
        heartbeats = inputs.batch(heartbeats, "heartbeats")
        batch = Batch(self.db, functools.partial(self._load, scope=scope))
        steps = batch.decide_each(
            heartbeats, lambda beat: self._heartbeat_step(beat, at, batch.load)
        )
        answers = batch.commit(steps, self._notify)
        renewed: builtins.list[LeaseRenewal | WorkloadError] = []
        for step, answer in zip(steps, answers, strict=True):
            if isinstance(answer, WorkloadError):
                renewed.append(answer)
                continue
            # An extended claim was decided on a read: its step holds the workload.
            assert isinstance(step, Step) and step.loaded is not None
            renewed.append(LeaseRenewal.of(answer, step.loaded.workload))
        return renewed

    def _heartbeat_step(
        self, beat: Heartbeat, at: int, load: Callable[[str], LoadedWorkload]
    ) -> Step[WorkloadClaim]:
        token = inputs.integer(beat.fencing_token, "fencing_token", 0)
        claim_id = inputs.identifier(beat.claim_id, "claim_id")
        extend = inputs.lease(beat.extend_ms, "extend_ms", self.max_lease_ms)
        loaded = load(beat.workload_id)
        refusal = _deadline_passed(loaded, at)
        if refusal is not None:
            return Step(loaded, Operation.DEADLINE, refusal=refusal)
        extended = lifecycle.heartbeat(loaded.workload, claim_id, beat.worker, token, at, extend)
        return Step(loaded, Operation.HEARTBEAT, extended)

    def execution_context(
        self,
        workload_id: str,
        claim_id: str,
        worker: str,
        fencing_token: int,
        now: int | None = None,
        secret_references: Iterable[str] = (),
        *,
        scope: Scope | None = None,
    ) -> WorkloadExecutionContext:
        """The input, scopes and every committed checkpoint, for the claim's holder only.

        Raises:
            WorkloadError: ``WORKLOAD_TIMED_OUT``, the fence's codes,
                ``WORKLOAD_SECRET_REJECTED`` for anything but ``secret://`` references.
        """
        at = _now(now)
        token = inputs.integer(fencing_token, "fencing_token", 0)
        claim_id = inputs.identifier(claim_id, "claim_id")
        references = inputs.identifiers(secret_references, "secret_references")
        loaded = self._load(workload_id, scope)
        self._enforce_deadline(loaded, at)
        return lifecycle.execution_context(loaded.workload, claim_id, worker, token, at, references)

    def checkpoint(
        self,
        workload_id: str,
        claim_id: str,
        worker: str,
        fencing_token: int,
        state: Any,
        now: int | None = None,
        *,
        scope: Scope | None = None,
    ) -> WorkloadCheckpoint:
        """Commit the running attempt's progress, readable by every later attempt.

        Raises:
            WorkloadError: ``WORKLOAD_SECRET_REJECTED``, ``WORKLOAD_INVALID`` (not JSON),
                ``WORKLOAD_TIMED_OUT``, the fence's codes, ``WORKLOAD_TRANSITION_DENIED``.
        """
        ensure_safe(state, "state")
        at = _now(now)
        token = inputs.integer(fencing_token, "fencing_token", 0)
        claim_id = inputs.identifier(claim_id, "claim_id")
        return self._change(
            workload_id,
            at,
            Operation.CHECKPOINT,
            lambda workload: lifecycle.checkpoint(workload, claim_id, worker, token, state, at),
            scope=scope,
        )

    def complete(
        self,
        workload_id: str,
        claim_id: str,
        worker: str,
        fencing_token: int,
        result_id: str,
        output: Any,
        artifacts: Iterable[str] = (),
        schema_version: int = 1,
        now: int | None = None,
        *,
        scope: Scope | None = None,
    ) -> WorkloadResult:
        """Record the running attempt's result and succeed the workload.

        The same report repeated (a lost response) answers the recorded result.

        Raises:
            WorkloadError: ``WORKLOAD_SECRET_REJECTED``, ``WORKLOAD_RESULT_CONFLICT`` (the
                result id was recorded by another report), ``WORKLOAD_RESULT_DUPLICATE``
                (it belongs to another workload), ``WORKLOAD_TIMED_OUT``, the fence's codes,
                ``WORKLOAD_TRANSITION_DENIED`` (e.g. cancellation was requested).
        """
        completion = Completion(
            workload_id, claim_id, worker, fencing_token, result_id, output, artifacts,
            schema_version,
        )  # fmt: skip
        load = functools.partial(self._load, scope=scope)
        return self._finish(
            self._completion_step(completion, _now(now), load, self._workload_for_result)
        )

    def complete_many(
        self,
        completions: Sequence[Completion],
        now: int | None = None,
        *,
        scope: Scope | None = None,
    ) -> builtins.list[WorkloadResult | WorkloadError]:
        """:meth:`complete` for each item, committed in one transaction: answers in order,
        each what the single call answers (the result, or its refusal). Two items naming
        one result id are decided as two calls in a row would be.
        """
        at = _now(now)
        completions = inputs.batch(completions, "completions")
        batch = Batch(self.db, functools.partial(self._load, scope=scope))

        def owner(result_id: str, workload: Workload) -> str | None:
            planned = batch.result_owner(result_id, workload)
            return (
                planned if planned is not None else self._workload_for_result(result_id, workload)
            )

        steps = batch.decide_each(
            completions, lambda item: self._completion_step(item, at, batch.load, owner)
        )
        return batch.commit(steps, self._notify)

    def _completion_step(
        self,
        completion: Completion,
        at: int,
        load: Callable[[str], LoadedWorkload],
        owner_of: Callable[[str, Workload], str | None],
    ) -> Step[WorkloadResult]:
        c = completion
        ensure_safe(c.output, "output")
        token = inputs.integer(c.fencing_token, "fencing_token", 0)
        claim_id = inputs.identifier(c.claim_id, "claim_id")
        result_id = inputs.identifier(c.result_id, "result_id")
        ensure_safe_text(result_id, "result_id")
        version_of_schema = inputs.integer(c.schema_version, "schema_version", 0)
        paths = inputs.identifiers(c.artifacts, "artifacts", max_chars=MAX_PATH_CHARS)
        for path in paths:
            ensure_safe_text(path, "artifacts")
        loaded = load(c.workload_id)
        workload = loaded.workload
        owner = owner_of(result_id, workload)
        if owner is not None:
            if owner != workload.workload_id:
                raise WorkloadError(
                    ErrorCode.WORKLOAD_RESULT_DUPLICATE,
                    f"result id {result_id} belongs to another workload",
                )
            output_hash = content_hash(c.output)
            return Step(
                answer=lifecycle.completion_replay(workload, claim_id, c.worker, token, output_hash)
            )
        refusal = _deadline_passed(loaded, at)
        if refusal is not None:
            return Step(loaded, Operation.DEADLINE, refusal=refusal)
        result = lifecycle.complete(
            workload, claim_id, c.worker, token, result_id, c.output, paths, version_of_schema, at
        )
        return Step(loaded, Operation.COMPLETE, result)

    def _workload_for_result(self, result_id: str, workload: Workload) -> str | None:
        """The workload of ``workload``'s tenant and application whose committed result has
        ``result_id``, or ``None``. Result ids are unique within an application: another
        tenant's result never refuses, and so never reveals, this one's.
        """
        rows = self.db.rows_with_result_id(DURABLE_WORK_COLLECTION, result_id)
        owners = [row.key for row in rows if same_application(row.document, workload)]
        return owners[0] if owners else None

    def fail(
        self,
        workload_id: str,
        claim_id: str,
        worker: str,
        fencing_token: int,
        kind: str,
        error: str,
        now: int | None = None,
        effect: str | None = None,
        *,
        scope: Scope | None = None,
    ) -> WorkloadState:
        """Report the current attempt failed; the retry policy decides what follows.

        ``effect`` says what the worker knows of external effects: ``"none"`` (implied for
        an attempt that never started) or ``"unknown"`` (decided like a lost worker). The
        same report repeated replays its outcome and commits nothing.

        Raises:
            WorkloadError: ``WORKLOAD_SECRET_REJECTED``, ``WORKLOAD_INVALID`` (effect),
                ``WORKLOAD_TIMED_OUT``, the fence's codes.
        """
        ensure_safe_text(inputs.text(error, "error"), "errors")
        kind = inputs.identifier(kind, "kind")
        ensure_safe_text(kind, "kind")
        if effect is not None and effect not in lifecycle.FAILURE_EFFECTS:
            raise WorkloadError(
                ErrorCode.WORKLOAD_INVALID,
                'effect must be "none" or "unknown"',
                {"fields": ["effect"]},
            )
        at = _now(now)
        token = inputs.integer(fencing_token, "fencing_token", 0)
        claim_id = inputs.identifier(claim_id, "claim_id")
        loaded = self._load(workload_id, scope)
        workload = loaded.workload
        if lifecycle.failure_replay(workload, claim_id, worker, token, kind, error, effect):
            return workload.state
        self._enforce_deadline(loaded, at)
        state = lifecycle.fail(workload, claim_id, worker, token, kind, error, effect, at)
        self._commit(loaded, Operation.FAIL)
        return state

    def confirm_cancel(
        self,
        workload_id: str,
        claim_id: str,
        worker: str,
        fencing_token: int,
        now: int | None = None,
        *,
        scope: Scope | None = None,
    ) -> None:
        """The holding worker confirms a requested cancellation.

        Raises:
            WorkloadError: the fence's codes, ``WORKLOAD_TRANSITION_DENIED``.
        """
        at = _now(now)
        token = inputs.integer(fencing_token, "fencing_token", 0)
        claim_id = inputs.identifier(claim_id, "claim_id")
        self._change(
            workload_id,
            at,
            Operation.CONFIRM_CANCEL,
            lambda workload: operators.confirm_cancel(workload, claim_id, worker, token, at),
            scope=scope,
            enforce_deadlines=False,
        )

    # ---------------------------------------------------------------- operators

    def timeout(
        self, workload_id: str, actor: str, now: int | None = None, *, scope: Scope | None = None
    ) -> WorkloadState:
        """Time out ready or held work now, as an operator.

        Raises:
            WorkloadError: ``WORKLOAD_TRANSITION_DENIED``.
        """
        at = _now(now)
        actor = inputs.actor(actor)
        return self._change(
            workload_id,
            at,
            Operation.TIMEOUT,
            lambda workload: operators.operator_timeout(workload, actor, at),
            scope=scope,
            enforce_deadlines=False,
        )

    def retry(
        self,
        workload_id: str,
        actor: str,
        now: int | None = None,
        reason: str | None = None,
        *,
        scope: Scope | None = None,
    ) -> None:
        """Re-arm failed, dead-lettered or timed-out work: one more attempt, recorded with
        the actor and reason, at most ``retry_policy.max_attempts`` times.

        Raises:
            WorkloadError: ``WORKLOAD_TRANSITION_DENIED``, ``WORKLOAD_RETRY_EXHAUSTED``.
        """
        at = _now(now)
        actor = inputs.actor(actor)
        reason = inputs.reason(reason)
        if reason is not None:
            ensure_safe_text(reason, "reasons")
        self._change(
            workload_id,
            at,
            Operation.RETRY,
            lambda workload: operators.operator_retry(workload, actor, at, reason),
            scope=scope,
            enforce_deadlines=False,
        )

    def decide(
        self,
        workload_id: str,
        decider: Subject,
        outcome: ApprovalOutcome | str,
        reason: str | None,
        grant_id: str,
        input_hash: str,
        now: int | None = None,
        *,
        scope: Scope | None = None,
    ) -> tuple[ApprovalDecision, bool]:
        """Commit an approval decision; ``True`` when it replays the committed one.

        ``decider`` is the authenticated subject, already verified by the caller to hold a
        ``workload:approve`` grant. The policy applies here: a permitted kind (never an
        agent, worker, workload or connection), listed if the policy lists approvers, and
        never the requester. The decision binds to ``input_hash``. The first committed
        decision is final.

        Raises:
            WorkloadError: ``WORKLOAD_INVALID`` (a rejection needs a reason),
                ``WORKLOAD_SECRET_REJECTED``, ``WORKLOAD_APPROVAL_NOT_REQUIRED``,
                ``WORKLOAD_APPROVER_NOT_PERMITTED``, ``WORKLOAD_APPROVAL_STALE``,
                ``WORKLOAD_APPROVAL_DECIDED``, ``WORKLOAD_TIMED_OUT`` (the wait expired),
                ``WORKLOAD_APPROVAL_NOT_ACTIONABLE``, ``WORKLOAD_CONFLICT``.
        """
        verdict, note = _decision_inputs(decider, outcome, reason)
        at = _now(now)
        grant_id = inputs.identifier(grant_id, "grant_id")
        loaded = self._load(workload_id, scope)
        workload = loaded.workload
        if workload.approval is None:
            raise WorkloadError(
                ErrorCode.WORKLOAD_APPROVAL_NOT_REQUIRED,
                "this workload was not admitted with an approval requirement",
            )
        ensure_approver_permitted(workload.approval.policy, workload.requested_by, decider)
        if workload.input_hash != input_hash:
            raise WorkloadError(
                ErrorCode.WORKLOAD_APPROVAL_STALE,
                "the decision names input this workload does not have",
                {"input_hash": workload.input_hash},
            )
        if workload.approval.decision is not None:
            return decided_answer(workload.approval.decision, verdict)
        self._enforce_deadline(loaded, at)
        decision = operators.decide(workload, decider, verdict, note, grant_id, input_hash, at)
        self._commit(loaded, Operation.DECIDE)
        return decision, False

    # ---------------------------------------------------------------- audit and grants

    def audit_after(
        self,
        tenant_id: str,
        application_id: str,
        after: int = 0,
        limit: int = 100,
        *,
        scan: int = audit.AUDIT_SCAN,
    ) -> tuple[builtins.list[CommittedTransaction], int]:
        """This tenant's application's committed transactions after revision ``after``,
        and the revision to continue after: see :func:`feltdb.work.audit.audit_after`.
        """
        return audit.audit_after(self.db, tenant_id, application_id, after, limit, scan=scan)

    def audit_before(
        self,
        tenant_id: str,
        application_id: str,
        before: int | None = None,
        limit: int = 50,
        *,
        work_id: str | None = None,
        subject: str | None = None,
    ) -> tuple[builtins.list[CommittedTransaction], int | None]:
        """This tenant's application's committed transactions, newest first, before
        revision ``before`` (``None``: the newest), optionally of one workload or subject,
        and the revision to continue before: see :func:`feltdb.work.audit.audit_before`.
        """
        return audit.audit_before(
            self.db, tenant_id, application_id, before, limit, work_id=work_id, subject=subject
        )

    # ---------------------------------------------------------------- the overview

    def summary(
        self, tenant_id: str, application_id: str, *, scope: Scope | None = None
    ) -> overview.Summary:
        """How much of this application's work (that ``scope`` sees) is in each state, per
        definition: see :func:`feltdb.work.overview.summarize`.
        """
        return overview.summarize(self.db, tenant_id, application_id, scope)

    def recent(self, tenant_id: str, application_id: str, now: int) -> overview.Recent:
        """This application's completions and failures per minute over the hour up to
        ``now``, and the work it dead-lettered then: see :func:`feltdb.work.overview.recent`.
        """
        return overview.recent(self.db, tenant_id, application_id, now)

    # ---------------------------------------------------------------- dashboard sessions

    def open_session(self, session_id: str, evidence: SignedGrant, now: int) -> int:
        """Open a dashboard session; when it ends (:func:`feltdb.work.sessions.open_session`)."""
        return sessions.open_session(self.db, session_id, evidence, now)

    def session(self, session_id: str, now: int) -> sessions.Session | None:
        """The open dashboard session of ``session_id``, if any (one keyed read)."""
        return sessions.session_of(self.db, session_id, now)

    def end_session(self, session_id: str, now: int) -> bool:
        """End a dashboard session (sign-out); ``True`` when it was open."""
        return sessions.end_session(self.db, session_id, now)

    def spend_ticket(self, nonce: str, expires_at: int, now: int) -> bool:
        """Spend a sign-in link's nonce; ``False`` when it was spent already."""
        return sessions.spend_ticket(self.db, nonce, expires_at, now)

    def prune_sessions(self, now: int | None = None) -> int:
        """Delete dashboard sessions and spent sign-in tickets past their end (a bounded
        number per call: :func:`feltdb.work.sessions.prune_expired`); how many.
        """
        return sessions.prune_expired(self.db, _now(now))

    def seal_audit(self, limit: int | None = None) -> int:
        """Seal the log entries that are final into the audit chain, oldest first (at most
        ``limit``; ``None``: all); how many were sealed. The server does it on every
        maintenance pass: see :mod:`feltdb.storage.audit_chain`.

        Raises:
            WorkloadError: ``WORKLOAD_STORAGE_FAILURE``.
        """
        return audit_chain.seal(self.db, limit=limit)

    def verify_audit(
        self,
        tenant_id: str | None = None,
        application_id: str | None = None,
        *,
        anchor: tuple[int, str] | None = None,
    ) -> ChainReport:
        """Seal what is final, then check the whole audit chain and every row against the
        transaction that wrote it; the report names the first transaction altered,
        removed or reordered. With a tenant and application, as much of the report as
        that application's audit reader may see: see :func:`feltdb.work.audit.verification`.
        ``anchor``: an earlier report's ``(head_revision, head_link)``, which the chain
        must still hold.

        Raises:
            WorkloadError: ``WORKLOAD_INVALID``; ``WORKLOAD_STORAGE_FAILURE``.
        """
        return audit.verification(self.db, tenant_id, application_id, anchor)

    def revoke_grant(
        self,
        grant_id: str,
        actor: str,
        now: int | None = None,
        *,
        tenant_id: str,
        application_id: str,
    ) -> bool:
        """Revoke a grant of ``tenant_id``'s ``application_id``: from now on
        :meth:`is_grant_revoked` answers ``True`` for it. ``True`` when this call revoked
        it, ``False`` when it already was (see :func:`feltdb.work.revocations.revoke_grant`).
        """
        return revocations.revoke_grant(
            self.db,
            grant_id,
            actor,
            _now(now),
            tenant_id=tenant_id,
            application_id=application_id,
        )

    def revocations(self, tenant_id: str, application_id: str) -> builtins.list[dict[str, Any]]:
        """The grants :meth:`revoke_grant` revoked in ``tenant_id``'s ``application_id``,
        oldest first: ``{"grant_id", "revoked_by", "revoked_at"}`` each. Minted grants are
        not recorded, so revocations are what a store can list.
        """
        return revocations.revocations(self.db, tenant_id, application_id)

    def is_grant_revoked(self, grant_id: str, *, tenant_id: str, application_id: str) -> bool:
        """Whether :meth:`revoke_grant` revoked this grant of ``tenant_id``'s
        ``application_id``: one keyed read of the store.
        """
        return revocations.is_grant_revoked(
            self.db, grant_id, tenant_id=tenant_id, application_id=application_id
        )

    def count_by_state(self) -> dict[WorkloadState, int]:
        """How many workloads there are in each state, every tenant's (a state with none
        is counted 0). One ``GROUP BY`` over the scheduling index, never the documents.

        Raises:
            WorkloadError: ``WORKLOAD_STORAGE_FAILURE``.
        """
        counted = self.db.count_by_state(DURABLE_WORK_COLLECTION)
        return {state: counted.get(state.value, 0) for state in WorkloadState}

    def ready_by_definition(self) -> dict[str, tuple[int, int]]:
        """Per definition id, how much work is READY and since when: ``(count, oldest
        created_at)``, oldest first, every tenant's. Work no worker serves stays READY, and
        shows here (the server's ``feltdb_ready_*`` gauges).

        Raises:
            WorkloadError: ``WORKLOAD_STORAGE_FAILURE``.
        """
        return self.db.oldest_by_definition(DURABLE_WORK_COLLECTION, WorkloadState.READY.value)

    # ---------------------------------------------------------------- maintenance

    def enforce_deadlines(self, now: int | None = None) -> builtins.list[str]:
        """Time out every workload past one of its deadlines, as the maintenance pass does
        each second. Deadlines come from committed timestamps, so the decision is the same
        after a restart and on any writer; a workload another writer changed first is left
        to it. Returns the ids this call timed out.
        """
        at = _now(now)

        def time_out(workload: Workload) -> bool:
            breach = deadline_breach(workload, at)
            if breach is None:
                return False
            recovery.time_out_past_deadline(workload, breach[0], breach[1], at)
            return True

        return self._sweep("deadline_at", at, time_out, Operation.DEADLINE)

    def recover_expired(self, now: int | None = None) -> builtins.list[str]:
        """Recover every workload whose lease expired (its worker is presumed lost): the
        attempt is recorded lost and the policy decides ``READY`` or ``DEAD_LETTER``. A
        workload another writer recovered (or completed) first is left to it. Returns the
        ids this call recovered.
        """
        at = _now(now)

        def recover(workload: Workload) -> bool:
            if not recovery.lease_lapsed(workload, at):
                return False
            recovery.recover(workload, at)
            return True

        return self._sweep("lease_expires_at", at, recover, Operation.RECOVER)

    def _sweep(
        self, column: str, now: int, act: Callable[[Workload], bool], operation: Operation
    ) -> builtins.list[str]:
        """Apply ``act`` to every workload the index says is due on ``column`` at ``now``;
        ``act`` re-decides on the committed version and answers whether it changed it.
        """
        acted: builtins.list[str] = []
        # Every key looked at, acted on or not. A row passed over may stay due (a stale
        # index, a lost race) or leave (a race lost to a completion): so each read skips the
        # keys already seen, not a count of them, and reads enough past them to find
        # MAINTENANCE_BATCH new ones if there are that many.
        seen: set[str] = set()
        while True:
            due = self.db.rows_due(
                DURABLE_WORK_COLLECTION, column, now, limit=len(seen) + MAINTENANCE_BATCH
            )
            fresh = [row for row in due if row.key not in seen]
            if not fresh:
                return acted
            for row in fresh:
                seen.add(row.key)
                loaded = LoadedWorkload.of(workload_of(row), row.version)
                if not act(loaded.workload):
                    continue  # not due after all (the index was stale)
                try:
                    self._commit(loaded, operation)
                except StorageConflict:
                    # Another writer committed this workload first (in a race, its own
                    # recovery). Nothing of ours was committed; if it still needs acting
                    # on, the next pass sees it.
                    continue
                acted.append(row.key)

    def rebuild_indexes(self) -> int:
        """Recompute every workload's scheduling index from its committed document (after
        an upgrade that changes how the index is derived, or to repair one): the index is
        derived, the document is the authority. Documents, versions and the revision are
        untouched. Returns how many rows were rewritten.
        """
        rebuilt = 0
        for row in self.db.list_rows(DURABLE_WORK_COLLECTION):
            if self.db.update_index(DURABLE_WORK_COLLECTION, row.key, row_index(workload_of(row))):
                rebuilt += 1
        if rebuilt and self._wakeups is not None:
            self._wakeups.announce()  # a repaired index may make work claimable
        return rebuilt

    # ---------------------------------------------------------------- migration

    @classmethod
    def migrate_legacy_file(
        cls,
        db: Database,
        path: str | os.PathLike[str],
        progress: Callable[[int, int], None] | None = None,
        *,
        imported: Callable[[str, bool], None] | None = None,
    ) -> WorkloadStore:
        """Import a pre-canonical JSON store file into ``db``, verify it, and answer a store
        over ``db``: see :func:`feltdb.work.legacy.migrate_legacy_file` for the file, the
        checks and the callbacks.

        Raises:
            WorkloadError: ``WORKLOAD_MIGRATION_CONFLICT``; ``WORKLOAD_STORAGE_FAILURE``.
        """
        legacy.migrate_legacy_file(db, Path(path), progress, imported)
        store = cls(db)
        if store._wakeups is not None:
            store._wakeups.announce()  # imported work may be claimable
        return store


def _deadline_passed(loaded: LoadedWorkload, now: int) -> WorkloadError | None:
    """Time out work past a deadline, in place, as the maintenance pass would, and answer
    the refusal of the call that found it so (``None``: no deadline has passed).
    """
    breach = deadline_breach(loaded.workload, now)
    if breach is None:
        return None
    deadline, at = breach
    recovery.time_out_past_deadline(loaded.workload, deadline, at, now)
    return WorkloadError(
        ErrorCode.WORKLOAD_TIMED_OUT,
        f"the workload's {deadline} deadline passed at {iso_instant(at)}",
        {"deadline": deadline, "deadline_at": at},
    )


def _in_scope(workload: Workload, scope: Scope) -> bool:
    return scope.admits(
        workload.tenant_id, workload.application_id, workload.environment, workload.definition_id
    )


def _optional_set(values: Iterable[str] | None, field: str) -> frozenset[str] | None:
    return None if values is None else frozenset(inputs.identifiers(values, field))


def _decision_inputs(
    decider: Subject, outcome: ApprovalOutcome | str, reason: str | None
) -> tuple[ApprovalOutcome, str | None]:
    """The checked outcome and reason of a decision by ``decider``.

    Raises:
        WorkloadError: ``WORKLOAD_INVALID`` (a rejection needs a reason),
            ``WORKLOAD_SECRET_REJECTED``.
    """
    try:
        verdict = ApprovalOutcome(outcome)
    except ValueError:
        raise inputs.invalid("outcome", 'must be "approved" or "rejected"') from None
    if not isinstance(decider, Subject):
        raise inputs.invalid("decider", "must be a Subject")
    inputs.identifier(decider.id, "decider.id")
    note = inputs.reason(reason)
    if verdict is ApprovalOutcome.REJECTED and note is None:
        raise WorkloadError(
            ErrorCode.WORKLOAD_INVALID, "a rejection requires a reason", {"fields": ["reason"]}
        )
    if note is not None:
        ensure_safe_text(note, "reasons")
    return verdict, note


def _now(now: int | None) -> int:
    """The one place the authority reads the clock: ``now``, or the current unix second.
    A given ``now`` is at most :data:`~feltdb.fields.MAX_NOW`, so nothing derived from it
    overflows what a record stores (records are not validated again on assignment).
    """
    if now is None:
        return int(time.time())
    return inputs.integer(now, "now", 0, MAX_NOW)
