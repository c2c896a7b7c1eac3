"""The local client: :class:`WorkloadClient` on a :class:`~feltdb.work.store.WorkloadStore`
in process, with no server.

A :class:`LocalClient` acts as one ``subject`` in one :class:`~feltdb.auth.scope.Scope`, and
answers as a server answers that subject's token: work outside the scope is
``WORKLOAD_NOT_FOUND`` in the store's own words (the store is told the scope, so nothing
here reads a workload twice), the worker name is :func:`~feltdb.auth.policy.worker_name`
of the subject, the actor of an operator's transition is the subject, a submission's
``authorization_snapshot`` is the client's signed ``grant`` (evidence, never a token) and
a decision names that grant. Its operations go through the holder's
:class:`~feltdb.work.authority.Authority` (``Authority.holding``), the one place the API,
the dashboard and this client compose a caller (a submission and a read hand the store the
same scope directly): it checks no capability, since whoever holds the store holds
everything, so the scope is its one boundary (and the grant, where a record keeps it).
"""

from __future__ import annotations

import builtins
import time
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from feltdb.auth import SignedGrant, Subject
from feltdb.auth.policy import ClaimFilter, worker_name
from feltdb.auth.scope import Scope
from feltdb.client.limits import LocalLimits
from feltdb.client.local_batches import LocalBatches
from feltdb.client.local_schedules import LocalSchedules
from feltdb.client.protocol import (
    MAX_PAGE,
    MAX_WAIT_MS,
    AuditPage,
    Page,
    SubmissionLike,
    WorkloadClient,
    as_submission,
)
from feltdb.client.retention import LocalRetention
from feltdb.client.workflows import LocalWorkflows
from feltdb.errors import ErrorCode, WorkloadError
from feltdb.records.workload import (
    ApprovalDecision,
    Workload,
    WorkloadCheckpoint,
    WorkloadClaim,
    WorkloadExecutionContext,
    WorkloadResult,
)
from feltdb.storage.audit_chain import ChainReport
from feltdb.work import worker_authority
from feltdb.work.audit import anchor_of
from feltdb.work.authority import Authority
from feltdb.work.cursors import decode_cursor, encode_cursor
from feltdb.work.inputs import DEFAULT_LEASE_MS
from feltdb.work.models import CreateWorkload
from feltdb.work.states import ApprovalOutcome, WorkloadState
from feltdb.work.store import WorkloadStore
from feltdb.work.submission import admission_request
from feltdb.work.worker_authority import claim_choice
from feltdb.work.workers import WorkersSeen

Found = TypeVar("Found")

POLL_S = 0.2
"""How often a waiting :meth:`LocalClient.claim_next` looks for work again."""


