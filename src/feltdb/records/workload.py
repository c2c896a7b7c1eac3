"""The workload and the records it holds, with the reference's field names and defaults.

Plain, frozen structs (:class:`~feltdb.records.base.Record`): the authority makes them
from input it has checked and never edits one; a decision answers a new record beside the
one it was given (``msgspec.structs.replace``), which shares every part it did not change. Each
serializes exactly as the reference names it (``WorkloadEvent``'s ``from_state`` is
``"from"``); a field the reference leaves out when empty (an approval, a decision's
reason) is declared with its empty default on a record that omits defaults, every other
field without one, so that the stored text names every field it always named.
"""

from __future__ import annotations

from typing import Any, ClassVar, Self

import msgspec

from feltdb.auth.grants import SignedGrant
from feltdb.auth.subjects import Subject, SubjectSet
from feltdb.fields import ConcurrencyLimit, Count, Instant, Priority, StringSet
from feltdb.records.base import Record, frozen_members
from feltdb.work.states import ApprovalOutcome, AttemptStatus, BackoffPolicy, WorkloadState

WORKLOAD_CONTRACT_VERSION = 1
"""The contract version of the original workload record."""

DEADLINE_CONTRACT_VERSION = 2
"""Workloads admitted at this contract version or later have their ``timeouts`` enforced.
Earlier records were admitted when timeouts were stored and ignored; they keep that
behaviour, so an upgrade never times out work whose requester was told nothing would."""

DURABLE_WORK_COLLECTION = "system_durable_work"
"""The storage collection that holds one row per workload."""

DEFAULT_RETRY_ON = frozenset({"timeout", "worker_failure", "transient_connection"})


class WorkloadRetryPolicy(Record, frozen=True, kw_only=True):  # type: ignore[misc]
    """How often, how soon, and for which failure kinds work is retried automatically."""

    max_attempts: Count = 3
    initial_delay_ms: Count = 1000
    max_delay_ms: Count = 300_000
    backoff: BackoffPolicy = BackoffPolicy.EXPONENTIAL
    retry_on: StringSet = DEFAULT_RETRY_ON

    def __post_init__(self) -> None:
        frozen_members(self, "retry_on")


class WorkloadTimeouts(Record, frozen=True, kw_only=True):  # type: ignore[misc]
    """Deadlines, in milliseconds; ``None`` means no deadline. See ``deadline_breach``."""

    queue_ms: Count | None = None
    claim_ms: Count | None = None
    execution_ms: Count | None = None
    heartbeat_ms: Count | None = None
    overall_ms: Count | None = None
    approval_ms: Count | None = None
    """How long work may wait in ``AWAITING_APPROVAL``."""

    FIELDS: ClassVar[tuple[str, ...]] = (
        "queue_ms",
        "claim_ms",
        "execution_ms",
        "heartbeat_ms",
        "overall_ms",
        "approval_ms",
    )


class ApprovalPolicy(Record, frozen=True, kw_only=True):  # type: ignore[misc]
    """Who may decide a workload that requires approval.

    Presence on admission is the requirement. A decision always needs the authenticated
    decider to hold a signed ``workload:approve`` grant; this policy narrows who that may be.
    The default: people approve (``human`` only).
    """

    approver_kinds: StringSet = frozenset({"human"})
    """Subject kinds that may decide: ``human`` and/or ``service``."""
    approvers: SubjectSet = frozenset()
    """When non-empty, only these subjects may decide."""

    def __post_init__(self) -> None:
        frozen_members(self, "approver_kinds", "approvers")


class ApprovalDecision(Record, frozen=True, kw_only=True, omit_defaults=True):  # type: ignore[misc]
    """A committed approval decision. It is never replaced."""

    outcome: ApprovalOutcome
    decided_by: Subject
    decided_at: Instant
    reason: str | None = None
    grant_id: str
    """The grant that authorized the decision."""
    input_hash: str
    """The input the decider reviewed: the decision binds to it."""


class WorkloadApproval(Record, frozen=True, kw_only=True, omit_defaults=True):  # type: ignore[misc]
    """The approval a workload requires and, once committed, its decision."""

    policy: ApprovalPolicy
    decision: ApprovalDecision | None = None

    def approved(self) -> bool:
        """Whether an approving decision has been committed."""
        return self.decision is not None and self.decision.outcome is ApprovalOutcome.APPROVED


class WorkloadDependency(Record, frozen=True, kw_only=True):  # type: ignore[misc]
    """Work that must reach ``required_state`` before this workload is scheduled."""

    workload_id: str
    required_state: WorkloadState = WorkloadState.SUCCEEDED


class WorkloadClaim(Record, frozen=True, kw_only=True):  # type: ignore[misc]
    """A worker's lease on a workload, fenced by a token that grows with every claim."""

    claim_id: str
    workload_id: str
    worker_id: str
    lease_id: str
    fencing_token: Count
    capability_snapshot: StringSet
    claimed_at: Instant
    expires_at: Instant
    last_heartbeat: Instant


class WorkloadAttempt(Record, frozen=True, kw_only=True):  # type: ignore[misc]
    """One claim of a workload and what became of it."""

    attempt_id: str
    workload_id: str
    worker_id: str
    claim_id: str
    fencing_token: Count
    started_at: Instant | None = None
    ended_at: Instant | None = None
    input_hash: str
    result_hash: str | None = None
    error: str | None = None
    resource_usage: dict[str, Count] = msgspec.field(default_factory=dict)
    status: AttemptStatus


class WorkloadCheckpoint(Record, frozen=True, kw_only=True):  # type: ignore[misc]
    """Committed progress of an attempt, readable by every later attempt."""

    checkpoint_id: str
    workload_id: str
    attempt_id: str
    sequence: Count
    state: Any
    state_hash: str
    created_at: Instant
    produced_by: str


