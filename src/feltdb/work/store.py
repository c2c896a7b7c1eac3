"""``WorkloadStore``: the workload authority's facade.

Each method checks its arguments and hands its command to the one unit of work
(:mod:`feltdb.work.unit`): load the workload it names (one keyed read, in the caller's
scope), decide (:mod:`~feltdb.work.worker_commands`, ``operator_commands``, ``admitting``,
``claim_loop``, ``sweeps``), and commit the decision guarded by the version read. A single
call and a batch item are decided by one function and committed through one ``commit_many``;
a race of two writers is the store's compare-and-set: the loser gets ``WORKLOAD_CONFLICT``.
"""

from __future__ import annotations

import builtins
import os
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from feltdb.auth import Grant, Subject
from feltdb.auth.scope import Scope
from feltdb.errors import WorkloadError
from feltdb.records.workload import (
    DURABLE_WORK_COLLECTION,
    ApprovalDecision,
    Workload,
    WorkloadCheckpoint,
    WorkloadClaim,
    WorkloadExecutionContext,
    WorkloadResult,
)
from feltdb.storage.base import Database
from feltdb.storage.targets import open_database
from feltdb.work import admitting, claim_loop, inputs, legacy, listing, sweeps, worker_batches
from feltdb.work import operator_commands as operator
from feltdb.work import worker_commands as worker_
from feltdb.work.audit import AuditTrail
from feltdb.work.batches import Completion, Heartbeat
from feltdb.work.changes import CommitObserver
from feltdb.work.claimed import Claims, LeaseRenewal
from feltdb.work.clock import resolved_now as _now
from feltdb.work.inputs import DEFAULT_LEASE_MS, DEFAULT_MAX_LEASE_MS, Cursor
from feltdb.work.limits_view import Limits
from feltdb.work.models import CreateWorkload
from feltdb.work.pruning import Retention
from feltdb.work.rearming import cancel_with_dependents, retry_with_dependents
from feltdb.work.revocations import REVOKED_GRANTS_COLLECTION, Revocations, revoked_grant_key
from feltdb.work.schedule_book import Schedules
from feltdb.work.states import ApprovalOutcome, WorkloadState
from feltdb.work.tenant_claims import TenantClaims
from feltdb.work.unit import UnitOfWork
from feltdb.work.workflows import Workflows

__all__ = [
    "DEFAULT_LEASE_MS",
    "REVOKED_GRANTS_COLLECTION",
    "WorkloadStore",
    "revoked_grant_key",
]


