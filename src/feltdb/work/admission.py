"""Admission: validating a request, building the workload, and answering a repeated key."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from feltdb.auth.policy import ensure_within_constraints
from feltdb.errors import ErrorCode, WorkloadError
from feltdb.fields import MAX_ID_CHARS, MAX_LIST_ITEMS, text_problem
from feltdb.records.workload import (
    DEADLINE_CONTRACT_VERSION,
    ApprovalPolicy,
    Workload,
    WorkloadApproval,
    WorkloadDependency,
    WorkloadTimeouts,
)
from feltdb.storage.canonical import canonical_json, content_hash
from feltdb.tracing import current_trace_context
from feltdb.work.approvals import validate_approval_policy
from feltdb.work.concurrency import DEFINITION_KEY_PREFIX
from feltdb.work.inputs import invalid
from feltdb.work.models import CreateWorkload
from feltdb.work.safety import ensure_safe, ensure_safe_text, sensitive_text
from feltdb.work.states import WorkloadState
from feltdb.work.transitions import transition

ADMISSION_ACTOR = "feltdb"

_REQUIRED_TEXT = ("tenant_id", "application_id", "environment", "definition_id", "idempotency_key")
_BOUNDED_TEXT = (
    *_REQUIRED_TEXT,
    "definition_revision",
    "trigger",
    "session_id",
    "concurrency_key",
    "rate_limit",
    "rate_key",
    "fairness_key",
)
_BOUNDED_LISTS = (
    "capability_snapshot",
    "connection_scopes",
    "dependencies",
    "retry_policy.retry_on",
    "approval.approver_kinds",
    "approval.approvers",
)


def validate_admission(request: CreateWorkload) -> None:
    """Refuse a request that must not be admitted, before anything is read or written.

    Raises:
        WorkloadError: ``WORKLOAD_SECRET_REJECTED`` for secret material in the input or
            any identifier (key, session, environment, definition, capabilities…);
            ``WORKLOAD_INVALID`` naming the field for an empty identifier or key, an
            identifier over its bound (see :mod:`feltdb.fields`), input that is not JSON
            or nests too deep, a zero timeout, ``approval_ms`` without a policy, or an
            invalid policy;
            ``WORKLOAD_UNAUTHORIZED`` when the authorization snapshot does not bind the
            requester, tenant and application, or its grant's constraints do not cover
            the environment and definition.
    """
    secret_field = _check_identifiers(request)
    ensure_safe(request.input, "input")
    if secret_field is not None:
        ensure_safe_text(secret_field[1], secret_field[0])
    blank = [name for name in _REQUIRED_TEXT if not getattr(request, name).strip()]
    if blank:
        message = (
            "idempotency key is required"
            if blank == ["idempotency_key"]
            else f"{', '.join(blank)} must not be empty"
        )
        raise WorkloadError(ErrorCode.WORKLOAD_INVALID, message, {"fields": blank})
    zero = [
        f"timeouts.{name}"
        for name in WorkloadTimeouts.FIELDS
        if getattr(request.timeouts, name) == 0
    ]
    if zero:
        raise WorkloadError(
            ErrorCode.WORKLOAD_INVALID,
            f"a timeout must be at least 1 ms; omit it for no deadline ({', '.join(zero)})",
            {"fields": zero},
        )
    if request.timeouts.approval_ms is not None and request.approval is None:
        raise WorkloadError(
            ErrorCode.WORKLOAD_INVALID,
            "timeouts.approval_ms requires an approval policy",
            {"fields": ["timeouts.approval_ms"]},
        )
    if request.approval is not None:
        validate_approval_policy(request.approval)
    _check_concurrency(request)
    grant = request.authorization_snapshot.grant
    if (
        grant.subject != request.requested_by
        or grant.tenant_id != request.tenant_id
        or grant.application_id != request.application_id
    ):
        raise WorkloadError(
            ErrorCode.WORKLOAD_UNAUTHORIZED, "authorization snapshot does not bind the requester"
        )
    ensure_within_constraints(grant, request.environment, request.definition_id)


def _check_concurrency(request: CreateWorkload) -> None:
    """Refuse a concurrency key without a limit, a limit without a key, a blank key; a rate
    key without its limit's name, a blank name or key.
    """
    key, limit = request.concurrency_key, request.concurrency_limit
    if key is not None and not key.strip():
        raise invalid("concurrency_key", "must not be blank")
    if key is not None and key.startswith(DEFINITION_KEY_PREFIX):
        # A definition's default limit is one (concurrency_defaults): its key is not a
        # requester's to name, or work of one definition could fill another's slots.
        raise invalid("concurrency_key", "'definition:…' keys are definitions' defaults")
    if (key is None) != (limit is None):
        missing, given = (
            ("concurrency_key", "concurrency_limit")
            if key is None
            else ("concurrency_limit", "concurrency_key")
        )
        raise invalid(missing, f"required with {given}")
    if request.rate_key is not None and request.rate_limit is None:
        raise invalid("rate_limit", "required with rate_key")
    for name in ("rate_limit", "rate_key", "fairness_key"):
        value = getattr(request, name)
        if value is not None and not value.strip():
            raise invalid(name, "must not be blank")


def _text_fields(request: CreateWorkload) -> Iterator[tuple[str, str]]:
    """Every identifier of a request, with the field that holds it."""
    for name in _BOUNDED_TEXT:
        value = getattr(request, name)
        if value is not None:
            yield name, value
    yield "requested_by.id", request.requested_by.id
    for name in ("capability_snapshot", "connection_scopes"):
        for member in getattr(request, name):
            yield name, member
    for kind in request.retry_policy.retry_on:
        yield "retry_policy.retry_on", kind
    for index, dependency in enumerate(request.dependencies):
        yield f"dependencies.{index}.workload_id", dependency.workload_id
    if request.approval is not None:
        for kind in request.approval.approver_kinds:
            yield "approval.approver_kinds", kind
        for approver in request.approval.approvers:
            yield "approval.approvers", approver.id


def _check_identifiers(request: CreateWorkload) -> tuple[str, str] | None:
    """Refuse an identifier over :data:`~feltdb.fields.MAX_ID_CHARS`, holding NUL or not
    valid Unicode, and a list over :data:`~feltdb.fields.MAX_LIST_ITEMS` items; the first
    identifier that holds secret material, with its field, if one does.

    One walk over the identifiers does both checks; the secret is returned rather than
    refused, so that every malformed identifier, and the input, are refused before it.
    """
    for name in _BOUNDED_LISTS:
        if len(_members(request, name)) > MAX_LIST_ITEMS:
            raise WorkloadError(
                ErrorCode.WORKLOAD_INVALID,
                f"{name}: must hold at most {MAX_LIST_ITEMS} items",
                {"fields": [name]},
            )
    secret: tuple[str, str] | None = None
    for field, value in _text_fields(request):
        # Each identifier is stored and shown, so it is bounded and checked for secrets.
        problem = text_problem(value, MAX_ID_CHARS, identifier=True)
        if problem is not None:
            raise WorkloadError(
                ErrorCode.WORKLOAD_INVALID, f"{field}: {problem}", {"fields": [field]}
            )
        if secret is None and sensitive_text(value):
            secret = (field, value)
    return secret


def _members(request: CreateWorkload, name: str) -> Any:
    value: Any = request
    for part in name.split("."):
        value = getattr(value, part, None) if value is not None else None
    return value if value is not None else ()


def new_workload(request: CreateWorkload, workload_id: str) -> Workload:
    """The workload a validated request creates, already moved to ``READY`` (or to
    ``AWAITING_APPROVAL`` when it requires approval), not yet committed.
    """
    workload = Workload(
        contract_version=DEADLINE_CONTRACT_VERSION,
        workload_id=workload_id,
        tenant_id=request.tenant_id,
        application_id=request.application_id,
        environment=request.environment,
        definition_id=request.definition_id,
        definition_revision=request.definition_revision,
        trigger=request.trigger,
        input=request.input,
        input_hash=content_hash(request.input),
        requested_by=request.requested_by,
        session_id=request.session_id,
        authorization_snapshot=request.authorization_snapshot,
        capability_snapshot=request.capability_snapshot,
        connection_scopes=request.connection_scopes,
        priority=request.priority,
        idempotency_key=request.idempotency_key,
        created_at=request.created_at,
        updated_at=request.created_at,
        state=WorkloadState.CREATED,
        execution_history=[],
        attempts=[],
        checkpoints=[],
        result=None,
        retry_policy=request.retry_policy,  # records are frozen: shared, never copied
        timeouts=request.timeouts,
        attempt_count=0,
        retry_count=0,
        # Creation-time eligibility and retry backoff are the same thing, so the same field:
        # a workload with not_before is created like any other, only not yet claimable.
        next_attempt_at=request.not_before,
        last_failure=None,
        current_claim=None,
        fencing_token=0,
        dependencies=list(request.dependencies),
        approval=WorkloadApproval(policy=request.approval) if request.approval else None,
        concurrency_key=request.concurrency_key,
        concurrency_limit=request.concurrency_limit,
        rate_limit=request.rate_limit,
        rate_key=request.rate_key,
        fairness_key=request.fairness_key,
        trace_context=request.trace_context or current_trace_context(),  # the caller's span
    )
    # The history records the eligibility the work was admitted with, so "why was this
    # Ready and unclaimed for an hour" is answerable from the workload itself.
    evidence: dict[str, str] = {}
    if request.not_before is not None:
        evidence["not_before"] = str(request.not_before)
    initial = WorkloadState.READY
    if workload.approval is not None:
        # Work that requires approval is never Ready, so never claimable, until an
        # authorized decision commits.
        evidence["approval"] = "required"
        initial = WorkloadState.AWAITING_APPROVAL
    return transition(workload, initial, ADMISSION_ACTOR, request.created_at, evidence)


def _dependencies(dependencies: list[WorkloadDependency]) -> list[str]:
    return sorted(canonical_json([d.workload_id, d.required_state.value]) for d in dependencies)


def _policy(policy: ApprovalPolicy | None) -> Any:
    return None if policy is None else policy.to_json()


def execution_fields(
    *,
    definition_id: str,
    definition_revision: str,
    environment: str,
    input_hash: str,
    capability_snapshot: frozenset[str],
    connection_scopes: frozenset[str],
    priority: int,
    retry_policy: Any,
    timeouts: Any,
    dependencies: list[WorkloadDependency],
    not_before: int | None,
    approval: ApprovalPolicy | None,
) -> list[tuple[str, Any]]:
    """The execution-affecting part of an admission, normalized, field by field.

    Defaults are applied, sets compare as sets, dependencies regardless of order, and the
    input by its canonical hash. Provenance that does not change what runs (trigger,
    session, created_at, the authorization snapshot, verified before any replay) is not
    part of it.
    """
    return [
        ("definition_id", definition_id),
        ("definition_revision", definition_revision),
        ("environment", environment),
        ("input", input_hash),
        ("capability_snapshot", sorted(capability_snapshot)),
        ("connection_scopes", sorted(connection_scopes)),
        ("priority", priority),
        ("retry_policy", retry_policy.to_json()),
        ("timeouts", timeouts.to_json()),
        ("dependencies", _dependencies(dependencies)),
        ("not_before", not_before),
        ("approval", _policy(approval)),
    ]


def admitted_not_before(workload: Workload) -> int | None:
    """The ``not_before`` a workload was admitted with, from its admission event.

    ``next_attempt_at`` moves with retries; the admission evidence does not. The reference
    reads the first ``READY`` event, which work admitted into approval lacks; this port reads
    the first event of the history (docs/api.md, "deliberately differs").
    """
    if not workload.execution_history:
        return None
    value = workload.execution_history[0].evidence.get("not_before")
    return int(value) if value is not None else None


def replay(existing: Workload, request: CreateWorkload) -> tuple[Workload, bool]:
    """Answer a repeated key: the original workload for an equivalent request.

    Raises:
        WorkloadError: ``IDEMPOTENCY_KEY_REUSED`` with ``details["fields"]`` naming every
            field that differs.
    """
    recorded = execution_fields(
        definition_id=existing.definition_id,
        definition_revision=existing.definition_revision,
        environment=existing.environment,
        input_hash=existing.input_hash,
        capability_snapshot=existing.capability_snapshot,
        connection_scopes=existing.connection_scopes,
        priority=existing.priority,
        retry_policy=existing.retry_policy,
        timeouts=existing.timeouts,
        dependencies=existing.dependencies,
        not_before=admitted_not_before(existing),
        approval=existing.approval.policy if existing.approval is not None else None,
    )
    requested = execution_fields(
        definition_id=request.definition_id,
        definition_revision=request.definition_revision,
        environment=request.environment,
        input_hash=content_hash(request.input),
        capability_snapshot=request.capability_snapshot,
        connection_scopes=request.connection_scopes,
        priority=request.priority,
        retry_policy=request.retry_policy,
        timeouts=request.timeouts,
        dependencies=request.dependencies,
        not_before=request.not_before,
        approval=request.approval,
    )
    conflicting = [
        name for (name, left), (_, right) in zip(recorded, requested, strict=True) if left != right
    ]
    if existing.requested_by != request.requested_by:
        conflicting.insert(0, "requested_by")
    # Not asked for, the work may have been given its definition's default; else compared.
    defaulted = request.concurrency_key is None and existing.concurrency_key == (
        DEFINITION_KEY_PREFIX + existing.definition_id
    )
    if not defaulted:
        for name in ("concurrency_key", "concurrency_limit"):
            if getattr(existing, name) != getattr(request, name):
                conflicting.append(name)
    for name in ("rate_limit", "rate_key", "fairness_key"):
        if getattr(existing, name) != getattr(request, name):
            conflicting.append(name)
    if not conflicting:
        return existing, False
    raise WorkloadError(
        ErrorCode.IDEMPOTENCY_KEY_REUSED,
        "idempotency key was already used for a different request: "
        + ", ".join(conflicting)
        + " differ",
        {"fields": conflicting},
    )
