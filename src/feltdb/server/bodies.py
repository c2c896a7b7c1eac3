"""The bodies of the ``/v1`` routes: what requests carry and what answers hold.

Request bodies are strict (``"5"`` is not a fencing token, ``true`` is not a lease) and
refuse unknown fields; their types (:mod:`feltdb.server.fields`) repeat the store's bounds
so the OpenAPI schema says what the authority accepts. A submission's body is
:data:`~feltdb.work.submission.Submission` (see :mod:`feltdb.server.openapi`). Answers
that are not a workload record are declared here for the schema.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from feltdb.fields import MAX_LIST_ITEMS, MAX_SAFE_INTEGER
from feltdb.records.summary import WorkloadSummary
from feltdb.records.workload import ApprovalDecision, Workload, WorkloadClaim, WorkloadResult
from feltdb.server.errors import ErrorDetail
from feltdb.server.fields import (
    NOT_BLANK,
    Artifacts,
    ErrorText,
    Identifier,
    JsonInteger,
    Reason,
    SecretReference,
)
from feltdb.storage.base import CommittedTransaction
from feltdb.work.inputs import DEFAULT_LEASE_MS, MAX_BATCH_ITEMS
from feltdb.work.states import ApprovalOutcome, WorkloadState

MAX_WAIT_MS = 30_000
"""The longest a worker may long-poll ``POST /v1/claims``."""

# ---------------------------------------------------------------------- requests


class _Body(BaseModel):
    # Strict: "5" is not a fencing token and true is not a lease; unknown fields are
    # refused rather than silently ignored.
    model_config = ConfigDict(extra="forbid", strict=True)


class EmptyBody(_Body):
    """A route that takes no parameters: the body, if any, must be ``{}``."""


class RevokeBody(_Body):
    """How to revoke a grant: ``force`` revokes an id feltdb never minted."""

    force: bool = Field(
        default=False,
        description="Revoke even an id feltdb never minted (one made by other code);"
        " without it such an id, most often a typo, is refused WORKLOAD_NOT_FOUND.",
    )


_LEASE_DESCRIPTION = (
    "Milliseconds; kept in whole seconds (under 1000 expires at once). At most the"
    " server's lease cap (`feltdb serve --max-lease`, a day by default)."
)


class _ClaimOptions(_Body):
    """What a claim asks for: a lease, and which work (capabilities, definitions)."""

    lease_ms: JsonInteger = Field(
        default=DEFAULT_LEASE_MS, ge=0, le=MAX_SAFE_INTEGER, description=_LEASE_DESCRIPTION
    )
    capabilities: list[str] | None = Field(
        default=None,
        description="Claim only work these capabilities cover (they narrow the grant's; "
        "one the grant does not hold is ignored). Default: the grant's.",
    )
    definitions: list[Identifier] | None = Field(
        default=None,
        max_length=MAX_LIST_ITEMS,
        description="Claim only work of these definition ids: the ones the worker has "
        "handlers for (they narrow the grant's constraints). Default: any.",
    )


class ClaimNextBody(_ClaimOptions):
    """``POST /v1/claims``: a lease, and how long to wait for work (long-poll)."""

    wait_ms: JsonInteger = Field(default=0, ge=0, le=MAX_WAIT_MS)


class ClaimManyBody(_ClaimOptions):
    """``POST /v1/batches/claims``: up to ``limit`` claims, each also started with
    ``start``; with ``wait_ms``, waits for work while none is claimable (long-poll).
    """

    limit: JsonInteger = Field(ge=1, le=MAX_BATCH_ITEMS)
    start: bool = False
    wait_ms: JsonInteger = Field(default=0, ge=0, le=MAX_WAIT_MS)


class ClaimBody(_Body):
    """``POST /v1/workloads/{id}/claim``."""

    lease_ms: JsonInteger = Field(
        default=DEFAULT_LEASE_MS, ge=0, le=MAX_SAFE_INTEGER, description=_LEASE_DESCRIPTION
    )


class FenceBody(_Body):
    """The claim a worker acts under."""

    claim_id: Identifier
    fencing_token: JsonInteger = Field(ge=0, le=MAX_SAFE_INTEGER)


class HeartbeatBody(FenceBody):
    """``POST /v1/workloads/{id}/heartbeat``."""

    extend_ms: JsonInteger = Field(
        default=DEFAULT_LEASE_MS, ge=0, le=MAX_SAFE_INTEGER, description=_LEASE_DESCRIPTION
    )


class ContextBody(FenceBody):
    """``POST /v1/workloads/{id}/context``."""

    secret_references: list[SecretReference] = Field(
        default_factory=list, max_length=MAX_LIST_ITEMS
    )


class CheckpointBody(FenceBody):
    """``POST /v1/workloads/{id}/checkpoint``."""

    state: Any


class CompleteBody(FenceBody):
    """``POST /v1/workloads/{id}/complete``."""

    result_id: Identifier
    output: Any
    artifacts: Artifacts = Field(default_factory=list)
    schema_version: JsonInteger = Field(default=1, ge=0, le=MAX_SAFE_INTEGER)


class AdmissionBatchBody(_Body):
    """``POST /v1/batches/workloads``: submissions, each answered on its own."""

    items: list[dict[str, Any]] = Field(
        max_length=MAX_BATCH_ITEMS,
        description="Each a submission (the body of `POST /v1/workloads`, `SubmitWorkload`)."
        " Each is refused on its own, with the status and error the single route answers.",
    )


class CompletionItem(CompleteBody):
    """One item of ``POST /v1/batches/completions``: a completion of one workload."""

    workload_id: Identifier


class CompletionBatchBody(_Body):
    """``POST /v1/batches/completions``: the worker is the token's subject."""

    items: list[CompletionItem] = Field(max_length=MAX_BATCH_ITEMS)