class WorkloadStore:
    """The workload authority over one :class:`~feltdb.storage.base.Database`.

    Safe to share between threads. Two stores on one target (in one process or several)
    are two writers of one store: each sees the other's commits at once.

    A per-workload operation takes an optional ``scope`` (:class:`~feltdb.auth.scope.Scope`):
    work outside it is answered ``WORKLOAD_NOT_FOUND``, as missing work is. "The fence's
    codes": ``WORKLOAD_CLAIM_INVALID``, ``WORKLOAD_STALE_FENCE``, ``WORKLOAD_LEASE_EXPIRED``.
    """

    def __init__(
        self,
        db: Database,
        *,
        max_lease_ms: int = DEFAULT_MAX_LEASE_MS,
        group_commit: bool = True,
    ) -> None:
        """Act on ``db`` (not owned unless opened with :meth:`open`). ``max_lease_ms``: the
        longest lease or extension granted (a day by default; longer is refused
        ``WORKLOAD_INVALID``). ``group_commit``: single operations that threads commit at
        one moment share one transaction, each with its own guard
        (:class:`~feltdb.storage.group_commit.GroupCommit`).
        """
        self.db = db
        self.max_lease_ms = inputs.integer(max_lease_ms, "max_lease_ms", 1000)
        self.unit = UnitOfWork(db, group_commit=group_commit)
        self.audit = AuditTrail(db, _now)  # the log by application, its chain sealed, verified
        self.grants = Revocations(db, _now)  # the grants revoked in this store
        self.limits = Limits(db, _now)  # concurrency limits: what they hold, and defaults
        self.retention = Retention(db, _now)  # finished work pruned past its age
        self.workflows = Workflows(self.unit, _now)  # workloads submitted with dependencies
        self.schedules = Schedules(self, _now)  # and the scheduler's pass
        self.tenants = TenantClaims(self, _now)  # claims serving several tenants in turn
        self._release: Callable[[], None] = lambda: None  # close: nothing, or db.close

    @classmethod
    def open(
        cls, target: str | os.PathLike[str], *, max_lease_ms: int = DEFAULT_MAX_LEASE_MS
    ) -> WorkloadStore:
        """Open (creating an embedded one) the store at ``target``: a file path or
        ``sqlite:///path`` (embedded SQLite), or ``postgresql://…``.

        Raises:
            WorkloadError: ``WORKLOAD_STORAGE_FAILURE`` when the target cannot be opened.
        """
        store = cls(open_database(target), max_lease_ms=max_lease_ms)
        store._release = store.db.close
        return store

    def close(self) -> None:
        """Close the database if this store opened it."""
        self._release()

    def __enter__(self) -> WorkloadStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def observe(self, observer: CommitObserver) -> Callable[[], None]:
        """Call ``observer`` with each :class:`~feltdb.work.changes.WorkloadChange` this
        store commits (not other writers'); answers the function that unsubscribes it.
        """
        return self.unit.observe(observer)

    def admit(
        self, request: CreateWorkload, *, connection: object | None = None
    ) -> tuple[Workload, bool]:
        """Create a workload, or answer the one this requester created under the same key
        (and an equivalent request); ``True`` when this call created it. ``connection``: the
        caller's open transaction, which commits the work and its audit record, or neither.

        Raises:
            WorkloadError: ``WORKLOAD_INVALID`` (the request, the connection), ``…_SECRET_
                REJECTED``, ``…_UNAUTHORIZED``, ``IDEMPOTENCY_KEY_REUSED``, ``…_QUOTA_EXCEEDED``.
        """
        return admitting.admit(self.unit.joined(connection), request)

    def admit_many(
        self, requests: Sequence[CreateWorkload], *, connection: object | None = None
    ) -> builtins.list[tuple[Workload, bool] | WorkloadError]:
        """:meth:`admit` for each request, in one transaction (``connection``: the caller's):
        answers in order, each the single call's. A request repeating an earlier one's key
        (or depending on one) is decided as if the earlier one were already admitted.
        """
        return admitting.admit_many(self.unit.joined(connection), requests)

    def create(self, request: CreateWorkload) -> Workload:
        """:meth:`admit`, answering only the workload."""
        return self.admit(request)[0]

    def get(self, workload_id: str, *, scope: Scope | None = None) -> Workload:
        """The committed workload, or ``WORKLOAD_NOT_FOUND`` (also outside ``scope``)."""
        return self.unit.load(workload_id, scope).workload

    def list(self, tenant_id: str, application_id: str) -> builtins.list[Workload]:
        """An application's committed workloads: priority descending, then oldest first."""
        return listing.every_workload(self.db, tenant_id, application_id)

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
    ) -> listing.SummaryPage:
        """One page of :meth:`list`, summarized (of one ``state`` or ``definition``, if given),
        after the cursor ``after`` (``None``: the first page), and the next page's cursor
        (``None``: the last): a keyset seek, the same cost on every page (:func:`~.listing.page`).

        Raises:
            WorkloadError: ``WORKLOAD_INVALID`` (a bad limit, state or cursor);
                ``WORKLOAD_STORAGE_FAILURE``.
        """
        return listing.page(
            self.db, tenant_id, application_id,
            state=state, definition=definition, after=after, limit=limit, scope=scope,
        )  # fmt: skip

    def cancel(
        self, workload_id: str, actor: str, now: int | None = None, *, scope: Scope | None = None
    ) -> WorkloadState:
        """Cancel: at once when no worker holds it, otherwise by request to its worker (a
        dead letter's cancel re-arms what it ended: :func:`.cancel_with_dependents`).

        Raises:
            WorkloadError: ``WORKLOAD_TRANSITION_DENIED`` for finished work.
        """
        return cancel_with_dependents(self.unit, workload_id, actor, _now(now), scope)

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
            WorkloadError: ``WORKLOAD_TIMED_OUT``, ``WORKLOAD_ATTEMPTS_EXHAUSTED`` (it was
                dead-lettered), ``WORKLOAD_APPROVAL_PENDING``, ``WORKLOAD_REJECTED``,
                ``WORKLOAD_NOT_READY``, ``WORKLOAD_NOT_YET_ELIGIBLE``,
                ``WORKLOAD_CAPABILITY_DENIED``, ``WORKLOAD_CONFLICT``.
        """
        at = _now(now)
        worker = inputs.actor(worker, "worker")
        held = inputs.capabilities(capabilities)
        lease = inputs.lease(lease_ms, "lease_ms", self.max_lease_ms)
        read, rows = self.unit.dependencies, self.unit.db.get_row
        return self.unit.run(
            scope,
            lambda load: worker_.claim(workload_id, worker, held, lease, at, load, read, rows),
        )

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
        an application (of ``definitions`` and ``environments`` only, unless ``None``), in
        priority order; ``None`` when there is none. A candidate past a deadline or out of
        attempts is settled as :meth:`claim` would settle it, and the next one tried.
        """
        claimed = self.claim_work(
            tenant_id, application_id, worker, capabilities, 1, now, lease_ms,
            definitions=definitions, environments=environments, start=False,
        )  # fmt: skip
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
        """Up to ``limit`` claims (1 to :data:`~feltdb.work.inputs.MAX_BATCH_ITEMS`), chosen
        as :meth:`claim_next` chooses, one transaction per batch of candidates read; with
        ``start``, each also started in the same commit. Fewer, or none, when fewer are claimable.
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
        under: Grant | None = None,
    ) -> Claims:
        """:meth:`claim_many` (started unless ``start=False``), each claim answered with
        the workload as its commit left it, needing no read; ``under``: a grant checked
        again in each claiming transaction (expired or revoked: ``WORKLOAD_UNAUTHORIZED``).
        """
        return claim_loop.claim_work(
            self.unit, tenant_id, application_id, worker, capabilities, limit, now=_now(now),
            lease_ms=lease_ms, max_lease_ms=self.max_lease_ms, definitions=definitions,
            environments=environments, start=start, under=under,
        )  # fmt: skip

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
            WorkloadError: ``…_TIMED_OUT``, the fence's, ``…_TRANSITION_DENIED``, ``…_CONFLICT``.
        """
        at = _now(now)
        self.unit.run(
            scope,
            lambda load: worker_.start(workload_id, claim_id, worker, fencing_token, at, load),
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
        at, cap = _now(now), self.max_lease_ms
        return self.unit.run(scope, lambda load: worker_.heartbeat(beat, at, load, cap))

    def heartbeat_many(
        self,
        heartbeats: Sequence[Heartbeat],
        now: int | None = None,
        *,
        scope: Scope | None = None,
    ) -> builtins.list[WorkloadClaim | WorkloadError]:
        """:meth:`heartbeat` for each item, in one transaction; per item, in order, what
        the single call answers (the extended claim, or its refusal).
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
        return worker_batches.renew_leases(
            self.unit, heartbeats, _now(now), scope, self.max_lease_ms
        )

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
        step = worker_.execution_context(
            workload_id, claim_id, worker, fencing_token, secret_references, _now(now),
            self.unit.loader(scope), self.unit.dependency_outputs,
        )  # fmt: skip
        return self.unit.finish(step)

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
        at = _now(now)
        return self.unit.run(scope, lambda load: worker_.checkpoint(
            workload_id, claim_id, worker, fencing_token, state, at, load
        ))  # fmt: skip

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
        """Record the attempt's result and succeed the workload (a report repeated answers
        the recorded result).

        Raises:
            WorkloadError: ``WORKLOAD_SECRET_REJECTED``, ``WORKLOAD_RESULT_CONFLICT``,
                ``WORKLOAD_RESULT_DUPLICATE``, ``WORKLOAD_TIMED_OUT``, the fence's codes,
                ``WORKLOAD_TRANSITION_DENIED`` (e.g. cancellation was requested).
        """
        completion = Completion(
            workload_id, claim_id, worker, fencing_token, result_id, output, artifacts,
            schema_version,
        )  # fmt: skip
        unit, at = self.unit, _now(now)
        return unit.run(
            scope, lambda load: worker_.complete(completion, at, load, unit.result_owner)
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
        return worker_batches.complete_each(self.unit, completions, _now(now), scope)

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
        """Report the attempt failed (``effect``: ``"none"`` or ``"unknown"``, decided like a
        lost worker); the retry policy decides what follows. A report repeated replays.

        Raises:
            WorkloadError: ``WORKLOAD_SECRET_REJECTED``, ``WORKLOAD_INVALID``,
                ``WORKLOAD_TIMED_OUT``, the fence's codes.
        """
        at, failure = _now(now), (kind, error, effect)
        return self.unit.run(scope, lambda load: worker_.fail(
            workload_id, claim_id, worker, fencing_token, failure, at, load
        ))  # fmt: skip

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
        self.unit.run(scope, lambda load: worker_.confirm_cancel(
            workload_id, claim_id, worker, fencing_token, at, load
        ))  # fmt: skip

    def timeout(
        self, workload_id: str, actor: str, now: int | None = None, *, scope: Scope | None = None
    ) -> WorkloadState:
        """Time out ready or held work now, as an operator.

        Raises:
            WorkloadError: ``WORKLOAD_TRANSITION_DENIED``.
        """
        at = _now(now)
        return self.unit.run(scope, lambda load: operator.timeout(workload_id, actor, at, load))

    def retry(
        self,
        workload_id: str,
        actor: str,
        now: int | None = None,
        reason: str | None = None,
        *,
        scope: Scope | None = None,
    ) -> None:
        """Re-arm failed, dead-lettered or timed-out work for one more attempt (at most
        ``retry_policy.max_attempts`` times), with actor and reason; then what it ended.

        Raises:
            WorkloadError: ``WORKLOAD_TRANSITION_DENIED``, ``WORKLOAD_RETRY_EXHAUSTED``.
        """
        retry_with_dependents(self.unit, workload_id, actor, reason, _now(now), scope)

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
        """Commit an approval decision by ``decider`` (authenticated, holding a
        ``workload:approve`` grant), bound to ``input_hash``; ``True`` when it replays the
        committed one. The approval policy applies here
        (:func:`~feltdb.work.approvals.ensure_approver_permitted`).

        Raises:
            WorkloadError: ``WORKLOAD_INVALID``, ``WORKLOAD_SECRET_REJECTED``,
                ``WORKLOAD_APPROVAL_NOT_REQUIRED``, ``WORKLOAD_APPROVER_NOT_PERMITTED``,
                ``WORKLOAD_APPROVAL_STALE``, ``WORKLOAD_APPROVAL_DECIDED``, ``WORKLOAD_TIMED_OUT``,
                ``WORKLOAD_APPROVAL_NOT_ACTIONABLE``, ``WORKLOAD_CONFLICT``.
        """
        at = _now(now)
        return self.unit.run(scope, lambda load: operator.decide(
            workload_id, decider, (outcome, reason), (grant_id, input_hash), at, load
        ))  # fmt: skip

    def count_by_state(self) -> dict[WorkloadState, int]:
        """How many workloads there are in each state, every tenant's (0 for none): one
        ``GROUP BY`` over the scheduling index.
        """
        counted = self.db.count_by_state(DURABLE_WORK_COLLECTION)
        return {state: counted.get(state.value, 0) for state in WorkloadState}

    def ready_by_definition(self) -> dict[str, tuple[int, int]]:
        """Per definition id, ``(count, oldest created_at)`` of the READY work, oldest
        first, every tenant's (the server's ``feltdb_ready_*`` gauges).
        """
        return self.db.oldest_by_definition(DURABLE_WORK_COLLECTION, WorkloadState.READY.value)

    def enforce_deadlines(self, now: int | None = None) -> builtins.list[str]:
        """Time out every workload past a deadline, as the maintenance pass does each
        second (see :func:`~.sweeps.enforce_deadlines`); the ids this call timed out.
        """
        return sweeps.enforce_deadlines(self.unit, _now(now))

    def recover_expired(self, now: int | None = None) -> builtins.list[str]:
        """Recover the work whose lease expired (:func:`~.sweeps.recover_expired`); its ids."""
        return sweeps.recover_expired(self.unit, _now(now))

    def rebuild_indexes(self) -> int:
        """Derive each index from its document (:func:`~.sweeps.rebuild_indexes`); rows redone."""
        return sweeps.rebuild_indexes(self.unit)

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
        store.unit.announce()  # imported work may be claimable
        return store
