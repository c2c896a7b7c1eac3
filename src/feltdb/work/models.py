"""The records of the workload authority, with the reference's field names and defaults.

Every record serializes to JSON exactly as the reference names it (``WorkloadEvent``'s
``from_state`` is ``"from"``). Constructing a record from bad input raises
:class:`~feltdb.errors.WorkloadError` ``WORKLOAD_INVALID`` naming every bad field.
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from pydantic._internal._model_construction import ModelMetaclass

from feltdb.auth import SignedGrant, Subject
from feltdb.auth.subjects import SubjectSet
from feltdb.errors import ErrorCode, WorkloadError
from feltdb.fields import Count, Instant, Priority, StringSet
from feltdb.storage.canonical import canonical_json
from feltdb.work.states import (
    ApprovalOutcome,
    AttemptStatus,
    BackoffPolicy,
    WorkloadState,
)

WORKLOAD_CONTRACT_VERSION = 1
"""The contract version of the original workload record."""

DEADLINE_CONTRACT_VERSION = 2
"""Workloads admitted at this contract version or later have their ``timeouts`` enforced.
Earlier records were admitted when timeouts were stored and ignored; they keep that
behaviour, so an upgrade never times out work whose requester was told nothing would."""

DURABLE_WORK_COLLECTION = "system_durable_work"
"""The storage collection that holds one row per workload."""


def invalid_input(record: str, error: ValidationError) -> WorkloadError:
    """Translate a validation failure into ``WORKLOAD_INVALID`` naming each bad field."""
    fields: list[str] = []
    problems: list[str] = []
    for item in error.errors(include_url=False):
        path = ".".join(str(part) for part in item["loc"]) or record
        if path not in fields:
            fields.append(path)
        problems.append(f"{path}: {item['msg']}")
    return WorkloadError(
        ErrorCode.WORKLOAD_INVALID,
        f"invalid {record}: " + "; ".join(problems),
        {"fields": fields},
    )


class _RecordMeta(ModelMetaclass):
    # Wrapping construction here rather than in __init__: pydantic routes model_validate
    # (and every nested record) through a custom __init__, which would lose field paths.
    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        try:
            return super().__call__(*args, **kwargs)
        except ValidationError as error:
            raise invalid_input(cls.__name__, error) from error


class Record(BaseModel, metaclass=_RecordMeta):
    """Base of every workload record: strict about unknown fields, JSON by reference names."""

    model_config = ConfigDict(
        extra="forbid",
        serialize_by_alias=True,
        validate_by_name=True,
        validate_by_alias=True,
    )

    @classmethod
    def parse(cls, data: Any) -> Any:
        """Validate ``data`` (a dict or a JSON string) into this record.

        Raises:
            WorkloadError: ``WORKLOAD_INVALID`` naming each bad field.
        """
        try:
            if isinstance(data, str | bytes):
                return cls.model_validate_json(data)
            return cls.model_validate(data)
        except ValidationError as error:
            raise invalid_input(cls.__name__, error) from error

    def to_json(self) -> dict[str, Any]:
        """This record as a JSON-ready dict with the reference's field names."""
        return self.model_dump(mode="json")


class MutableRecord(Record):
    """A record the authority edits in place. Validated where it enters (constructed,
    parsed); an assignment is the authority's own, made by its transition functions, and
    not validated again (it cost a validation per assigned field on every commit).
    """


class FrozenRecord(Record):
    """A record the reference never mutates."""

    model_config = ConfigDict(frozen=True)


DEFAULT_RETRY_ON = frozenset({"timeout", "worker_failure", "transient_connection"})


class WorkloadRetryPolicy(MutableRecord):
    """How often, how soon, and for which failure kinds work is retried automatically."""

    max_attempts: Count = 3
    initial_delay_ms: Count = 1000
    max_delay_ms: Count = 300_000
    backoff: BackoffPolicy = BackoffPolicy.EXPONENTIAL
    retry_on: StringSet = Field(default_factory=lambda: DEFAULT_RETRY_ON)


class WorkloadTimeouts(MutableRecord):
    """Deadlines, in milliseconds; ``None`` means no deadline. See ``deadline_breach``."""

    queue_ms: Count | None = None
    claim_ms: Count | None = None
    execution_ms: Count | None = None
    heartbeat_ms: Count | None = None
    overall_ms: Count | None = None
    approval_ms: Count | None = Field(default=None, exclude_if=lambda value: value is None)
    """How long work may wait in ``AWAITING_APPROVAL``."""

    FIELDS: ClassVar[tuple[str, ...]] = (
        "queue_ms",
        "claim_ms",
        "execution_ms",
        "heartbeat_ms",
        "overall_ms",
        "approval_ms",
    )


