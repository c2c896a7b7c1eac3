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
import json
import os
import secrets
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from pydantic import ValidationError

from feltdb.auth import Subject
from feltdb.auth.policy import covers, within_constraints, workload_uri
from feltdb.canonical import canonical_json, content_hash, sha256_hex
from feltdb.errors import ErrorCode, WorkloadError
from feltdb.fields import MAX_PATH_CHARS, iso_instant
from feltdb.storage import open_database
from feltdb.storage.base import (
    Commit,
    CommittedTransaction,
    Database,
    Mutation,
    PlannedCommit,
    Precondition,
    RowReader,
    StorageConflict,
    StoredRow,
)
from feltdb.work import inputs, lifecycle
from feltdb.work.admission import new_workload, replay, validate_admission
from feltdb.work.approvals import decided_answer, ensure_approver_permitted
from feltdb.work.deadlines import deadline_breach
from feltdb.work.identities import legacy_idempotency_scope, workload_id_for
from feltdb.work.inputs import DEFAULT_MAX_LEASE_MS, Cursor
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
from feltdb.work.safety import ensure_safe, ensure_safe_text
from feltdb.work.scheduling import dependencies_satisfied, row_index
from feltdb.work.states import ApprovalOutcome, WorkloadState

T = TypeVar("T")

DEFAULT_LEASE_MS = 30_000
CANDIDATE_BATCH = 32
"""Candidates ``claim_next`` reads per index query; most claims need only the first."""
MAINTENANCE_BATCH = 256
"""Due workloads ``enforce_deadlines``/``recover_expired`` read per index query."""
AUDIT_SCAN = 1000
"""Log entries one ``audit_after`` call reads at most, whatever it finds."""
AUDIT_BATCH = 250
"""Log entries ``audit_after`` reads per query."""
REVOKED_GRANTS_COLLECTION = "system_revoked_grants"
"""Where revoked grants are kept (see :meth:`WorkloadStore.revoke_grant`)."""


def _parse(row: StoredRow) -> Workload:
    try:
        return Workload.model_validate(row.document)
    except ValidationError as error:
        raise WorkloadError(
            ErrorCode.WORKLOAD_STORAGE_FAILURE,
            f"stored workload {row.key} is not a valid workload record: {error}",
        ) from error


def _plan(w: Workload, action: str, version: int | None) -> PlannedCommit:
    """The guarded commit of ``w`` as the document of its id: ``version`` is the version it
    was read at (``None``: it must not exist yet).
    """
    document = w.to_json()
    operation_id = "work_tx_" + secrets.token_hex(12)
    return PlannedCommit(
        operation_id,
        [Mutation(DURABLE_WORK_COLLECTION, w.workload_id, document, row_index(w))],
        [
            Precondition(
                DURABLE_WORK_COLLECTION,
                w.workload_id,
                require_absent=version is None,
                expected_version=version,
            )
        ],
        _audit(w, document, action, operation_id),
    )


def _state_in(read: RowReader, dependent: Workload, workload_id: str) -> WorkloadState | None:
    """The committed state of ``dependent``'s dependency ``workload_id``; ``None`` when no
    workload of ``dependent``'s tenant and application has that id (another tenant's work
    is never a dependency, so its existence can never be learnt through one).
    """
    row = read(DURABLE_WORK_COLLECTION, workload_id)
    if row is None or not _same_application(row.document, dependent):
        return None
    return WorkloadState(row.document["state"])


def _same_application(document: dict[str, Any], w: Workload | CreateWorkload) -> bool:
    return (
        document.get("tenant_id") == w.tenant_id
        and document.get("application_id") == w.application_id
    )