class HeartbeatItem(HeartbeatBody):
    """One item of ``POST /v1/batches/heartbeats``: a heartbeat of one workload."""

    workload_id: Identifier


class HeartbeatBatchBody(_Body):
    """``POST /v1/batches/heartbeats``: the worker is the token's subject."""

    items: list[HeartbeatItem] = Field(max_length=MAX_BATCH_ITEMS)


class FailBody(FenceBody):
    """``POST /v1/workloads/{id}/fail``; ``effect`` is ``"none"`` or ``"unknown"``."""

    kind: Identifier
    error: ErrorText
    effect: Literal["none", "unknown"] | None = None


class RetryBody(_Body):
    """``POST /v1/workloads/{id}/retry``."""

    reason: Reason | None = None


class DecisionBody(_Body):
    """``POST /v1/workloads/{id}/decision``: bound to the input the decider reviewed; a
    rejection needs a reason.
    """

    # The cross-field rule, for the schema; the store enforces it.
    model_config = ConfigDict(
        json_schema_extra={
            "if": {"properties": {"outcome": {"const": "rejected"}}, "required": ["outcome"]},
            "then": {
                "properties": {"reason": {"type": "string", "pattern": NOT_BLANK}},
                "required": ["reason"],
            },
        }
    )

    outcome: Annotated[ApprovalOutcome, Field(strict=False)]  # strict refuses the JSON string
    reason: Reason | None = None
    input_hash: Identifier


# ---------------------------------------------------------------------- answers


class StateAnswer(BaseModel):
    """A workload's state after a cancel or a failure report."""

    workload_id: str
    state: WorkloadState


class DecisionAnswer(BaseModel):
    """The decision recorded, and whether it replays an earlier identical one."""

    decision: ApprovalDecision
    replayed: bool


class WorkloadPage(BaseModel):
    """A page of a list, each workload summarized; follow ``next_cursor`` until it is null."""

    items: list[WorkloadSummary]
    next_cursor: str | None


class AuditPage(BaseModel):
    """Committed transactions; continue with ``after=next_after``."""

    items: list[CommittedTransaction]
    next_after: int


class Revocation(BaseModel):
    """A revoked grant: its id, who revoked it, and when (unix seconds)."""

    grant_id: str
    revoked_by: str
    revoked_at: int


class RevocationList(BaseModel):
    """The grants revoked in the caller's tenant and application, oldest first."""

    items: list[Revocation]


class RevokeAnswer(BaseModel):
    """What a revocation did: grant ``grant_id`` *of this tenant and application* is
    revoked (``revoked`` false: it already was). A grant of another tenant or
    application is never affected, whatever its id; and since minted grants are not
    recorded, the server cannot tell whether a grant of this id was ever issued.
    """

    grant_id: str
    tenant_id: str
    application_id: str
    revoked: bool
    """Whether this request revoked it (false: it already was revoked)."""
    message: str


class RefusedItem(BaseModel):
    """An item of a batch refused: the status and error the single route answers."""

    status: int
    error: ErrorDetail


class AdmittedItem(BaseModel):
    """An admission of a batch: 201 (created) or 200 (a replay), and the workload."""

    status: Literal[200, 201]
    workload: Workload


class AdmissionBatchAnswer(BaseModel):
    """Each submission's answer, in order."""

    items: list[AdmittedItem | RefusedItem]


class ClaimedItem(BaseModel):
    """A claim of a batch, with the workload as the claim left it (its definition, input,
    checkpoints and timeouts: what the worker runs it with, without a read).
    """

    claim: WorkloadClaim
    workload: dict[str, Any]


class ClaimBatchAnswer(BaseModel):
    """The claims made, in priority order (fewer than asked, or none, when fewer were
    claimable).
    """

    items: list[ClaimedItem]


class CompletedItem(BaseModel):
    """A completion of a batch: the result recorded."""

    status: Literal[200]
    result: WorkloadResult


class CompletionBatchAnswer(BaseModel):
    """Each completion's answer, in order."""

    items: list[CompletedItem | RefusedItem]


class ExtendedItem(BaseModel):
    """A heartbeat of a batch: the extended claim, and whether cancellation of the work
    was requested (confirm it once the handler stopped).
    """

    status: Literal[200]
    claim: WorkloadClaim
    cancellation_requested: bool


class HeartbeatBatchAnswer(BaseModel):
    """Each heartbeat's answer, in order."""

    items: list[ExtendedItem | RefusedItem]


def state_answer(workload_id: str, state: WorkloadState) -> dict[str, Any]:
    """The JSON of a :class:`StateAnswer`."""
    return {"workload_id": workload_id, "state": state.value}


def revoke_answer(
    grant_id: str, tenant_id: str, application_id: str, revoked: bool
) -> dict[str, Any]:
    """The JSON of a :class:`RevokeAnswer`: grant ``grant_id`` of this tenant and
    application is revoked (by this request when ``revoked``, else it already was).
    """
    scope = f"tenant {tenant_id!r}, application {application_id!r}"
    return {
        "grant_id": grant_id,
        "tenant_id": tenant_id,
        "application_id": application_id,
        "revoked": revoked,
        "message": (
            f"grant {grant_id} of {scope} is revoked"
            + ("" if revoked else " (it already was)")
            + ": requests under it are refused from now on. A grant of another"
            " tenant or application is not affected."
        ),
    }