class ApprovalPolicy(MutableRecord):
    """Who may decide a workload that requires approval.

    Presence on admission is the requirement. A decision always needs the authenticated
    decider to hold a signed ``workload:approve`` grant; this policy narrows who that may be.
    The default: people approve (``human`` only).
    """

    approver_kinds: StringSet = Field(default_factory=lambda: frozenset({"human"}))
    """Subject kinds that may decide: ``human`` and/or ``service``."""
    approvers: SubjectSet = Field(default_factory=frozenset)
    """When non-empty, only these subjects may decide."""


class ApprovalDecision(FrozenRecord):
    """A committed approval decision. It is never replaced."""

    outcome: ApprovalOutcome
    decided_by: Subject
    decided_at: Instant
    reason: str | None = Field(default=None, exclude_if=lambda value: value is None)
    grant_id: str
    """The grant that authorized the decision."""
    input_hash: str
    """The input the decider reviewed: the decision binds to it."""


class WorkloadApproval(MutableRecord):
    """The approval a workload requires and, once committed, its decision."""

    policy: ApprovalPolicy
    decision: ApprovalDecision | None = Field(default=None, exclude_if=lambda value: value is None)

    def approved(self) -> bool:
        """Whether an approving decision has been committed."""
        return self.decision is not None and self.decision.outcome is ApprovalOutcome.APPROVED


class WorkloadDependency(FrozenRecord):
    """Work that must reach ``required_state`` before this workload is scheduled."""

    workload_id: str
    required_state: WorkloadState = WorkloadState.SUCCEEDED


class WorkloadClaim(MutableRecord):
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


class WorkloadAttempt(MutableRecord):
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
    resource_usage: dict[str, Count] = Field(default_factory=dict)
    status: AttemptStatus


class WorkloadCheckpoint(FrozenRecord):
    """Committed progress of an attempt, readable by every later attempt."""

    checkpoint_id: str
    workload_id: str
    attempt_id: str
    sequence: Count
    state: Any
    state_hash: str
    created_at: Instant
    produced_by: str


class WorkloadResult(FrozenRecord):
    """The output of the attempt that completed the workload."""

    result_id: str
    workload_id: str
    attempt_id: str
    status: str
    output: Any
    output_hash: str
    artifacts: list[str] = Field(default_factory=list)
    provenance: dict[str, str] = Field(default_factory=dict)
    produced_by: str
    created_at: Instant
    schema_version: Count


class WorkloadExecutionContext(FrozenRecord):
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
    checkpoints: list[WorkloadCheckpoint] = Field(default_factory=list)
    """Every committed checkpoint, from this and earlier attempts, in order."""


class WorkloadEvent(FrozenRecord):
    """One committed transition in a workload's history, with who did it and why."""

    sequence: Count
    event_type: str
    from_state: WorkloadState | None = Field(default=None, alias="from")
    to: WorkloadState
    actor: str
    at: Instant
    evidence: dict[str, str] = Field(default_factory=dict)


class Workload(MutableRecord):
    """A unit of work, its whole history, and where it stands."""

    # Stored documents carry the storage's "__version"; it is the row's, not the record's.
    model_config = ConfigDict(extra="ignore")

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
    session_id: str | None = None
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
    dependencies: list[WorkloadDependency] = Field(default_factory=list)
    approval: WorkloadApproval | None = Field(default=None, exclude_if=lambda value: value is None)

    def is_eligible_at(self, now: int) -> bool:
        """Whether the eligibility instant has arrived (the temporal half of claimability;
        the state must also be ``READY``).
        """
        return self.next_attempt_at is None or self.next_attempt_at <= now


def _require_json(value: Any) -> Any:
    try:
        canonical_json(value)
    except ValueError as error:
        raise ValueError(
            f"must be JSON (objects, arrays, strings, numbers, booleans, null): {error}"
        ) from None
    return value


class CreateWorkload(MutableRecord):
    """A request to admit a workload. Construct it with keywords."""

    tenant_id: str
    application_id: str
    environment: str
    definition_id: str
    definition_revision: str
    trigger: str
    input: Any
    requested_by: Subject
    session_id: str | None = None
    authorization_snapshot: SignedGrant
    capability_snapshot: StringSet
    connection_scopes: StringSet = Field(default_factory=frozenset)
    priority: Priority = 0
    idempotency_key: str
    retry_policy: WorkloadRetryPolicy = Field(default_factory=WorkloadRetryPolicy)
    timeouts: WorkloadTimeouts = Field(default_factory=WorkloadTimeouts)
    dependencies: list[WorkloadDependency] = Field(default_factory=list)
    not_before: Instant | None = None
    """Not claimable before this instant. Not a schedule: nothing re-arms it. A past
    instant is not an error; it means "eligible now"."""
    created_at: Instant
    approval: ApprovalPolicy | None = Field(default=None, exclude_if=lambda value: value is None)
    """Require an approval decision before the work may be claimed."""

    _validate_input = field_validator("input")(classmethod(lambda cls, value: _require_json(value)))