class LocalClient(
    LocalBatches, LocalLimits, LocalRetention, LocalSchedules, LocalWorkflows, WorkloadClient
):
    """``subject`` calling ``store`` in ``scope``.

    Args:
        store: the store (this client never closes it: it belongs to whoever opened it).
        scope: whose work the subject may see and act on.
        subject: who acts: the worker, the requester, the operator or the approver.
        clock: the unix-seconds clock of every call; ``None``: the store's (the wall's).
        grant: the subject's signed grant (evidence): kept as a submission's
            ``authorization_snapshot`` and named by a decision; a client without one
            refuses both (``WORKLOAD_UNAUTHORIZED``) and may do everything else.
        capabilities: what the subject holds for claiming (default: the grant's; with
            neither, what each ``claim_next`` declares).
        maintenance_interval_s: when set, :meth:`claim_next` also runs the authority's
            maintenance (deadlines, lost leases, due schedules) at most this often.
            For embedded workers with no server to run it: without it, work of a worker
            that died would wait forever.
    """

    def __init__(
        self,
        store: WorkloadStore,
        scope: Scope,
        subject: Subject,
        *,
        clock: Callable[[], int] | None = None,
        grant: SignedGrant | None = None,
        capabilities: Iterable[str] | None = None,
        maintenance_interval_s: float | None = None,
    ) -> None:
        self.store = store
        self.scope = scope
        self._subject = subject
        self.clock = clock
        self.grant = grant
        if capabilities is None and grant is not None:
            capabilities = grant.grant.capabilities
        self.capabilities = None if capabilities is None else frozenset(capabilities)
        self.maintenance_interval_s = maintenance_interval_s
        self._maintained_at = float("-inf")
        self.acting = Authority.holding(
            store, subject, scope, grant.grant if grant is not None else None
        )
        """What every call does through: the holder's authority, within the scope."""

    @property
    def subject(self) -> Subject:
        """See :attr:`WorkloadClient.subject`."""
        return self._subject

    @property
    def worker(self) -> str:
        """The worker name the store records for this client's claims."""
        return worker_name(self._subject)

    @property
    def actor(self) -> str:
        """The actor recorded for this client's operator transitions."""
        return str(self._subject)

    def _now(self) -> int | None:
        return self.clock() if self.clock is not None else None

    def _signed(self, what: str) -> SignedGrant:
        """The client's signed grant, kept by ``what`` (refused when it has none)."""
        self.acting.evidence(what)
        assert self.grant is not None  # the authority holds its grant
        return self.grant

    def close(self) -> None:
        """Nothing to release: the store belongs to whoever opened it."""

    # -------------------------------------------------------------- requesters

    def submit(self, submission: SubmissionLike) -> tuple[Workload, bool]:
        """See :meth:`WorkloadClient.submit`."""
        return self.store.admit(self._request(submission))

    def _request(self, submission: SubmissionLike) -> CreateWorkload:
        return admission_request(
            as_submission(submission),
            tenant_id=self.scope.tenant_id,
            application_id=self.scope.application_id,
            requested_by=self._subject,
            authorization_snapshot=self._signed("a submission"),
            created_at=self.clock() if self.clock is not None else int(time.time()),
        )

    def get(self, workload_id: str) -> Workload:
        """See :meth:`WorkloadClient.get`."""
        return self.store.get(workload_id, scope=self.scope)

    def cancel(self, workload_id: str) -> WorkloadState:
        """See :meth:`WorkloadClient.cancel`."""
        return self.acting.cancel(workload_id, self._now())

    def list(
        self,
        *,
        state: WorkloadState | str | None = None,
        definition: str | None = None,
        limit: int = 50,
        cursor: str | None = None,
    ) -> Page:
        """See :meth:`WorkloadClient.list`."""
        if not 1 <= limit <= MAX_PAGE:
            raise WorkloadError(
                ErrorCode.WORKLOAD_INVALID,
                f"limit: a page holds 1 to {MAX_PAGE} items",
                {"fields": ["limit"]},
            )
        items, after = self.acting.workloads(state, definition, decode_cursor(cursor), limit)
        return Page(items, encode_cursor(after))

    def approvals(self, *, limit: int = 50, cursor: str | None = None) -> Page:
        """See :meth:`WorkloadClient.approvals`."""
        return self.list(state=WorkloadState.AWAITING_APPROVAL, limit=limit, cursor=cursor)

    def dead_letters(self, *, limit: int = 50, cursor: str | None = None) -> Page:
        """See :meth:`WorkloadClient.dead_letters`."""
        return self.list(state=WorkloadState.DEAD_LETTER, limit=limit, cursor=cursor)

    def workers(self) -> WorkersSeen:
        """See :meth:`WorkloadClient.workers`."""
        return self.acting.workers(self.clock() if self.clock is not None else int(time.time()))

    def audit(self, *, after: int = 0, limit: int = 100) -> AuditPage:
        """See :meth:`WorkloadClient.audit`."""
        items, next_after = self.acting.audit_after(after, limit)
        return AuditPage(items, next_after)

    def verify_audit(self, *, anchor: str | None = None) -> ChainReport:
        """See :meth:`WorkloadClient.verify_audit`."""
        self.acting.audit_reader()
        noted = None if anchor is None else anchor_of(anchor)
        return self.store.audit.verify(
            self.scope.tenant_id, self.scope.application_id, anchor=noted
        )

    def revocations(self) -> builtins.list[dict[str, Any]]:
        """See :meth:`WorkloadClient.revocations`."""
        return self.acting.revocations()

    def revoke_grant(self, grant_id: str, *, force: bool = False) -> bool:
        """See :meth:`WorkloadClient.revoke_grant`."""
        return self.acting.revoke(grant_id, self._now(), force=force)

    # -------------------------------------------------------------- workers

    def _eligible(
        self, capabilities: Iterable[str] | None, definitions: Iterable[str] | None
    ) -> ClaimFilter:
        """What a claim of this client may take: its capabilities and its scope's
        definitions, narrowed to what it asks (:func:`~feltdb.work.worker_authority.claim_choice`).
        """
        return claim_choice(self.acting, capabilities, definitions, self.capabilities)

    def _maintain(self) -> None:
        interval = self.maintenance_interval_s
        if interval is not None and time.monotonic() - self._maintained_at >= interval:
            self._maintained_at = time.monotonic()
            self.store.enforce_deadlines(self._now())
            self.store.recover_expired(self._now())
            self.store.schedules.run_due(self._now())

    def claim_next(
        self,
        *,
        lease_ms: int = DEFAULT_LEASE_MS,
        wait_ms: int = 0,
        capabilities: Iterable[str] | None = None,
        definitions: Iterable[str] | None = None,
    ) -> WorkloadClaim | None:
        """See :meth:`WorkloadClient.claim_next`; it waits by looking again every
        :data:`POLL_S` (and runs maintenance first when :attr:`maintenance_interval_s` is
        set).
        """
        eligible = self._eligible(capabilities, definitions)
        return self._waiting(
            wait_ms,
            lambda: worker_authority.claim_next(
                self.acting, eligible, now=self._now(), lease_ms=lease_ms
            ),
        )

    def _waiting(self, wait_ms: int, look: Callable[[], Found]) -> Found:
        """``look()``'s first answer that found something, looking again every
        :data:`POLL_S` for up to ``wait_ms`` (maintenance first, when
        :attr:`maintenance_interval_s` is set); its last answer when none did.
        """
        if not 0 <= wait_ms <= MAX_WAIT_MS:
            raise WorkloadError(
                ErrorCode.WORKLOAD_INVALID,
                f"wait_ms: 0 to {MAX_WAIT_MS} milliseconds",
                {"fields": ["wait_ms"]},
            )
        deadline = time.monotonic() + wait_ms / 1000
        while True:
            self._maintain()
            found = look()
            remaining = deadline - time.monotonic()
            if found or remaining <= 0:
                return found
            time.sleep(min(POLL_S, remaining))

    def claim(self, workload_id: str, *, lease_ms: int = DEFAULT_LEASE_MS) -> WorkloadClaim:
        """See :meth:`WorkloadClient.claim`."""
        held = self._eligible(None, None).capabilities
        return self.acting.claim(workload_id, held, self._now(), lease_ms)

    def start(self, workload_id: str, claim_id: str, fencing_token: int) -> None:
        """See :meth:`WorkloadClient.start`."""
        self.acting.start(workload_id, claim_id, fencing_token, self._now())

    def heartbeat(
        self,
        workload_id: str,
        claim_id: str,
        fencing_token: int,
        *,
        extend_ms: int = DEFAULT_LEASE_MS,
    ) -> WorkloadClaim:
        """See :meth:`WorkloadClient.heartbeat`."""
        return self.acting.heartbeat(workload_id, claim_id, fencing_token, self._now(), extend_ms)

    def execution_context(
        self,
        workload_id: str,
        claim_id: str,
        fencing_token: int,
        secret_references: Iterable[str] = (),
    ) -> WorkloadExecutionContext:
        """See :meth:`WorkloadClient.execution_context`."""
        return self.acting.execution_context(
            workload_id, claim_id, fencing_token, self._now(), secret_references
        )

    def checkpoint(
        self, workload_id: str, claim_id: str, fencing_token: int, state: Any
    ) -> WorkloadCheckpoint:
        """See :meth:`WorkloadClient.checkpoint`."""
        return self.acting.checkpoint(workload_id, claim_id, fencing_token, state, self._now())

    def complete(
        self,
        workload_id: str,
        claim_id: str,
        fencing_token: int,
        result_id: str,
        output: Any,
        artifacts: Iterable[str] = (),
        schema_version: int = 1,
    ) -> WorkloadResult:
        """See :meth:`WorkloadClient.complete`."""
        recorded = (result_id, output, artifacts, schema_version)
        return self.acting.complete(workload_id, claim_id, fencing_token, recorded, self._now())

    def fail(
        self,
        workload_id: str,
        claim_id: str,
        fencing_token: int,
        kind: str,
        error: str,
        *,
        effect: str | None = None,
    ) -> WorkloadState:
        """See :meth:`WorkloadClient.fail`."""
        failure = (kind, error, effect)
        return self.acting.fail(workload_id, claim_id, fencing_token, failure, self._now())

    def confirm_cancel(self, workload_id: str, claim_id: str, fencing_token: int) -> None:
        """See :meth:`WorkloadClient.confirm_cancel`."""
        self.acting.confirm_cancel(workload_id, claim_id, fencing_token, self._now())

    # -------------------------------------------------------------- operators and approvers

    def retry(self, workload_id: str, reason: str | None = None) -> Workload:
        """See :meth:`WorkloadClient.retry`."""
        return self.acting.retry(workload_id, reason, self._now())

    def decide(
        self,
        workload_id: str,
        outcome: ApprovalOutcome | str,
        reason: str | None,
        input_hash: str,
    ) -> tuple[ApprovalDecision, bool]:
        """See :meth:`WorkloadClient.decide`; the decision names this client's grant."""
        return self.acting.decide(workload_id, outcome, reason, input_hash, self._now())