class WorkloadStore:
    """The workload authority over one :class:`~feltdb.storage.base.Database`.

    Safe to share between threads. Two stores on one target (in one process or several)
    are two writers of one store: each sees the other's commits at once.
    """

    def __init__(self, db: Database, *, max_lease_ms: int = DEFAULT_MAX_LEASE_MS) -> None:
        """Act on ``db``. The store does not own it unless opened with :meth:`open`.

        Args:
            db: the database.
            max_lease_ms: the longest lease or heartbeat extension granted (a day by
                default); a longer one is refused ``WORKLOAD_INVALID``.
        """
        self.db = db
        self.max_lease_ms = inputs.integer(max_lease_ms, "max_lease_ms", 1000)
        self._owns_db = False
        # Test hook (see _pin_reads): id -> (document, version) as of the pin.
        self._pinned: dict[str, tuple[dict[str, Any], int]] | None = None

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

    # ---------------------------------------------------------------- reading and writing

    def _read(self, workload_id: str) -> tuple[Workload, int] | None:
        if self._pinned is not None:
            pinned = self._pinned.get(workload_id)
            if pinned is None:
                return None
            return Workload.model_validate(pinned[0]), pinned[1]
        row = self.db.get_row(DURABLE_WORK_COLLECTION, workload_id)
        if row is None:
            return None
        return _parse(row), row.version

    def _load(self, workload_id: str) -> tuple[Workload, int]:
        loaded = self._read(inputs.identifier(workload_id, "workload_id"))
        if loaded is None:
            raise WorkloadError(
                ErrorCode.WORKLOAD_NOT_FOUND,
                f"workload {workload_id} not found",
                {"workload_id": workload_id},
            )
        return loaded

    def _adopt_committed(self, workload_id: str) -> Workload | None:
        """After a lost compare-and-set: the committed workload, which a pinned store
        adopts so it does not keep acting on a version that no longer exists.
        """
        row = self.db.get_row(DURABLE_WORK_COLLECTION, workload_id)
        if self._pinned is not None:
            if row is None:
                self._pinned.pop(workload_id, None)
            else:
                self._pinned[workload_id] = (row.document, row.version)
        return _parse(row) if row is not None else None

    def _persist(self, workload: Workload, action: str, version: int | None = -1) -> int:
        """Commit ``workload`` as the document of its id, guarded by ``version`` (the version
        it was read at; ``None``: it must not exist yet; ``-1``: the version committed now,
        for test fixtures). Returns the new version.

        Raises:
            WorkloadError: ``WORKLOAD_CONFLICT`` when another writer committed first (the
                committed workload is adopted); ``WORKLOAD_STORAGE_FAILURE``.
        """
        if version == -1:
            current = self._read(workload.workload_id)
            version = current[1] if current is not None else None
        plan = _plan(workload, action, version)
        try:
            commit = self.db.commit(
                plan.operation_id, plan.mutations, plan.preconditions, plan.audit
            )
        except StorageConflict:
            self._adopt_committed(workload.workload_id)
            raise
        self._remember(commit)
        return commit.rows[0].version

    def _remember(self, commit: Commit) -> None:
        if self._pinned is not None:
            for row in commit.rows:
                self._pinned[row.key] = (row.document, row.version)

    def _enforce_deadline(self, w: Workload, version: int, now: int) -> None:
        """Refuse a call on work past a deadline, timing it out first, in the same way the
        maintenance pass would have.
        """
        breach = deadline_breach(w, now)
        if breach is None:
            return
        deadline, at = breach
        lifecycle.expire(w, deadline, at, now)
        self._persist(w, "workload.mutated", version)
        raise WorkloadError(
            ErrorCode.WORKLOAD_TIMED_OUT,
            f"the workload's {deadline} deadline passed at {iso_instant(at)}",
            {"deadline": deadline, "deadline_at": at},
        )

    def _apply(
        self,
        workload_id: str,
        now: int,
        change: Callable[[Workload], T],
        *,
        enforce_deadlines: bool = True,
    ) -> T:
        w, version = self._load(workload_id)
        if enforce_deadlines:
            self._enforce_deadline(w, version, now)
        answer = change(w)
        self._persist(w, "workload.mutated", version)
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
                ``WORKLOAD_UNAUTHORIZED`` (checked before any replay),
                ``IDEMPOTENCY_KEY_REUSED`` naming every differing field.
        """
        if not isinstance(request, CreateWorkload):
            request = CreateWorkload.parse(request)
        validate_admission(request)
        self._ensure_dependencies_exist(request)
        workload_id = workload_id_for(
            request.tenant_id, request.application_id, request.requested_by, request.idempotency_key
        )
        # Another writer may have admitted this identity: ask the store, by key.
        existing = self._read(workload_id)
        if existing is not None:
            return replay(existing[0], request)
        workload = new_workload(request, workload_id)
        try:
            self._persist(workload, "workload.created", None)
        except StorageConflict:
            # Another writer admitted this identity first: converge on what it committed.
            committed = self._adopt_committed(workload_id)
            if committed is None:
                raise
            return replay(committed, request)
        return workload, True

    def _ensure_dependencies_exist(self, request: CreateWorkload) -> None:
        """Refuse a dependency on work the request's grant may not see: work that is missing,
        of another tenant or application, outside the grant's resource scopes, or outside
        its constraints.

        The refusal is the same in every case, so no requester learns whether work it may
        not see exists, nor (through when its own work becomes claimable) its state.
        """
        grant = request.authorization_snapshot.grant
        for index, dependency in enumerate(request.dependencies):
            row = self.db.get_row(DURABLE_WORK_COLLECTION, dependency.workload_id)
            if (
                row is None
                or not _same_application(row.document, request)
                or not covers(grant, workload_uri(request.application_id, row.key))
                or not within_constraints(
                    grant,
                    str(row.document.get("environment")),
                    str(row.document.get("definition_id")),
                )
            ):
                raise inputs.invalid(
                    f"dependencies.{index}.workload_id",
                    f"no workload {dependency.workload_id} in this tenant and application",
                )

    def create(self, request: CreateWorkload) -> Workload:
        """:meth:`admit`, answering only the workload."""
        return self.admit(request)[0]

    def get(self, workload_id: str) -> Workload:
        """The committed workload.

        Raises:
            WorkloadError: ``WORKLOAD_NOT_FOUND``.
        """
        return self._load(workload_id)[0]

    def list(self, tenant_id: str, application_id: str) -> builtins.list[Workload]:
        """An application's committed workloads: priority descending, then oldest first."""
        if self._pinned is not None:
            found = [
                Workload.model_validate(document)
                for document, _ in self._pinned.values()
                if document["tenant_id"] == tenant_id
                and document["application_id"] == application_id
            ]
            found.sort(key=lambda w: (-w.priority, w.created_at, w.workload_id))
            return found
        rows = self.db.list_rows(
            DURABLE_WORK_COLLECTION,
            tenant_id=inputs.identifier(tenant_id, "tenant_id"),
            application_id=inputs.identifier(application_id, "application_id"),
        )
        return [_parse(row) for row in rows]

    def page(
        self,
        tenant_id: str,
        application_id: str,
        *,
        state: WorkloadState | str | None = None,
        definition: str | None = None,
        after: Cursor | None = None,
        limit: int = 50,
        visible: Callable[[Workload], bool] | None = None,
    ) -> tuple[builtins.list[Workload], Cursor | None]:
        """One page of :meth:`list` (optionally of one ``state``), after ``after``, the
        cursor the previous page answered (``None``: the first page).

        ``definition`` keeps only work of that definition id. The index does not hold the
        definition, so it filters the page that was read: a filtered page may hold fewer
        than ``limit`` workloads, even none, while the cursor goes on; follow it to the end.

        ``visible`` (a reader's constraints, say) hides work as if it did not exist: hidden
        work is never in a page and never its cursor, and pages are read on until ``limit``
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
        if state is not None:
            try:
                state = WorkloadState(state).value
            except ValueError:
                raise inputs.invalid("state", f"not a workload state: {state!r}") from None
        if after is not None:
            after = inputs.cursor(after)
        if definition is not None:
            definition = inputs.identifier(definition, "definition")
        found: builtins.list[Workload] = []
        while len(found) <= limit:
            batch = self._page_read(tenant_id, application_id, state, after, limit + 1)
            found.extend(w for w in batch if visible is None or visible(w))
            if len(batch) <= limit:
                break
            after = _cursor_of(batch[-1])
        page = found[:limit]
        # The cursor is the last workload read, kept or not, so no page is read twice.
        following = _cursor_of(page[-1]) if len(found) > limit and page else None
        if definition is not None:
            page = [w for w in page if w.definition_id == definition]
        return page, following

    def _page_read(
        self,
        tenant_id: str,
        application_id: str,
        state: str | None,
        after: Cursor | None,
        size: int,
    ) -> builtins.list[Workload]:
        if self._pinned is not None:
            listed = [
                w for w in self.list(tenant_id, application_id) if state in (None, w.state.value)
            ]
            return [w for w in listed if after is None or _sorts_after(w, after)][:size]
        rows = self.db.page_rows(
            DURABLE_WORK_COLLECTION, tenant_id, application_id, state, after, limit=size
        )
        return [_parse(row) for row in rows]

    def cancel(self, workload_id: str, actor: str, now: int | None = None) -> WorkloadState:
        """Cancel: at once when no worker holds it, otherwise by request to its worker.

        Raises:
            WorkloadError: ``WORKLOAD_TRANSITION_DENIED`` for finished work.
        """
        at = _now(now)
        actor = inputs.actor(actor)
        w, version = self._load(workload_id)
        if w.state is WorkloadState.CANCELLATION_REQUESTED:
            return w.state  # already requested: nothing to commit
        state = lifecycle.cancel(w, actor, at)
        self._persist(w, "workload.mutated", version)
        return state

    # ---------------------------------------------------------------- workers

    def claim(
        self,
        workload_id: str,
        worker: str,
        capabilities: Iterable[str],
        now: int | None = None,
        lease_ms: int = DEFAULT_LEASE_MS,
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
        w, version = self._load(workload_id)
        self._enforce_deadline(w, version, at)
        if lifecycle.budget_exhausted(w):
            # Ready work that has used its budget (an operator re-arm beyond it, or a record
            # left by unbounded recovery) is dead-lettered rather than claimed again.
            lifecycle.dead_letter_exhausted(w, at)
            self._persist(w, "workload.mutated", version)
            raise WorkloadError(
                ErrorCode.WORKLOAD_ATTEMPTS_EXHAUSTED,
                f"workload has used its attempt budget of {w.attempt_count}",
            )
        granted = lifecycle.claim(w, worker, held, at, lease)
        self._persist(w, "workload.mutated", version)
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
        worker = inputs.actor(worker, "worker")
        held = inputs.capabilities(capabilities)
        lease = inputs.lease(lease_ms, "lease_ms", self.max_lease_ms)
        tenant_id = inputs.identifier(tenant_id, "tenant_id")
        application_id = inputs.identifier(application_id, "application_id")
        served = (
            None
            if definitions is None
            else frozenset(inputs.identifiers(definitions, "definitions"))
        )
        places = (
            None
            if environments is None
            else frozenset(inputs.identifiers(environments, "environments"))
        )
        granted: builtins.list[WorkloadClaim] = []
        examined = 0

        def decide(rows: Sequence[StoredRow], read: RowReader) -> PlannedCommit | None:
            # Runs inside the selecting transaction, which holds the rows: the first
            # candidate this worker may run is claimed, or, if it turns out past a deadline
            # or out of attempts, settled as claim() would settle it. It may run again if
            # the backend retries the transaction, so it starts afresh each time.
            nonlocal examined
            granted.clear()
            examined = len(rows)
            for row in rows:
                w = _parse(row)
                # served is a guard only: the selection already holds nothing else.
                if (served is not None and w.definition_id not in served) or (
                    places is not None and w.environment not in places
                ):
                    continue
                if not w.capability_snapshot <= held or not dependencies_satisfied(
                    w, functools.partial(_state_in, read, w)
                ):
                    continue
                breach = deadline_breach(w, at)
                if breach is not None:
                    lifecycle.expire(w, breach[0], breach[1], at)
                elif lifecycle.budget_exhausted(w):
                    lifecycle.dead_letter_exhausted(w, at)
                else:
                    try:
                        granted.append(lifecycle.claim(w, worker, held, at, lease))
                    except WorkloadError:
                        continue  # not claimable after all: never fail the whole search
                return _plan(w, "workload.mutated", row.version)
            return None

        offset = 0
        while True:
            commit = self.db.commit_selected(
                DURABLE_WORK_COLLECTION,
                tenant_id,
                application_id,
                WorkloadState.READY.value,
                at,
                decide,
                limit=CANDIDATE_BATCH,
                offset=offset,
                # Only the served definitions' index ranges are read: a worker of one
                # definition never pages through another's backlog. (decide still checks.)
                definitions=served,
            )
            if commit is not None:
                self._remember(commit)
                if granted:
                    return granted[0]
                continue  # a candidate was settled and left the ready set: look again
            if examined < CANDIDATE_BATCH:
                return None
            offset += examined  # a whole batch this worker cannot run: page past it

    def start(
        self,
        workload_id: str,
        claim_id: str,
        worker: str,
        fencing_token: int,
        now: int | None = None,
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
        self._apply(workload_id, at, lambda w: lifecycle.start(w, claim_id, worker, token, at))

    def heartbeat(
        self,
        workload_id: str,
        claim_id: str,
        worker: str,
        fencing_token: int,
        now: int | None = None,
        extend_ms: int = DEFAULT_LEASE_MS,
    ) -> WorkloadClaim:
        """Record a heartbeat and extend the lease to ``now + extend_ms``.

        Raises:
            WorkloadError: ``WORKLOAD_TIMED_OUT``, the fence's codes, ``WORKLOAD_CONFLICT``.
        """
        at = _now(now)
        token = inputs.integer(fencing_token, "fencing_token", 0)
        claim_id = inputs.identifier(claim_id, "claim_id")
        extend = inputs.lease(extend_ms, "extend_ms", self.max_lease_ms)
        return self._apply(
            workload_id, at, lambda w: lifecycle.heartbeat(w, claim_id, worker, token, at, extend)
        )

    def execution_context(
        self,
        workload_id: str,
        claim_id: str,
        worker: str,
        fencing_token: int,
        now: int | None = None,
        secret_references: Iterable[str] = (),
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
        w, version = self._load(workload_id)
        self._enforce_deadline(w, version, at)
        return lifecycle.execution_context(w, claim_id, worker, token, at, references)

    def checkpoint(
        self,
        workload_id: str,
        claim_id: str,
        worker: str,
        fencing_token: int,
        state: Any,
        now: int | None = None,
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
        return self._apply(
            workload_id, at, lambda w: lifecycle.checkpoint(w, claim_id, worker, token, state, at)
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
    ) -> WorkloadResult:
        """Record the running attempt's result and succeed the workload.

        The same report repeated (a lost response) answers the recorded result.

        Raises:
            WorkloadError: ``WORKLOAD_SECRET_REJECTED``, ``WORKLOAD_RESULT_CONFLICT`` (the
                result id was recorded by another report), ``WORKLOAD_RESULT_DUPLICATE``
                (it belongs to another workload), ``WORKLOAD_TIMED_OUT``, the fence's codes,
                ``WORKLOAD_TRANSITION_DENIED`` (e.g. cancellation was requested).
        """
        ensure_safe(output, "output")
        at = _now(now)
        token = inputs.integer(fencing_token, "fencing_token", 0)
        claim_id = inputs.identifier(claim_id, "claim_id")
        result_id = inputs.identifier(result_id, "result_id")
        ensure_safe_text(result_id, "result_id")
        version_of_schema = inputs.integer(schema_version, "schema_version", 0)
        paths = inputs.identifiers(artifacts, "artifacts", max_chars=MAX_PATH_CHARS)
        for path in paths:
            ensure_safe_text(path, "artifacts")
        w, version = self._load(workload_id)
        owner = self._workload_for_result(result_id, w)
        if owner is not None:
            if owner != workload_id:
                raise WorkloadError(
                    ErrorCode.WORKLOAD_RESULT_DUPLICATE,
                    f"result id {result_id} belongs to another workload",
                )
            return lifecycle.completion_replay(w, claim_id, worker, token, content_hash(output))
        self._enforce_deadline(w, version, at)
        result = lifecycle.complete(
            w, claim_id, worker, token, result_id, output, paths, version_of_schema, at
        )
        self._persist(w, "workload.mutated", version)
        return result

    def _workload_for_result(self, result_id: str, w: Workload) -> str | None:
        """The workload of ``w``'s tenant and application whose committed result has
        ``result_id``, or ``None``. Result ids are unique within an application: another
        tenant's result never refuses, and so never reveals, this one's.
        """
        if self._pinned is not None:
            for key, (document, _) in self._pinned.items():
                result = document.get("result")
                if (
                    result is not None
                    and result["result_id"] == result_id
                    and _same_application(document, w)
                ):
                    return key
            return None
        rows = self.db.rows_with_result_id(DURABLE_WORK_COLLECTION, result_id)
        owners = [row.key for row in rows if _same_application(row.document, w)]
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
        w, version = self._load(workload_id)
        if lifecycle.failure_replay(w, claim_id, worker, token, kind, error, effect):
            return w.state
        self._enforce_deadline(w, version, at)
        state = lifecycle.fail(w, claim_id, worker, token, kind, error, effect, at)
        self._persist(w, "workload.mutated", version)
        return state

    def confirm_cancel(
        self,
        workload_id: str,
        claim_id: str,
        worker: str,
        fencing_token: int,
        now: int | None = None,
    ) -> None:
        """The holding worker confirms a requested cancellation.

        Raises:
            WorkloadError: the fence's codes, ``WORKLOAD_TRANSITION_DENIED``.
        """
        at = _now(now)
        token = inputs.integer(fencing_token, "fencing_token", 0)
        claim_id = inputs.identifier(claim_id, "claim_id")
        self._apply(
            workload_id,
            at,
            lambda w: lifecycle.confirm_cancel(w, claim_id, worker, token, at),
            enforce_deadlines=False,
        )

    # ---------------------------------------------------------------- operators

    def timeout(self, workload_id: str, actor: str, now: int | None = None) -> WorkloadState:
        """Time out ready or held work now, as an operator.

        Raises:
            WorkloadError: ``WORKLOAD_TRANSITION_DENIED``.
        """
        at = _now(now)
        actor = inputs.actor(actor)
        return self._apply(
            workload_id, at, lambda w: lifecycle.timeout(w, actor, at), enforce_deadlines=False
        )

    def retry(
        self, workload_id: str, actor: str, now: int | None = None, reason: str | None = None
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
        self._apply(
            workload_id,
            at,
            lambda w: lifecycle.operator_retry(w, actor, at, reason),
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
        at = _now(now)
        grant_id = inputs.identifier(grant_id, "grant_id")
        w, version = self._load(workload_id)
        if w.approval is None:
            raise WorkloadError(
                ErrorCode.WORKLOAD_APPROVAL_NOT_REQUIRED,
                "this workload was not admitted with an approval requirement",
            )
        ensure_approver_permitted(w.approval.policy, w.requested_by, decider)
        if w.input_hash != input_hash:
            raise WorkloadError(
                ErrorCode.WORKLOAD_APPROVAL_STALE,
                "the decision names input this workload does not have",
                {"input_hash": w.input_hash},
            )
        if w.approval.decision is not None:
            return decided_answer(w.approval.decision, verdict)
        self._enforce_deadline(w, version, at)
        decision = lifecycle.decide(w, decider, verdict, note, grant_id, input_hash, at)
        self._persist(w, "workload.mutated", version)
        return decision, False

    # ---------------------------------------------------------------- audit and grants

    def audit_after(
        self,
        tenant_id: str,
        application_id: str,
        after: int = 0,
        limit: int = 100,
        *,
        scan: int = AUDIT_SCAN,
    ) -> tuple[builtins.list[CommittedTransaction], int]:
        """Committed transactions after revision ``after`` whose audit record names this
        tenant and application (``"tenant"``, ``"application"``), oldest first, at most
        ``limit``; and the revision to continue after.

        The log is one sequence for every tenant, so this reads it in order and keeps the
        matching entries; one call reads at most ``scan`` log entries (a bounded cost
        however sparse the tenant's entries are). The revision answered is the last
        returned entry's when the page is full, otherwise the last entry read (or
        ``after`` when none was): passing it back never skips nor repeats an entry.

        Raises:
            WorkloadError: ``WORKLOAD_INVALID``; ``WORKLOAD_STORAGE_FAILURE``.
        """
        tenant_id = inputs.identifier(tenant_id, "tenant_id")
        application_id = inputs.identifier(application_id, "application_id")
        after = inputs.integer(after, "after", 0)
        limit = inputs.integer(limit, "limit", 1)
        budget = inputs.integer(scan, "scan", 1)
        found: builtins.list[CommittedTransaction] = []
        cursor = after
        while budget > 0:
            batch = self.db.committed_transactions_after(cursor, min(budget, AUDIT_BATCH))
            if not batch:
                break
            budget -= len(batch)
            for transaction in batch:
                cursor = transaction.commit_revision
                audit = transaction.audit or {}
                if audit.get("tenant") == tenant_id and audit.get("application") == application_id:
                    found.append(transaction)
                    if len(found) == limit:
                        return found, cursor
        return found, cursor

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
        it, ``False`` when it already was (idempotent; the first revocation is kept).

        The revocation is a row of ``system_revoked_grants`` keyed by the grant id *and*
        its tenant and application, committed require-absent and logged (audit kind
        ``grant.revoked``). Scoping it means a tenant can only revoke its own grants: a
        revocation naming another tenant's grant id matches no grant that tenant's server
        checks.

        Raises:
            WorkloadError: ``WORKLOAD_INVALID``; ``WORKLOAD_STORAGE_FAILURE``.
        """
        at = _now(now)
        grant_id = inputs.identifier(grant_id, "grant_id")
        actor = inputs.actor(actor)
        key = revoked_grant_key(
            inputs.identifier(tenant_id, "tenant_id"),
            inputs.identifier(application_id, "application_id"),
            grant_id,
        )
        if self.db.get_row(REVOKED_GRANTS_COLLECTION, key) is not None:
            return False
        document = {
            "grant_id": grant_id,
            "tenant_id": tenant_id,
            "application_id": application_id,
            "revoked_by": actor,
            "revoked_at": at,
        }
        operation_id = "grant_tx_" + secrets.token_hex(12)
        audit = {
            "kind": "grant.revoked",
            "subject": actor,
            "actor": actor,
            "tenant": tenant_id,
            "application": application_id,
            "grant_id": grant_id,
            "operation_id": operation_id,
            "revoked_at": at,
        }
        try:
            self.db.commit(
                operation_id,
                [Mutation(REVOKED_GRANTS_COLLECTION, key, document)],
                [Precondition(REVOKED_GRANTS_COLLECTION, key, require_absent=True)],
                audit,
            )
        except StorageConflict:
            # Another writer revoked it first: revoked either way.
            if self.db.get_row(REVOKED_GRANTS_COLLECTION, key) is None:
                raise
            return False
        return True

    def revocations(self, tenant_id: str, application_id: str) -> builtins.list[dict[str, Any]]:
        """The grants :meth:`revoke_grant` revoked in ``tenant_id``'s ``application_id``,
        oldest first: ``{"grant_id", "revoked_by", "revoked_at"}`` each. Minted grants are
        not recorded, so revocations are what a store can list.

        Raises:
            WorkloadError: ``WORKLOAD_INVALID``; ``WORKLOAD_STORAGE_FAILURE``.
        """
        tenant_id = inputs.identifier(tenant_id, "tenant_id")
        application_id = inputs.identifier(application_id, "application_id")
        found = [
            {key: row.document[key] for key in ("grant_id", "revoked_by", "revoked_at")}
            for row in self.db.list_rows(REVOKED_GRANTS_COLLECTION)
            if row.document.get("tenant_id") == tenant_id
            and row.document.get("application_id") == application_id
        ]
        return sorted(found, key=lambda entry: (entry["revoked_at"], entry["grant_id"]))

    def is_grant_revoked(self, grant_id: str, *, tenant_id: str, application_id: str) -> bool:
        """Whether :meth:`revoke_grant` revoked this grant of ``tenant_id``'s
        ``application_id``. One keyed read of the store (the primary key).

        Raises:
            WorkloadError: ``WORKLOAD_STORAGE_FAILURE``.
        """
        key = revoked_grant_key(tenant_id, application_id, grant_id)
        return self.db.get_row(REVOKED_GRANTS_COLLECTION, key) is not None

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

        def expire(w: Workload) -> bool:
            breach = deadline_breach(w, at)
            if breach is None:
                return False
            lifecycle.expire(w, breach[0], breach[1], at)
            return True

        return self._sweep("deadline_at", at, expire)

    def recover_expired(self, now: int | None = None) -> builtins.list[str]:
        """Recover every workload whose lease expired (its worker is presumed lost): the
        attempt is recorded lost and the policy decides ``READY`` or ``DEAD_LETTER``. A
        workload another writer recovered (or completed) first is left to it. Returns the
        ids this call recovered.
        """
        at = _now(now)

        def recover(w: Workload) -> bool:
            if not lifecycle.lease_expired(w, at):
                return False
            lifecycle.recover(w, at)
            return True

        return self._sweep("lease_expires_at", at, recover)

    def _sweep(self, column: str, now: int, act: Callable[[Workload], bool]) -> builtins.list[str]:
        """Apply ``act`` to every workload the index says is due on ``column`` at ``now``;
        ``act`` re-decides on the committed version and answers whether it changed it.
        """
        acted: builtins.list[str] = []
        done: set[str] = set()
        skipped = 0
        while True:
            rows = self._due(column, now, skipped)
            if not rows:
                return acted
            for row in rows:
                w = _parse(row)
                if w.workload_id in done or not act(w):
                    skipped += 1  # not due after all (the index was stale): page past it
                    continue
                try:
                    self._persist(w, "workload.mutated", row.version)
                except StorageConflict:
                    # Another writer committed this workload first (in a race, its own
                    # recovery). Nothing of ours was committed; if it still needs acting
                    # on, the next pass sees it.
                    skipped += 1
                    continue
                acted.append(w.workload_id)
                done.add(w.workload_id)

    def _due(self, column: str, now: int, offset: int) -> builtins.list[StoredRow]:
        if self._pinned is None:
            rows = self.db.rows_due(
                DURABLE_WORK_COLLECTION, column, now, limit=offset + MAINTENANCE_BATCH
            )
            return rows[offset:]
        due = []
        for key, (document, version) in self._pinned.items():
            value = getattr(row_index(Workload.model_validate(document)), column)
            if value is not None and value <= now:
                due.append((value, StoredRow(DURABLE_WORK_COLLECTION, key, version, 0, document)))
        due.sort(key=lambda item: (item[0], item[1].key))
        return [row for _, row in due][offset : offset + MAINTENANCE_BATCH]

    def rebuild_indexes(self) -> int:
        """Recompute every workload's scheduling index from its committed document (after
        an upgrade that changes how the index is derived, or to repair one). Documents,
        versions and the revision are untouched. Returns how many rows were rewritten.
        """
        rebuilt = 0
        for row in self.db.list_rows(DURABLE_WORK_COLLECTION):
            if self.db.update_index(DURABLE_WORK_COLLECTION, row.key, row_index(_parse(row))):
                rebuilt += 1
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
        """Import a pre-canonical JSON store file into ``db`` and verify it.

        The file is one JSON object: ``"workloads"`` maps each workload id to its record
        (a :class:`Workload` as JSON), and three derived maps are the evidence the import
        is checked against: ``"idempotency"`` (``"tenant:application:key"`` to workload id),
        ``"result_ids"`` (result id to workload id) and ``"event_sequence"`` (the highest
        event sequence). Every record is checked before anything is written.

        Idempotent: a workload already imported identically is skipped. The derived maps are
        verification evidence, not authorities: they must match what the canonical work
        derives. ``progress`` is told ``(done, total)`` after each workload, ``imported``
        ``(workload_id, True)`` for one written and ``(workload_id, False)`` for one skipped.

        Raises:
            WorkloadError: ``WORKLOAD_MIGRATION_CONFLICT`` when records are not workload
                records (one line each: index, id, field, why), a key does not match its
                workload, canonical work differs from the file, or the derived maps do not
                match; ``WORKLOAD_STORAGE_FAILURE`` when the file cannot be read.
        """
        legacy = _read_legacy_file(Path(path))
        store = cls(db)
        workloads: dict[str, Any] = legacy.get("workloads") or {}
        parsed = _legacy_records(workloads)
        for done, (key, workload) in enumerate(parsed.items(), start=1):
            if key != workload.workload_id:
                raise WorkloadError(
                    ErrorCode.WORKLOAD_MIGRATION_CONFLICT,
                    f"legacy key {key} does not match workload identity {workload.workload_id}",
                )
            existing = store._read(key)
            if existing is not None:
                if existing[0].to_json() != workload.to_json():
                    raise WorkloadError(
                        ErrorCode.WORKLOAD_MIGRATION_CONFLICT,
                        f"canonical workload {key} differs from legacy source",
                    )
            else:
                store._persist(workload, "workload_migration", None)
            if imported is not None:
                imported(key, existing is None)
            if progress is not None:
                progress(done, len(workloads))
        canonical = [_parse(row) for row in db.list_rows(DURABLE_WORK_COLLECTION)]
        derived_idempotency = {
            legacy_idempotency_scope(w.tenant_id, w.application_id, w.idempotency_key): (
                w.workload_id
            )
            for w in canonical
        }
        derived_results = {
            w.result.result_id: w.workload_id for w in canonical if w.result is not None
        }
        derived_sequence = max(
            (e.sequence for w in canonical for e in w.execution_history), default=0
        )
        if (
            (legacy.get("idempotency") or {}) != derived_idempotency
            or (legacy.get("result_ids") or {}) != derived_results
            or (legacy.get("event_sequence") or 0) != derived_sequence
        ):
            raise WorkloadError(
                ErrorCode.WORKLOAD_MIGRATION_CONFLICT,
                "legacy derived indexes do not match canonical work aggregates",
            )
        return store

    # ---------------------------------------------------------------- test hooks

    def _pin_reads(self, *, empty: bool = False) -> WorkloadStore:
        """Test hook: read every workload from a snapshot of the committed rows taken now
        (or from an empty one), adopting a committed row only when a commit of this store
        conflicts on it. Reproduces another writer committing between a read and a commit,
        the window only the storage guard closes (the reference's ``without_refresh``).
        """
        self._pinned = {}
        if not empty:
            for row in self.db.list_rows(DURABLE_WORK_COLLECTION):
                self._pinned[row.key] = (row.document, row.version)
        return self


