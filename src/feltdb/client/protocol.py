"""The one client protocol: :class:`WorkloadClient`, the authority as its callers see it.

:class:`~feltdb.client.Client` answers it over HTTP (the caller: its token's grant; the
:class:`~feltdb.client.AsyncClient` too, awaited), :class:`~feltdb.client.LocalClient` in
process (the caller: a subject in a :class:`~feltdb.auth.scope.Scope`). The worker
runtime, the ``feltdb`` command and :mod:`feltdb.testing` are written once against it.

No method takes a requester, worker, decider or tenant: they are the client's identity.
Work outside the caller's scope (another tenant's or application's, or outside its
environments and definitions) is answered ``WORKLOAD_NOT_FOUND``, as missing work is.
Every method may raise :class:`~feltdb.errors.WorkloadError` with the authority's code.
"""

from __future__ import annotations

import builtins
import inspect
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from feltdb.client.batches import CompletionLike, HeartbeatLike
from feltdb.client.limits import LimitsClient
from feltdb.client.retention import RetentionClient
from feltdb.client.schedules import ScheduleClient
from feltdb.client.workflow_calls import WorkflowCalls
from feltdb.errors import WorkloadError
from feltdb.records.summary import WorkloadSummary
from feltdb.records.workers import WorkersSeen
from feltdb.records.workload import (
    ApprovalDecision,
    ApprovalPolicy,
    Workload,
    WorkloadCheckpoint,
    WorkloadClaim,
    WorkloadDependency,
    WorkloadExecutionContext,
    WorkloadResult,
    WorkloadRetryPolicy,
    WorkloadTimeouts,
)
from feltdb.storage.audit_chain import ChainReport
from feltdb.work.claimed import ClaimedWork, LeaseRenewal
from feltdb.work.inputs import DEFAULT_LEASE_MS
from feltdb.work.models import Request
from feltdb.work.states import ApprovalOutcome, WorkloadState
from feltdb.work.submission import Submission

if TYPE_CHECKING:
    from feltdb.auth import Subject
    from feltdb.storage.base import CommittedTransaction

Jsonable = Mapping[str, Any] | WorkloadRetryPolicy | WorkloadTimeouts | ApprovalPolicy
"""A policy given as its record or as its JSON fields."""

SubmissionLike = Request | Mapping[str, Any]
"""A :data:`~feltdb.work.submission.Submission`, or its fields as a mapping."""

MAX_PAGE = 500
"""The most items one list page may hold."""
MAX_WAIT_MS = 30_000
"""The longest one ``claim_next`` may wait for work (long-poll)."""


@dataclass(frozen=True)
class Page:
    """One page of a list: its workloads, summarized (read one with ``get`` for its input,
    checkpoints, result and history), and the cursor of the next page (``None``: this was
    the last). A page of large workloads may hold fewer items than asked for (a page reads
    at most 4 MiB of stored records past its first) while ``next_cursor`` is set: follow
    it until it is ``None``.
    """

    items: list[WorkloadSummary]
    next_cursor: str | None


@dataclass(frozen=True)
class AuditPage:
    """Committed transactions of the caller's application, oldest first, and the revision
    to continue after (equal to the one asked for when nothing is left for now).
    """

    items: list[CommittedTransaction]
    next_after: int


OPTIONAL_FIELDS = (
    *("environment", "definition_revision", "trigger", "capability_snapshot"),
    *("idempotency_key", "session_id", "retry_policy", "timeouts", "not_before", "approval"),
    *("concurrency_key", "concurrency_limit", "rate_limit", "rate_key", "fairness_key"),
    "trace_context",
)
"""The submission fields whose ``None`` means "not given": the submission's default
(:data:`~feltdb.work.submission.SUBMISSION_DEFAULTS`, a new random idempotency key) or
``CreateWorkload``'s."""


def given_fields(fields: Mapping[str, Any]) -> dict[str, Any]:
    """``fields`` without the optional ones left ``None`` (so their defaults stand)."""
    return {
        name: value
        for name, value in fields.items()
        if value is not None or name not in OPTIONAL_FIELDS
    }