class WorkloadResult(Record, frozen=True, kw_only=True):  # type: ignore[misc]
    """The output of the attempt that completed the workload."""

    result_id: str
    workload_id: str
    attempt_id: str
    status: str
    output: Any
    output_hash: str
    artifacts: list[str] = msgspec.field(default_factory=list)
    provenance: dict[str, str] = msgspec.field(default_factory=dict)
    produced_by: str
    created_at: Instant
    schema_version: Count


class WorkloadExecutionContext(Record, frozen=True, kw_only=True):  # type: ignore[misc]
    """What the claiming worker needs to execute: input, scopes and every checkpoint."""

    workload_id: str
    attempt_id: str
    worker_id: str
    capabilities: StringSet
    connection_scopes: StringSet
    secret_references: list[str]
    expires_at: Instant
    fencing_token: Count
    input: Any = None
    checkpoints: list[WorkloadCheckpoint] = msgspec.field(default_factory=list)
    """Every committed checkpoint, from this and earlier attempts, in order."""
    dependency_outputs: dict[str, Any] = msgspec.field(default_factory=dict)
    """The output of each dependency that succeeded, by workload id: what the work it
    depends on produced (``feltdb.work.dependency_outputs``: at most 4 MiB of JSON)."""
    dependency_outputs_omitted: list[str] = msgspec.field(default_factory=list)
    """Succeeded dependencies whose output did not fit in :attr:`dependency_outputs`."""


class WorkloadEvent(Record, frozen=True, kw_only=True):  # type: ignore[misc]
    """One committed transition in a workload's history, with who did it and why."""

    sequence: Count
    event_type: str
    from_state: WorkloadState | None = msgspec.field(default=None, name="from")
    to: WorkloadState
    actor: str
    at: Instant
    evidence: dict[str, str] = msgspec.field(default_factory=dict)


# Unknown fields are ignored: a stored document carries the storage's "__version" (the
# row's, not the record's).
class Workload(  # type: ignore[misc]
    Record, frozen=True, kw_only=True, omit_defaults=True, forbid_unknown_fields=False
):
    """A unit of work, its whole history, and where it stands."""

    contract_version: Count
    workload_id: str
    tenant_id: str
    application_id: str
    environment: str
    definition_id: str
    definition_revision: str
    trigger: str
    input: Any
    input_hash: str
    requested_by: Subject
    session_id: str | None
    authorization_snapshot: SignedGrant
    capability_snapshot: StringSet
    connection_scopes: StringSet
    priority: Priority
    idempotency_key: str
    created_at: Instant
    updated_at: Instant
    state: WorkloadState
    execution_history: list[WorkloadEvent]
    attempts: list[WorkloadAttempt]
    checkpoints: list[WorkloadCheckpoint]
    result: WorkloadResult | None
    retry_policy: WorkloadRetryPolicy
    timeouts: WorkloadTimeouts
    attempt_count: Count
    retry_count: Count
    next_attempt_at: Instant | None
    """Not claimable before this instant (unix seconds); ``None``: as soon as ``READY``.
    Creation's ``not_before``, retry backoff and a timeout's re-arm all set this one field,
    so early work is always early for the same reason and refused by the same check."""
    last_failure: str | None
    current_claim: WorkloadClaim | None
    fencing_token: Count
    dependencies: list[WorkloadDependency]
    approval: WorkloadApproval | None = None
    """Left out of the document when ``None``, as are the two below."""
    concurrency_key: str | None = None
    """Work of one key (of its tenant's application) that holds a live claim at once is at
    most :attr:`concurrency_limit` (:mod:`feltdb.work.concurrency`); ``None``: no limit."""
    concurrency_limit: ConcurrencyLimit | None = None
    rate_limit: str | None = None
    """The name of the rate limit its starts count against (:mod:`feltdb.work.rate_limits`);
    ``None``: none."""
    rate_key: str | None = None
    """The key within :attr:`rate_limit` (each key has its own window); ``None``: the one
    window of the limit."""
    fairness_key: str | None = None
    """Work of one key takes its turn with other keys' work at each claim that finds
    several (:mod:`feltdb.work.fairness`); ``None``: the turn of work naming no key."""
    trace_context: dict[str, str] | None = None
    """The submitter's W3C trace context (``traceparent``, ``tracestate``; bounded by
    :func:`~feltdb.fields.trace_context_problem`): a worker's spans continue its trace
    (:mod:`feltdb.tracing`); ``None``: none was current. Not part of what a replay compares."""

    def is_eligible_at(self, now: int) -> bool:
        """Whether the eligibility instant has arrived (the temporal half of claimability;
        the state must also be ``READY``).
        """
        return self.next_attempt_at is None or self.next_attempt_at <= now

    OLDER_DEFAULTS: ClassVar[dict[str, Any]] = {"session_id": None, "dependencies": []}
    """Fields an older store's documents may lack, and what they meant there."""

    @classmethod
    def completed(cls, document: dict[str, Any]) -> dict[str, Any]:
        """``document`` with each of :attr:`OLDER_DEFAULTS` it lacks (an older store's
        document, a legacy file's record), as its absence meant.
        """
        if cls.OLDER_DEFAULTS.keys() <= document.keys():
            return document
        return {**cls.OLDER_DEFAULTS, **document}

    @classmethod
    def parse(cls, data: Any) -> Self:
        """Validate ``data`` into a workload, as :meth:`Record.parse` does, reading a
        document that lacks a field added since as its absence meant.
        """
        return super().parse(cls.completed(data) if isinstance(data, dict) else data)