def revoked_grant_key(tenant_id: str, application_id: str, grant_id: str) -> str:
    """The key of a grant's revocation in ``system_revoked_grants``: a digest of the grant
    id with its tenant and application (a JSON array, so no ids can make two coincide).
    """
    return "revoked_" + sha256_hex(canonical_json([tenant_id, application_id, grant_id]))[:32]


def _cursor_of(w: Workload) -> Cursor:
    return w.priority, w.created_at, w.workload_id


def _sorts_after(w: Workload, after: Cursor) -> bool:
    priority, created_at, key = after
    return (-w.priority, w.created_at, w.workload_id) > (-priority, created_at, key)


def _now(now: int | None) -> int:
    """The one place the authority reads the clock: ``now``, or the current unix second."""
    if now is None:
        return int(time.time())
    return inputs.integer(now, "now", 0)


def _legacy_records(workloads: dict[str, Any]) -> dict[str, Workload]:
    """Every legacy record as a :class:`Workload`, or one refusal naming each bad record on
    a line of its own: its index, its id, and the first field wrong with it and why.
    """
    parsed: dict[str, Workload] = {}
    problems: builtins.list[str] = []
    for index, (key, document) in enumerate(workloads.items()):
        try:
            parsed[key] = Workload.model_validate(document)
        except ValidationError as error:
            first = error.errors(include_url=False)[0]
            where = ".".join(str(part) for part in first["loc"]) or "record"
            more = len(error.errors()) - 1
            also = f" (and {more} more)" if more else ""
            problems.append(f"record {index} ({key}): {where}: {first['msg']}{also}")
        except WorkloadError as error:
            problems.append(f"record {index} ({key}): {error.message}")
    if problems:
        raise WorkloadError(
            ErrorCode.WORKLOAD_MIGRATION_CONFLICT,
            f"{len(problems)} legacy records are not workload records:\n" + "\n".join(problems),
            {"records": len(problems)},
        )
    return parsed