def admission_fields(**given: Any) -> dict[str, Any]:
    """:meth:`WorkloadClient.admit`'s keywords as the submission's fields, bound as a call
    of it binds them (its defaults filled in; a ``TypeError`` for a keyword it lacks).
    """
    bound = _ADMIT.bind(None, **given)
    bound.apply_defaults()
    fields = {name: value for name, value in bound.arguments.items() if name != "self"}
    for name in ("capability_snapshot", "connection_scopes", "dependencies"):
        if fields[name] is not None:
            fields[name] = list(fields[name])
    return given_fields(fields)


def as_submission(value: SubmissionLike) -> Request:
    """``value`` as a :data:`~feltdb.work.submission.Submission` (a mapping is parsed).

    Raises:
        WorkloadError: ``WORKLOAD_INVALID`` naming each bad field.
    """
    if isinstance(value, Submission):
        return value
    if isinstance(value, Request):
        value = value.model_dump(exclude_unset=True)
    submission: Request = Submission.parse(dict(value))
    return submission


class WorkloadClient(LimitsClient, RetentionClient, ScheduleClient, WorkflowCalls, Protocol):
    """The authority's operations, as one caller (a requester, a worker, an operator, an
    approver) makes them; its implementations take :meth:`admit`, :meth:`create` and the
    context manager from here.
    """

    @property
    def subject(self) -> Subject:
        """Who this client acts as (its ``KIND:ID`` is its worker name and its actor)."""
        ...

    # -------------------------------------------------------------- requesters

    def submit(self, submission: SubmissionLike) -> tuple[Workload, bool]:
        """Admit ``submission``, or answer the workload this subject already admitted under
        its ``idempotency_key``; ``True`` when this call created it. The tenant, the
        application, the requester, the grant and ``created_at`` are the client's.
        """
        ...

    def admit(
        self,
        *,
        definition_id: str,
        input: Any,
        idempotency_key: str | None = None,
        environment: str | None = None,
        definition_revision: str | None = None,
        trigger: str | None = None,
        capability_snapshot: Iterable[str] | None = None,
        session_id: str | None = None,
        connection_scopes: Iterable[str] = (),
        priority: int = 0,
        retry_policy: Jsonable | None = None,
        timeouts: Jsonable | None = None,
        dependencies: Iterable[WorkloadDependency | Mapping[str, Any]] = (),
        not_before: int | None = None,
        approval: Jsonable | None = None,
    ) -> tuple[Workload, bool]:
        """:meth:`submit`, the submission's fields given as keywords: those left ``None``
        take the submission's defaults (environment ``production``, definition revision
        ``1``, trigger ``api``, no capabilities, a new random idempotency key: give one,
        so that a retried call answers the workload the first one admitted) or
        :class:`~feltdb.work.models.CreateWorkload`'s.

        Raises:
            WorkloadError: ``WORKLOAD_INVALID`` before anything is sent, for fields the
                submission model refuses.
        """
        given = {name: value for name, value in locals().items() if name != "self"}
        return self.submit(admission_fields(**given))

    def create(self, **fields: Any) -> Workload:
        """:meth:`admit` (same keyword fields), answering only the workload."""
        return self.admit(**fields)[0]

    def get(self, workload_id: str) -> Workload:
        """The committed workload (``WORKLOAD_NOT_FOUND`` for missing or foreign work)."""
        ...

    def cancel(self, workload_id: str) -> WorkloadState:
        """Cancel ready work, or request cancellation of running work; the new state."""
        ...

    def list(
        self,
        *,
        state: WorkloadState | str | None = None,
        definition: str | None = None,
        limit: int = 50,
        cursor: str | None = None,
    ) -> Page:
        """A page of the application's workloads, priority descending then oldest first;
        ``cursor`` is the previous page's ``next_cursor``; ``limit`` at most
        :data:`MAX_PAGE`.
        """
        ...

    def approvals(self, *, limit: int = 50, cursor: str | None = None) -> Page:
        """A page of the work awaiting an approval decision."""
        ...

    def dead_letters(self, *, limit: int = 50, cursor: str | None = None) -> Page:
        """A page of the dead-lettered work."""
        ...

    def workers(self) -> WorkersSeen:
        """The workers the application's work names (needs ``workload:read``), read from
        the store's records: the leases each holds, its completions and failures per minute
        over the last 10 minutes, and whether it is stale. See
        :func:`feltdb.work.workers.workers_seen`.
        """
        ...

    def audit(self, *, after: int = 0, limit: int = 100) -> AuditPage:
        """Committed transactions of the application after revision ``after`` (refused to
        a caller narrowed to some environments or definitions: the log is the whole
        application's).
        """
        ...

    def verify_audit(self, *, anchor: str | None = None) -> ChainReport:
        """Seal and verify the audit chain (needs ``audit:read``, as :meth:`audit`): the
        report names the first transaction altered, removed or reordered, told only by its
        kind and revision when it is another application's. ``anchor``: ``REVISION:LINK``,
        an earlier report's ``head_revision`` and ``head_link``, which the chain must
        still hold. See :func:`feltdb.work.audit.AuditTrail.verify`.
        """
        ...

    def revocations(self) -> builtins.list[dict[str, Any]]:
        """The grants revoked in the tenant and application, oldest first (``grant_id``,
        ``revoked_by``, ``revoked_at``).
        """
        ...

    def revoke_grant(self, grant_id: str, *, force: bool = False) -> bool:
        """Revoke a grant of the tenant and application; ``False`` when it already was. An
        id feltdb never minted (a typo) is refused ``WORKLOAD_NOT_FOUND`` unless ``force``.
        """
        ...

    # -------------------------------------------------------------- workers

    def claim_next(
        self,
        *,
        lease_ms: int = DEFAULT_LEASE_MS,
        wait_ms: int = 0,
        capabilities: Iterable[str] | None = None,
        definitions: Iterable[str] | None = None,
    ) -> WorkloadClaim | None:
        """Claim the next eligible workload of the application that this client's
        capabilities can run; ``None`` when there is none.

        With ``wait_ms`` (at most :data:`MAX_WAIT_MS`) it waits for work: it answers as
        soon as some becomes claimable, or ``None`` once ``wait_ms`` has passed.
        ``capabilities`` narrows the client's own; ``definitions`` (``None``: any) claims
        only work of those definition ids, the ones a worker serves.
        """
        ...

    def claim(self, workload_id: str, *, lease_ms: int = DEFAULT_LEASE_MS) -> WorkloadClaim:
        """Claim a given ready workload under a fresh fencing token."""
        ...

    def start(self, workload_id: str, claim_id: str, fencing_token: int) -> None:
        """Start the claimed attempt."""
        ...

    def heartbeat(
        self, workload_id: str, claim_id: str, fencing_token: int, *,
        extend_ms: int = DEFAULT_LEASE_MS,
    ) -> WorkloadClaim:  # fmt: skip
        """Extend the lease by ``extend_ms`` from now; the extended claim."""
        ...

    def execution_context(
        self, workload_id: str, claim_id: str, fencing_token: int,
        secret_references: Iterable[str] = (),
    ) -> WorkloadExecutionContext:  # fmt: skip
        """What the claiming worker needs: input, scopes and every committed checkpoint."""
        ...

    def checkpoint(
        self, workload_id: str, claim_id: str, fencing_token: int, state: Any
    ) -> WorkloadCheckpoint:
        """Commit progress of the attempt."""
        ...

    def complete(
        self, workload_id: str, claim_id: str, fencing_token: int, result_id: str, output: Any,
        artifacts: Iterable[str] = (), schema_version: int = 1,
    ) -> WorkloadResult:  # fmt: skip
        """Record the result; the same report repeated answers the recorded result."""
        ...

    def fail(
        self, workload_id: str, claim_id: str, fencing_token: int, kind: str, error: str,
        *, effect: str | None = None,
    ) -> WorkloadState:  # fmt: skip
        """Report the attempt failed; the state it led to (``READY`` for a retry,
        ``DEAD_LETTER``, …). ``effect``: ``"none"`` or ``"unknown"``.
        """
        ...

    def confirm_cancel(self, workload_id: str, claim_id: str, fencing_token: int) -> None:
        """Confirm a requested cancellation of the claimed work."""
        ...

    # -------------------------------------------------------------- batches
    # One transaction each; answers per item, in order, each what the single call answers
    # (its value, or the refusal it raises); at most 1,024 items (WORKLOAD_INVALID beyond).

    def admit_many(
        self, submissions: Sequence[SubmissionLike]
    ) -> builtins.list[tuple[Workload, bool] | WorkloadError]:
        """:meth:`submit` for each submission: the workload and whether this call created
        it, or the item's refusal.
        """
        ...

    def claim_many(
        self,
        limit: int,
        *,
        lease_ms: int = DEFAULT_LEASE_MS,
        capabilities: Iterable[str] | None = None,
        definitions: Iterable[str] | None = None,
        start: bool = False,
    ) -> builtins.list[WorkloadClaim]:
        """Up to ``limit`` (1 to 1,024) claims, chosen as :meth:`claim_next` chooses (no
        waiting: fewer, or none, when fewer are claimable); with ``start``, each attempt is
        also started.
        """
        claimed = self.claim_work(
            limit, lease_ms=lease_ms, capabilities=capabilities, definitions=definitions,
            start=start,
        )  # fmt: skip
        return [work.claim for work in claimed]

    def claim_work(
        self,
        limit: int,
        *,
        lease_ms: int = DEFAULT_LEASE_MS,
        wait_ms: int = 0,
        capabilities: Iterable[str] | None = None,
        definitions: Iterable[str] | None = None,
        start: bool = True,
    ) -> builtins.list[ClaimedWork]:
        """:meth:`claim_many`, started unless ``start=False``, each claim with the workload
        as its commit left it (what a worker runs it with, so it needs no read); with
        ``wait_ms`` (at most :data:`MAX_WAIT_MS`) it waits for work as :meth:`claim_next`
        does, and answers ``[]`` when none came.
        """
        ...

    def complete_many(
        self, items: Sequence[CompletionLike]
    ) -> builtins.list[WorkloadResult | WorkloadError]:
        """:meth:`complete` for each item: the result recorded, or the item's refusal."""
        ...

    def heartbeat_many(
        self, items: Sequence[HeartbeatLike]
    ) -> builtins.list[WorkloadClaim | WorkloadError]:
        """:meth:`heartbeat` for each item: the extended claim, or the item's refusal."""
        renewed = self.renew_leases(items)
        return [r if isinstance(r, WorkloadError) else r.claim for r in renewed]

    def renew_leases(
        self, items: Sequence[HeartbeatLike]
    ) -> builtins.list[LeaseRenewal | WorkloadError]:
        """:meth:`heartbeat_many`, each extended claim with whether cancellation of its
        work was requested (what a worker's heartbeat needs, so it needs no read).
        """
        ...

    # -------------------------------------------------------------- operators and approvers

    def retry(self, workload_id: str, reason: str | None = None) -> Workload:
        """Re-arm failed or dead-lettered work; the workload as re-armed."""
        ...

    def decide(
        self, workload_id: str, outcome: ApprovalOutcome | str, reason: str | None,
        input_hash: str,
    ) -> tuple[ApprovalDecision, bool]:  # fmt: skip
        """Approve or reject, bound to the input the decider reviewed; the decision and
        whether it replays one already committed. The decider is this client's subject.
        """
        ...

    def close(self) -> None:
        """Release what the client opened (never a store it was handed)."""
        ...

    def __enter__(self) -> WorkloadClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


_ADMIT = inspect.signature(WorkloadClient.admit)  # admission_fields': made once (tens of µs)
