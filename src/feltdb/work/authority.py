"""The authority as one caller may use it: :class:`Authority`.

Every entry point serves a caller: the API's routes a verified token, the dashboard's
forms a signed-in session, the local client the subject it was made for. Each builds one
``Authority`` for its caller and calls it; what the caller may do (the capability rule of
each operation, from :mod:`feltdb.auth.policy`), whose work it sees (its
:class:`~feltdb.auth.scope.Scope`, given to every read and write) and who is recorded as
acting (its subject, or the worker name of it) are composed here once, so no entry point
writes a rule of its own and none can forget one.

A caller with a verified grant (``Authority.of_grant``) is checked against it on every
call. The holder of the store (``Authority.holding``, the local client) holds everything:
no capability is checked, and the scope is its one boundary (its grant, if it has one, is
only the evidence a submission or a decision keeps).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from feltdb.auth import Grant, Subject
from feltdb.auth.policy import (
    APPROVE,
    CANCEL,
    CLAIM,
    OPERATE,
    READ,
    SUBMIT,
    authorize,
    authorize_application,
    authorize_audit,
    authorize_read,
    authorize_revoke,
    authorize_worker,
    authorize_workload,
    worker_name,
)
from feltdb.auth.scope import Scope
from feltdb.errors import ErrorCode, WorkloadError
from feltdb.records.workers import WorkersSeen
from feltdb.records.workload import (
    ApprovalDecision,
    Workload,
    WorkloadCheckpoint,
    WorkloadClaim,
    WorkloadExecutionContext,
    WorkloadResult,
)
from feltdb.storage.base import CommittedTransaction
from feltdb.work.inputs import DEFAULT_LEASE_MS, Cursor
from feltdb.work.listing import SummaryPage
from feltdb.work.revocations import refuse_unminted
from feltdb.work.states import ApprovalOutcome, WorkloadState
from feltdb.work.workers import workers_seen

if TYPE_CHECKING:  # the facade opens backends; what acts through it needs only its methods
    from feltdb.work.store import WorkloadStore

WHOLE_APPLICATION = "unconstrained grant"
"""What a refusal names as missing when a narrowed scope asks for the whole application."""


@dataclass(frozen=True, slots=True)
class Authority:
    """``subject`` acting on ``store`` within ``scope`` under ``grant`` (``None``: none to
    keep as evidence); every capability rule checked against the grant when ``checked``.
    """

    store: WorkloadStore
    subject: Subject
    scope: Scope
    grant: Grant | None = None
    checked: bool = True

    def __post_init__(self) -> None:
        if self.checked and self.grant is None:  # it would check nothing
            raise ValueError("a checked authority needs the grant it is checked against")

    @classmethod
    def of_grant(cls, store: WorkloadStore, grant: Grant, scope: Scope | None = None) -> Authority:
        """The authority of a verified ``grant``'s subject, in ``scope`` (or the grant's)."""
        return cls(store, grant.subject, scope or Scope.of_grant(grant), grant)

    @classmethod
    def holding(
        cls, store: WorkloadStore, subject: Subject, scope: Scope, grant: Grant | None = None
    ) -> Authority:
        """The authority of ``store``'s holder: ``subject`` in ``scope`` (``grant`` unchecked)."""
        return cls(store, subject, scope, grant, checked=False)

    @property
    def held(self) -> frozenset[str]:
        """What a claim by the caller holds, unless it says: its grant's capabilities."""
        return frozenset(self.grant.capabilities) if self.grant is not None else frozenset()

    @property
    def _rules(self) -> Grant | None:
        """The grant every capability rule is checked against (``None``: none is)."""
        return self.grant if self.checked else None

    @property
    def actor(self) -> str:
        """Who an operator's transition records as acting: the subject."""
        return str(self.subject)

    def _may(self, capability: str, workload_id: str) -> None:
        if (rules := self._rules) is not None:
            authorize_workload(rules, capability, workload_id)

    @property
    def worker(self) -> str:
        """The worker name a claim by the caller records: :func:`worker_name` of it."""
        return worker_name(self.subject)

    def worker_on(self, workload_id: str) -> str:
        """:attr:`worker`, once the caller's grant may act as a worker on the work.

        Raises:
            WorkloadError: ``WORKLOAD_UNAUTHORIZED``.
        """
        rules = self._rules
        return worker_name(self.subject) if rules is None else authorize_worker(rules, workload_id)

    def whole_application(self, check: Callable[[Grant], None], what: str) -> None:
        """Refuse a call that reaches the whole application (its audit, its grants) unless
        ``check`` lets the grant make it, and unless the scope is the whole application.

        Raises:
            WorkloadError: ``WORKLOAD_UNAUTHORIZED``.
        """
        rules = self._rules
        if rules is not None:
            check(rules)
        if self.scope.narrowed:
            raise WorkloadError(
                ErrorCode.WORKLOAD_UNAUTHORIZED,
                f"{what}: a grant constrained to environments or definitions may not",
                {"missing": WHOLE_APPLICATION},
            )

    def may_in_application(self, capability: str) -> None:
        """Refuse unless the caller holds ``capability`` on every workload it may see."""
        if (rules := self._rules) is not None:
            authorize_application(rules, capability)

    # ---------------------------------------------------------------- requesters

    def as_requester(self) -> None:
        """Refuse a caller whose grant may not submit work in its application
        (``workload:execute``); the store refuses a submission whose grant does not cover
        the new workload itself.
        """
        rules = self._rules
        if rules is not None:
            authorize(rules, SUBMIT, rules.tenant_id, rules.application_id)

    def read(self, workload_id: str) -> Workload:
        """The committed workload, if the caller may read it. A caller that may read no
        work is refused ``WORKLOAD_UNAUTHORIZED`` whether the work exists or not, never
        told that it is missing.
        """
        rules = self._rules
        try:
            found = self.store.get(workload_id, scope=self.scope)
        except WorkloadError as error:
            if error.code == ErrorCode.WORKLOAD_NOT_FOUND and rules is not None:
                authorize_read(rules, workload_id, None)
            raise
        if rules is not None:
            authorize_read(rules, workload_id, found)
        return found

    def workloads(
        self,
        state: WorkloadState | str | None,
        definition: str | None,
        after: Cursor | None,
        limit: int,
    ) -> SummaryPage:
        """A page of the work the caller sees (``workload:read``): see ``WorkloadStore.page``."""
        return self.workload_pages(state, definition)(after, limit)

    def workload_pages(
        self, state: WorkloadState | str | None, definition: str | None
    ) -> Callable[[Cursor | None, int], SummaryPage]:
        """How to read page after page of :meth:`workloads` (a search reads several),
        the caller checked once (``workload:read``).
        """
        self.may_in_application(READ)
        return lambda after, limit: self._page(state, definition, after, limit)

    def workers(self, now: int) -> WorkersSeen:
        """The workers seen at ``now`` (``workload:read``): :func:`.workers_seen`."""
        self.may_in_application(READ)
        return workers_seen(self.store.db, self.scope, now)

    def approvals(self, after: Cursor | None, limit: int) -> SummaryPage:
        """A page of the work awaiting approval (``workload:approve``)."""
        self.may_in_application(APPROVE)
        return self._page(WorkloadState.AWAITING_APPROVAL, None, after, limit)

    def dead_letters(self, after: Cursor | None, limit: int) -> SummaryPage:
        """A page of the dead-lettered work (``workload:operate``)."""
        self.may_in_application(OPERATE)
        return self._page(WorkloadState.DEAD_LETTER, None, after, limit)

    def _page(
        self,
        state: WorkloadState | str | None,
        definition: str | None,
        after: Cursor | None,
        limit: int,
    ) -> SummaryPage:
        return self.store.page(
            self.scope.tenant_id, self.scope.application_id, state=state,
            definition=definition, after=after, limit=limit, scope=self.scope,
        )  # fmt: skip

    def cancel(self, workload_id: str, now: int | None) -> WorkloadState:
        """Cancel, or request cancellation of, the work (``workload:cancel``)."""
        self._may(CANCEL, workload_id)
        return self.store.cancel(workload_id, self.actor, now, scope=self.scope)

    # ---------------------------------------------------------------- operators and approvers

    def retry(self, workload_id: str, reason: str | None, now: int | None) -> Workload:
        """Re-arm the work (``workload:operate``); the workload as the retry left it."""
        self._may(OPERATE, workload_id)
        self.store.retry(workload_id, self.actor, now, reason, scope=self.scope)
        return self.store.get(workload_id, scope=self.scope)

    def decide(
        self,
        workload_id: str,
        outcome: ApprovalOutcome | str,
        reason: str | None,
        input_hash: str,
        now: int | None,
    ) -> tuple[ApprovalDecision, bool]:
        """Decide the work's approval (``workload:approve``), naming the caller's grant;
        ``True`` when it replays the committed decision.

        Raises:
            WorkloadError: ``WORKLOAD_UNAUTHORIZED`` for a caller with no grant to name;
                the store's refusals of ``decide``.
        """
        self._may(APPROVE, workload_id)
        grant = self.evidence("a decision")
        return self.store.decide(
            workload_id, self.subject, outcome, reason, grant.id, input_hash, now,
            scope=self.scope,
        )  # fmt: skip

    def evidence(self, what: str) -> Grant:
        """The grant ``what`` keeps as the evidence it was made under.

        Raises:
            WorkloadError: ``WORKLOAD_UNAUTHORIZED`` for a caller with no grant.
        """
        if self.grant is None:
            raise WorkloadError(
                ErrorCode.WORKLOAD_UNAUTHORIZED,
                f"{what} keeps the grant it was made under: this caller has none",
                {"missing": "grant"},
            )
        return self.grant

    def revoke(self, grant_id: str, now: int | None, *, force: bool = False) -> bool:
        """Revoke a grant of the caller's application (``grant:revoke``, unconstrained);
        ``True`` when this call revoked it; an id feltdb never minted only with ``force``.
        """
        self.whole_application(authorize_revoke, "revoking reaches every grant of the application")
        if not force:
            refuse_unminted(grant_id)
        return self.store.grants.revoke(
            grant_id, self.actor, now,
            tenant_id=self.scope.tenant_id, application_id=self.scope.application_id,
        )  # fmt: skip

    def revocations(self) -> list[dict[str, Any]]:
        """The grants revoked in the caller's application (``grant:revoke``, unconstrained)."""
        self.whole_application(authorize_revoke, "the revocations are the whole application's")
        return self.store.grants.listed(self.scope.tenant_id, self.scope.application_id)

    def audit_reader(self) -> None:
        """Refuse a caller that may not read the application's audit (``audit:read``,
        unconstrained): the log is the whole application's.
        """
        self.whole_application(authorize_audit, "the audit is the whole application's")

    def audit_after(self, after: int, limit: int) -> tuple[list[CommittedTransaction], int]:
        """The application's log after ``after``, to an audit reader: :meth:`.AuditTrail.after`."""
        self.audit_reader()
        return self.store.audit.after(self.scope.tenant_id, self.scope.application_id, after, limit)

    def audit_before(
        self,
        before: int | None,
        limit: int,
        *,
        work_id: str | None = None,
        subject: str | None = None,
    ) -> tuple[list[CommittedTransaction], int | None]:
        """The log before ``before``, newest first, to audit readers: :meth:`.AuditTrail.before`."""
        self.audit_reader()
        scope = self.scope
        return self.store.audit.before(
            scope.tenant_id, scope.application_id, before, limit, work_id=work_id, subject=subject
        )

    # ---------------------------------------------------------------- workers

    def as_worker(self) -> None:
        """Refuse a caller that may not act as a worker here (``workload:claim``): a batch
        of its reports is refused whole, each item then authorized on its own.
        """
        rules = self._rules
        if rules is not None:
            authorize(rules, CLAIM, rules.tenant_id, rules.application_id)

    def claim(
        self,
        workload_id: str,
        held: Iterable[str],
        now: int | None,
        lease_ms: int = DEFAULT_LEASE_MS,
    ) -> WorkloadClaim:
        """Claim the work by id holding ``held``, but a grant's caller at most :attr:`held`."""
        worker = self.worker_on(workload_id)
        holding = frozenset(held) if self._rules is None else self.held & frozenset(held)
        return self.store.claim(workload_id, worker, holding, now, lease_ms, scope=self.scope)

    def start(self, workload_id: str, claim_id: str, fencing_token: int, now: int | None) -> None:
        """Start the claimed attempt."""
        worker = self.worker_on(workload_id)
        self.store.start(workload_id, claim_id, worker, fencing_token, now, scope=self.scope)

    def heartbeat(
        self,
        workload_id: str,
        claim_id: str,
        fencing_token: int,
        now: int | None,
        extend_ms: int = DEFAULT_LEASE_MS,
    ) -> WorkloadClaim:
        """Extend the claim's lease."""
        worker = self.worker_on(workload_id)
        return self.store.heartbeat(
            workload_id, claim_id, worker, fencing_token, now, extend_ms, scope=self.scope
        )

    def execution_context(
        self,
        workload_id: str,
        claim_id: str,
        fencing_token: int,
        now: int | None,
        secret_references: Iterable[str] = (),
    ) -> WorkloadExecutionContext:
        """The claim's execution context."""
        worker = self.worker_on(workload_id)
        return self.store.execution_context(
            workload_id, claim_id, worker, fencing_token, now, secret_references,
            scope=self.scope,
        )  # fmt: skip

    def checkpoint(
        self, workload_id: str, claim_id: str, fencing_token: int, state: Any, now: int | None
    ) -> WorkloadCheckpoint:
        """Commit the running attempt's progress."""
        worker = self.worker_on(workload_id)
        return self.store.checkpoint(
            workload_id, claim_id, worker, fencing_token, state, now, scope=self.scope
        )

    def complete(
        self,
        workload_id: str,
        claim_id: str,
        fencing_token: int,
        result: tuple[str, Any, Iterable[str], int],
        now: int | None,
    ) -> WorkloadResult:
        """Record the attempt's ``result`` (its id, output, artifacts and schema version)."""
        worker = self.worker_on(workload_id)
        result_id, output, artifacts, schema_version = result
        return self.store.complete(
            workload_id, claim_id, worker, fencing_token, result_id, output, artifacts,
            schema_version, now, scope=self.scope,
        )  # fmt: skip

    def fail(
        self,
        workload_id: str,
        claim_id: str,
        fencing_token: int,
        failure: tuple[str, str, str | None],
        now: int | None,
    ) -> WorkloadState:
        """Report the attempt failed (``failure``: its kind, error and effect)."""
        worker = self.worker_on(workload_id)
        kind, error, effect = failure
        return self.store.fail(
            workload_id, claim_id, worker, fencing_token, kind, error, now, effect,
            scope=self.scope,
        )  # fmt: skip

    def confirm_cancel(
        self, workload_id: str, claim_id: str, fencing_token: int, now: int | None
    ) -> None:
        """Confirm the requested cancellation of the claimed work."""
        worker = self.worker_on(workload_id)
        self.store.confirm_cancel(
            workload_id, claim_id, worker, fencing_token, now, scope=self.scope
        )