def _read_legacy_file(path: Path) -> dict[str, Any]:
    try:
        legacy = json.loads(path.read_bytes())
    except OSError as error:
        raise WorkloadError(
            ErrorCode.WORKLOAD_STORAGE_FAILURE, f"cannot read legacy file {path}: {error}"
        ) from error
    except ValueError as error:
        raise WorkloadError(
            ErrorCode.WORKLOAD_STORAGE_FAILURE, f"legacy file {path} is not JSON: {error}"
        ) from error
    if not isinstance(legacy, dict):
        raise WorkloadError(
            ErrorCode.WORKLOAD_STORAGE_FAILURE, f"legacy file {path} is not a JSON object"
        )
    return legacy


def _audit(w: Workload, document: dict[str, Any], action: str, operation_id: str) -> dict[str, Any]:
    """The audit record of a commit: who asked for the work, under which grant, who acted
    now, and a digest of the committed aggregate.
    """
    grant = w.authorization_snapshot.grant
    requester = w.requested_by
    last = w.execution_history[-1] if w.execution_history else None
    migration = action == "workload_migration"
    return {
        "kind": action,
        "subject": requester.id,
        "principal_id": requester.id,
        "agent_id": requester.id if requester.kind.value == "agent" else None,
        "session_id": w.session_id,
        "delegator_id": grant.issuer.id,
        "authorization_decision_id": grant.id,
        "tenant": w.tenant_id,
        "application": w.application_id,
        "work_id": w.workload_id,
        "operation_id": operation_id,
        "attempt_id": w.attempts[-1].attempt_id if w.attempts else None,
        "worker_id": w.current_claim.worker_id if w.current_claim is not None else None,
        "result_id": w.result.result_id if w.result is not None else None,
        "actor": last.actor if last is not None else None,
        "event_type": last.event_type if last is not None else None,
        "state": w.state.value,
        "source_kind": "WorkloadStore" if migration else None,
        "source_digest": content_hash(document),
        "migration_outcome": "imported" if migration else None,
    }
