"""The ``/v1`` routes: HTTP translated to :class:`~feltdb.work.store.WorkloadStore` calls.

Every route authenticates the bearer token (a signed grant, verified with the server's
keyring), authorizes the grant for the route's capability and resource, and then makes one
store call. Identity never comes from the body: a submission's ``requested_by`` and
``authorization_snapshot`` are the token's subject and signed grant; a worker's id is the
grant's subject id and its capabilities the grant's capabilities; a decider is the grant's
subject.

| route | capability | resource checked |
| --- | --- | --- |
| ``POST /v1/workloads`` | ``workload:execute`` | ``flow://{app}/workloads/{new id}`` |
| ``GET /v1/workloads/{id}`` | ``workload:read`` | ``flow://{app}/workloads/{id}`` |
| ``POST /v1/workloads/{id}/cancel`` | ``workload:cancel`` | the workload |
| ``POST /v1/claims`` | ``workload:claim`` | ``flow://{app}/workloads/*`` (any of the app's) |
| ``POST /v1/workloads/{id}/{claim,start,heartbeat,context,checkpoint,complete,fail,``
  ``confirm-cancel}`` | ``workload:claim`` | the workload |
| ``POST /v1/workloads/{id}/retry`` | ``workload:operate`` | the workload |
| ``POST /v1/workloads/{id}/decision`` | ``workload:approve`` | the workload |
| ``GET /v1/workloads`` | ``workload:read`` | ``flow://{app}/workloads/*`` |
| ``GET /v1/approvals`` | ``workload:approve`` | ``flow://{app}/workloads/*`` |
| ``GET /v1/dead-letters`` | ``workload:operate`` | ``flow://{app}/workloads/*`` |
| ``GET /v1/audit`` | ``audit:read`` | ``flow://{app}/workloads/*`` |
| ``POST /v1/grants/{grant_id}/revoke`` | ``grant:revoke`` | (the tenant and application) |

The tenant and application of every request are the grant's. Work of another tenant or
application is answered ``404 WORKLOAD_NOT_FOUND`` exactly as missing work is, so no
request can learn whether it exists. The lists (``GET /v1/workloads``, ``/v1/approvals``,
``/v1/dead-letters``) and the audit only ever hold the grant's tenant's application's
entries, and need a grant covering all of the application's workloads.

Lists are pages: ``{"items": [...], "next_cursor": str | null}`` in the order of
``WorkloadStore.list`` (priority descending, then oldest first, then id), ``limit`` 1 to
500 (50 by default), ``cursor`` the previous page's ``next_cursor`` (opaque: URL-safe
base64 of the last item's ``[priority, created_at, id]``). Each page is a keyset seek over
the scheduling index, whatever its depth. The ``definition`` filter is applied to each page
as read, so a filtered page may hold fewer than ``limit`` items (even none) while
``next_cursor`` is set: follow it until it is ``null``.

Revocation: ``POST /v1/grants/{grant_id}/revoke`` revokes a grant id *of the caller's
tenant and application* (a revocation never reaches another tenant's grants). From the
next request on, every request under that grant is refused ``403``. Checking costs every
authenticated request one primary-key read of the store (``system_revoked_grants``), on a
worker thread: about 15 µs on SQLite and 130 µs on PostgreSQL over a local socket
(measured on this machine); a store that cannot be read refuses the request (503), never
lets it through.
"""

# No `from __future__ import annotations`: FastAPI must evaluate the routes' annotations,
# which name the closure's `Auth` dependency, where they are defined.

import asyncio
import base64
import binascii
import contextlib
import functools
import json
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Body, Depends, Path, Query, Request, Response
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import BaseModel, ConfigDict, Field, create_model

from feltdb.auth import Grant
from feltdb.auth.policy import (
    APPROVE,
    AUDIT,
    CANCEL,
    CLAIM,
    OPERATE,
    READ,
    REVOKE,
    SUBMIT,
    authorize,
    authorize_application,
    constrained,
    within_constraints,
    worker_name,
    workload_uri,
)
from feltdb.auth.tokens import Keyring, decode_token
from feltdb.errors import ErrorCode, WorkloadError
from feltdb.fields import MAX_ID_CHARS, MAX_LIST_ITEMS, MAX_SAFE_INTEGER
from feltdb.server.errors import Unauthenticated, error_responses
from feltdb.server.fields import (
    NO_NUL,
    NOT_BLANK,
    Artifacts,
    ErrorText,
    Identifier,
    JsonInteger,
    Reason,
    SecretReference,
    integers_as_declared,
)
from feltdb.storage.base import CommittedTransaction
from feltdb.work.disclosure import disclosed
from feltdb.work.identities import workload_id_for
from feltdb.work.inputs import Cursor
from feltdb.work.models import (
    ApprovalDecision,
    CreateWorkload,
    Workload,
    WorkloadCheckpoint,
    WorkloadClaim,
    WorkloadExecutionContext,
    WorkloadResult,
)
from feltdb.work.states import ApprovalOutcome, WorkloadState
from feltdb.work.store import DEFAULT_LEASE_MS, WorkloadStore

log = logging.getLogger("feltdb.server")

MAX_WAIT_MS = 30_000
"""The longest a worker may long-poll ``POST /v1/claims``."""

DEFAULT_PAGE = 50
"""Items a list answers unless told ``limit``."""
MAX_PAGE = 500
"""The most items one list page may hold."""
MAX_AUDIT_PAGE = 500
"""The most entries one ``GET /v1/audit`` answers."""

RECHECK_S = 0.25
"""A long-poll also looks again this often, for work another server committed (its
commits do not wake this one) or work whose ``next_attempt_at`` arrived."""

FROM_THE_TOKEN = ("tenant_id", "application_id", "requested_by", "authorization_snapshot")
"""Submission fields taken from the verified token, never from the body."""


class Wakeup:
    """Wakes long-polling claims when this server commits something that may have made work
    claimable (an admission, a completion, a failure, a retry, a decision, a recovery).

    Commits happen on threadpool and maintenance threads; waiters are coroutines on the
    event loop, so :meth:`notify` hands the wake-up to the loop thread-safely.
    """

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._event = asyncio.Event()
        self._lock = threading.Lock()

    def bind(self, loop: asyncio.AbstractEventLoop) -> None:
        """Deliver wake-ups to ``loop`` (the loop the waiters run on)."""
        with self._lock:
            self._loop = loop

    def unbind(self) -> None:
        """Stop delivering wake-ups (the loop is shutting down)."""
        with self._lock:
            self._loop = None

    def signal(self) -> asyncio.Event:
        """The event the next :meth:`notify` sets. Take it *before* looking for work, so a
        commit between the look and the wait is not missed.
        """
        return self._event

    def notify(self) -> None:
        """Wake every current waiter; safe from any thread."""
        with self._lock:
            loop = self._loop
        if loop is None:
            return
        with contextlib.suppress(RuntimeError):  # the loop closed: nobody is waiting
            loop.call_soon_threadsafe(self._fire)

    def _fire(self) -> None:
        event, self._event = self._event, asyncio.Event()
        event.set()


@dataclass(frozen=True)
class Context:
    """What the routes act on."""

    store: WorkloadStore
    keyring: Keyring
    clock: Callable[[], int]
    wakeup: Wakeup


@dataclass(frozen=True)
class Caller:
    """The verified grant of a request, and the id of the key that signed its token."""

    grant: Grant
    key_id: str


# ---------------------------------------------------------------------- request bodies


class _Body(BaseModel):
    # Strict: "5" is not a fencing token and true is not a lease; unknown fields are
    # refused rather than silently ignored.
    model_config = ConfigDict(extra="forbid", strict=True)


class EmptyBody(_Body):
    """A route that takes no parameters: the body, if any, must be ``{}``."""


_LEASE_DESCRIPTION = (
    "Milliseconds; kept in whole seconds (under 1000 expires at once). At most the"
    " server's lease cap (`feltdb serve --max-lease`, a day by default)."
)


class ClaimNextBody(_Body):
    """``POST /v1/claims``: a lease, and how long to wait for work (long-poll)."""

    lease_ms: JsonInteger = Field(
        default=DEFAULT_LEASE_MS, ge=0, le=MAX_SAFE_INTEGER, description=_LEASE_DESCRIPTION
    )
    wait_ms: JsonInteger = Field(default=0, ge=0, le=MAX_WAIT_MS)
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


# ---------------------------------------------------------------------- the OpenAPI

SubmitWorkload: type[BaseModel] = create_model(
    "SubmitWorkload",
    __config__=ConfigDict(extra="forbid"),
    __doc__="``POST /v1/workloads``: a CreateWorkload without the fields the token and the"
    " server supply (tenant, application, requester, authorization snapshot, created_at).",
    **{
        name: (info.annotation, info)
        for name, info in CreateWorkload.model_fields.items()
        if name not in (*FROM_THE_TOKEN, "created_at")
    },
)  # type: ignore[call-overload]
"""The declared submission body. The body is still parsed by ``CreateWorkload.parse`` (with
the token's fields added), so the OpenAPI schema is this model's and the rules are one."""


def _inline(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` with its ``#/$defs/...`` references replaced by the definitions (an OpenAPI
    operation cannot point into a schema's own ``$defs``).
    """
    defs = schema.pop("$defs", {})

    def resolve(node: Any) -> Any:
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.startswith("#/$defs/"):
                rest = {k: v for k, v in node.items() if k != "$ref"}
                return {**resolve(defs[ref.removeprefix("#/$defs/")]), **resolve(rest)}
            return {key: resolve(value) for key, value in node.items()}
        if isinstance(node, list):
            return [resolve(item) for item in node]
        return node

    return resolve(schema)  # type: ignore[no-any-return]


def _bounded(node: dict[str, Any], *, required: bool) -> None:
    """Declare an identifier's bounds on a string schema ``node`` (or a nullable one)."""
    for option in node.get("anyOf", [node]):
        if option.get("type") == "string":
            option["maxLength"] = MAX_ID_CHARS
            option["pattern"] = NOT_BLANK if required else NO_NUL
            if required:
                option["minLength"] = 1


def _bounded_items(node: dict[str, Any]) -> None:
    node["maxItems"] = MAX_LIST_ITEMS
    _bounded(node["items"], required=False)


def _submission_schema() -> dict[str, Any]:
    """:data:`SubmitWorkload`'s schema, with what admission checks beyond the model's types
    (``validate_admission``): identifiers of at most 256 characters without NUL, the
    required ones not blank; lists of at most 1,024 items; a timeout given is at least 1 ms;
    approvers and their kinds are people or services; ``approval_ms`` needs an approval.
    What the schema cannot say (a dependency names visible work, no secrets in the input,
    the token covering the new workload) is answered 422 or 403, as declared.
    """
    schema = _inline(SubmitWorkload.model_json_schema())
    properties = schema["properties"]
    for name in ("environment", "definition_id", "idempotency_key"):
        _bounded(properties[name], required=True)
    for name in ("definition_revision", "trigger", "session_id"):
        _bounded(properties[name], required=False)
    for name in ("capability_snapshot", "connection_scopes"):
        _bounded_items(properties[name])
    _bounded_items(properties["retry_policy"]["properties"]["retry_on"])
    properties["dependencies"]["maxItems"] = MAX_LIST_ITEMS
    _bounded(properties["dependencies"]["items"]["properties"]["workload_id"], required=True)
    for timeout in properties["timeouts"]["properties"].values():
        for option in timeout.get("anyOf", [timeout]):
            if option.get("type") == "integer":
                option["minimum"] = 1
    people = ["human", "service"]
    for policy in properties["approval"]["anyOf"]:
        if policy.get("type") != "object":
            continue
        kinds = policy["properties"]["approver_kinds"]
        kinds.update(items={"type": "string", "enum": people}, minItems=1)
        approvers = policy["properties"]["approvers"]
        approvers["maxItems"] = MAX_LIST_ITEMS
        approvers["items"]["properties"]["kind"] = {"type": "string", "enum": people}
        _bounded(approvers["items"]["properties"]["id"], required=False)
    # approval_ms is the wait for an approval, so it needs one.
    schema["if"] = {
        "properties": {
            "timeouts": {
                "properties": {"approval_ms": {"type": "integer"}},
                "required": ["approval_ms"],
            }
        },
        "required": ["timeouts"],
    }
    schema["then"] = {"properties": {"approval": {"type": "object"}}, "required": ["approval"]}
    return schema


_SUBMIT_EXAMPLE = {
    "environment": "production",
    "definition_id": "send-welcome-email",
    "definition_revision": "1",
    "trigger": "api",
    "input": {"to": "user@example.com"},
    "capability_snapshot": ["email:send"],
    "idempotency_key": "welcome-42",
}

_SUBMISSION_SCHEMA = _submission_schema()

_SUBMIT_BODY = {
    "requestBody": {
        "required": True,
        "content": {"application/json": {"schema": _SUBMISSION_SCHEMA, "example": _SUBMIT_EXAMPLE}},
    }
}


class StateAnswer(BaseModel):
    """A workload's state after a cancel or a failure report."""

    workload_id: str
    state: WorkloadState


class DecisionAnswer(BaseModel):
    """The decision recorded, and whether it replays an earlier identical one."""

    decision: ApprovalDecision
    replayed: bool


class WorkloadPage(BaseModel):
    """A page of a list; follow ``next_cursor`` until it is null."""

    items: list[Workload]
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


def _answers(
    model: type[BaseModel] | None, *errors: int, status: int = 200
) -> dict[int | str, dict[str, Any]]:
    """A route's ``responses=``: its success answer's model and its error statuses."""
    answers = error_responses(*errors)
    if model is not None:
        answers[status] = {"model": model}
    return answers


_AUTH = (401, 403, 503)
"""Every /v1 route: the token is checked (401/403) against the store's revocations (503)."""
_ON_WORKLOAD = (*_AUTH, 404, 409, 422)
"""A route acting on one workload: absent or foreign (404), refused by its state (409),
or given an invalid request (422)."""
_WITH_BODY = (*_ON_WORKLOAD, 413)


# ---------------------------------------------------------------------- the routes


def _not_found(workload_id: str) -> WorkloadError:
    # The store's own wording, so foreign work is indistinguishable from missing work.
    return WorkloadError(
        ErrorCode.WORKLOAD_NOT_FOUND,
        f"workload {workload_id} not found",
        {"workload_id": workload_id},
    )


def _state(workload_id: str, state: str) -> dict[str, Any]:
    return {"workload_id": workload_id, "state": state}


def build_router(ctx: Context) -> APIRouter:
    """The ``/v1`` routes over ``ctx``."""
    router = APIRouter(prefix="/v1")
    store = ctx.store
    bearer = HTTPBearer(auto_error=False, description="A feltdb token (fgt2.…)")

    async def caller(
        credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
    ) -> Caller:
        if credentials is None:
            raise Unauthenticated("a bearer token is required (Authorization: Bearer …)")
        try:
            signed = decode_token(credentials.credentials)
        except WorkloadError as error:
            raise Unauthenticated(error.message) from error
        grant = ctx.keyring.verify_signed(signed, ctx.clock())
        revoked = await run_in_threadpool(
            store.is_grant_revoked,
            grant.id,
            tenant_id=grant.tenant_id,
            application_id=grant.application_id,
        )
        if revoked:
            raise WorkloadError(
                ErrorCode.WORKLOAD_UNAUTHORIZED, "the grant was revoked", {"grant_id": grant.id}
            )
        return Caller(grant, signed.key_id)

    Auth = Annotated[Caller, Depends(caller)]
    WorkloadId = Annotated[
        str,
        Path(min_length=1, max_length=MAX_ID_CHARS, pattern=NOT_BLANK, description="The workload"),
    ]

    def allow(grant: Grant, capability: str, workload_id: str) -> None:
        authorize(
            grant,
            capability,
            grant.tenant_id,
            grant.application_id,
            workload_uri(grant.application_id, workload_id),
        )

    def whole_application(grant: Grant, capability: str) -> None:
        # A list, or claim_next, may touch any workload of the application, so the grant
        # must cover them all: decided about its scopes, never by matching "*" against them.
        authorize_application(grant, capability)

    def owned(grant: Grant, workload_id: str) -> Workload:
        # Work of another tenant or application, or outside the grant's constraints, is
        # answered as missing work is: the grant may not learn that it exists.
        w = store.get(workload_id)  # its refusal of missing work is _not_found's wording
        if (
            w.tenant_id != grant.tenant_id
            or w.application_id != grant.application_id
            or not within_constraints(grant, w.environment, w.definition_id)
        ):
            raise _not_found(workload_id)
        return w

    def held_by(grant: Grant, workload_id: str) -> Workload | None:
        # The workload, if the grant may claim it and its subject holds its current claim.
        try:
            allow(grant, CLAIM, workload_id)
            w = owned(grant, workload_id)
        except WorkloadError:
            return None
        claim = w.current_claim
        held = claim is not None and claim.worker_id == worker_name(grant.subject)
        return w if held else None

    def awaiting_decision_of(grant: Grant, workload_id: str) -> Workload | None:
        # An approver may read work that requires approval (to review its input and its
        # input hash) with workload:approve alone, as the inbox lists it (issue 10, point 8).
        try:
            allow(grant, APPROVE, workload_id)
            w = owned(grant, workload_id)
        except WorkloadError:
            return None
        return w if w.approval is not None else None

    def as_worker(grant: Grant, workload_id: str) -> str:
        allow(grant, CLAIM, workload_id)
        owned(grant, workload_id)
        return worker_name(grant.subject)

    # -------------------------------------------------------------- requesters

    @router.post(
        "/workloads",
        status_code=201,
        summary="Admit a workload (200 on a replay)",
        responses={
            **_answers(Workload, *_WITH_BODY, 425, status=201),
            200: {"model": Workload, "description": "A replay: the workload already admitted"},
        },
        openapi_extra=_SUBMIT_BODY,
    )
    def submit(caller: Auth, body: Annotated[dict[str, Any], Body()]) -> JSONResponse:
        grant = caller.grant
        authorize(grant, SUBMIT, grant.tenant_id, grant.application_id)
        from_token = sorted(name for name in (*FROM_THE_TOKEN, "created_at") if name in body)
        if from_token:
            raise WorkloadError(
                ErrorCode.WORKLOAD_INVALID,
                "these fields come from the bearer token and the server, not the body: "
                + ", ".join(from_token),
                {"fields": from_token},
            )
        request: CreateWorkload = CreateWorkload.parse(
            {
                **integers_as_declared(body, _SUBMISSION_SCHEMA),
                "tenant_id": grant.tenant_id,
                "application_id": grant.application_id,
                "requested_by": grant.subject,
                # Evidence, signed in its own domain: never the token itself.
                "authorization_snapshot": ctx.keyring.evidence(grant, caller.key_id),
                "created_at": ctx.clock(),
            }
        )
        new_id = workload_id_for(
            request.tenant_id, request.application_id, request.requested_by,
            request.idempotency_key,
        )  # fmt: skip
        allow(grant, SUBMIT, new_id)
        workload, created = store.admit(request)
        if created:
            ctx.wakeup.notify()
        return JSONResponse(disclosed(workload), status_code=201 if created else 200)

    @router.get(
        "/workloads/{workload_id}",
        summary="Read a committed workload",
        responses=_answers(Workload, *_AUTH, 404, 422),
    )
    def read(caller: Auth, workload_id: WorkloadId) -> JSONResponse:
        grant = caller.grant
        try:
            allow(grant, READ, workload_id)
        except WorkloadError:
            # A worker may read the work it holds (its definition, timeouts and state:
            # whether cancellation was requested), and an approver work that requires an
            # approval, without workload:read on the application.
            # Anything else is the refusal for the missing capability, never a 404 that
            # would tell a grant without workload:read whether the workload exists.
            held = held_by(grant, workload_id) or awaiting_decision_of(grant, workload_id)
            if held is None:
                raise
            return JSONResponse(disclosed(held))
        return JSONResponse(disclosed(owned(grant, workload_id)))

    @router.post(
        "/workloads/{workload_id}/cancel",
        summary="Cancel, or request cancellation",
        responses=_answers(StateAnswer, *_ON_WORKLOAD),
    )
    def cancel(
        caller: Auth, workload_id: WorkloadId, body: EmptyBody | None = None
    ) -> JSONResponse:
        allow(caller.grant, CANCEL, workload_id)
        owned(caller.grant, workload_id)
        state = store.cancel(workload_id, str(caller.grant.subject), ctx.clock())
        return JSONResponse(_state(workload_id, state.value))

    # -------------------------------------------------------------- workers

    @router.post(
        "/claims",
        summary="Claim the next eligible workload (204 when none); long-polls up to wait_ms",
        responses={
            **_answers(WorkloadClaim, *_AUTH, 413, 422),
            204: {"description": "No claimable work (within wait_ms)"},
        },
    )
    async def claim_next(
        caller: Auth, request: Request, body: ClaimNextBody | None = None
    ) -> Response:
        grant = caller.grant
        whole_application(grant, CLAIM)  # claim_next may pick any workload of the app
        options = body if body is not None else ClaimNextBody()
        held = set(grant.capabilities)
        if options.capabilities is not None:
            held &= set(options.capabilities)
        definitions = grant.constraints.definitions or None
        if options.definitions is not None:
            asked = frozenset(options.definitions)
            definitions = asked if definitions is None else definitions & asked
        ctx.wakeup.bind(asyncio.get_running_loop())
        deadline = time.monotonic() + options.wait_ms / 1000
        while True:
            signal = ctx.wakeup.signal()
            claim = await run_in_threadpool(
                functools.partial(
                    store.claim_next,
                    grant.tenant_id,
                    grant.application_id,
                    worker_name(grant.subject),
                    held,
                    ctx.clock(),
                    options.lease_ms,
                    definitions=definitions,
                    environments=grant.constraints.environments or None,
                )
            )
            if claim is not None:
                return JSONResponse(claim.to_json())
            remaining = deadline - time.monotonic()
            if remaining <= 0 or await request.is_disconnected():
                return Response(status_code=204)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(signal.wait(), min(remaining, RECHECK_S))

    @router.post(
        "/workloads/{workload_id}/claim",
        summary="Claim a given workload",
        responses=_answers(WorkloadClaim, *_WITH_BODY, 425),
    )
    def claim(caller: Auth, workload_id: WorkloadId, body: ClaimBody | None = None) -> JSONResponse:
        worker = as_worker(caller.grant, workload_id)
        lease_ms = body.lease_ms if body is not None else DEFAULT_LEASE_MS
        granted = store.claim(workload_id, worker, caller.grant.capabilities, ctx.clock(), lease_ms)
        return JSONResponse(granted.to_json())

    @router.post(
        "/workloads/{workload_id}/start",
        status_code=204,
        summary="Start the attempt",
        responses=_answers(None, *_WITH_BODY),
    )
    def start(caller: Auth, workload_id: WorkloadId, body: FenceBody) -> Response:
        worker = as_worker(caller.grant, workload_id)
        store.start(workload_id, body.claim_id, worker, body.fencing_token, ctx.clock())
        return Response(status_code=204)

    @router.post(
        "/workloads/{workload_id}/heartbeat",
        summary="Extend the lease",
        responses=_answers(WorkloadClaim, *_WITH_BODY),
    )
    def heartbeat(caller: Auth, workload_id: WorkloadId, body: HeartbeatBody) -> JSONResponse:
        worker = as_worker(caller.grant, workload_id)
        extended = store.heartbeat(
            workload_id, body.claim_id, worker, body.fencing_token, ctx.clock(), body.extend_ms
        )
        return JSONResponse(extended.to_json())

    @router.post(
        "/workloads/{workload_id}/context",
        summary="The execution context",
        responses=_answers(WorkloadExecutionContext, *_WITH_BODY),
    )
    def context(caller: Auth, workload_id: WorkloadId, body: ContextBody) -> JSONResponse:
        worker = as_worker(caller.grant, workload_id)
        found = store.execution_context(
            workload_id,
            body.claim_id,
            worker,
            body.fencing_token,
            ctx.clock(),
            body.secret_references,
        )
        return JSONResponse(found.to_json())

    @router.post(
        "/workloads/{workload_id}/checkpoint",
        summary="Commit progress",
        responses=_answers(WorkloadCheckpoint, *_WITH_BODY),
    )
    def checkpoint(caller: Auth, workload_id: WorkloadId, body: CheckpointBody) -> JSONResponse:
        worker = as_worker(caller.grant, workload_id)
        saved = store.checkpoint(
            workload_id, body.claim_id, worker, body.fencing_token, body.state, ctx.clock()
        )
        return JSONResponse(saved.to_json())

    @router.post(
        "/workloads/{workload_id}/complete",
        summary="Record the result",
        responses=_answers(WorkloadResult, *_WITH_BODY),
    )
    def complete(caller: Auth, workload_id: WorkloadId, body: CompleteBody) -> JSONResponse:
        worker = as_worker(caller.grant, workload_id)
        result = store.complete(
            workload_id,
            body.claim_id,
            worker,
            body.fencing_token,
            body.result_id,
            body.output,
            body.artifacts,
            body.schema_version,
            ctx.clock(),
        )
        ctx.wakeup.notify()  # work depending on this one may be claimable now
        return JSONResponse(result.to_json())

    @router.post(
        "/workloads/{workload_id}/fail",
        summary="Report the attempt failed",
        responses=_answers(StateAnswer, *_WITH_BODY),
    )
    def fail(caller: Auth, workload_id: WorkloadId, body: FailBody) -> JSONResponse:
        worker = as_worker(caller.grant, workload_id)
        state = store.fail(
            workload_id,
            body.claim_id,
            worker,
            body.fencing_token,
            body.kind,
            body.error,
            ctx.clock(),
            body.effect,
        )
        ctx.wakeup.notify()  # a retry may have made it claimable again
        return JSONResponse(_state(workload_id, state.value))

    @router.post(
        "/workloads/{workload_id}/confirm-cancel",
        status_code=204,
        summary="Confirm a requested cancellation",
        responses=_answers(None, *_WITH_BODY),
    )
    def confirm_cancel(caller: Auth, workload_id: WorkloadId, body: FenceBody) -> Response:
        worker = as_worker(caller.grant, workload_id)
        store.confirm_cancel(workload_id, body.claim_id, worker, body.fencing_token, ctx.clock())
        return Response(status_code=204)

    # -------------------------------------------------------------- operators and approvers

    @router.post(
        "/workloads/{workload_id}/retry",
        summary="Re-arm failed or dead-lettered work",
        responses=_answers(Workload, *_WITH_BODY),
    )
    def retry(caller: Auth, workload_id: WorkloadId, body: RetryBody | None = None) -> JSONResponse:
        allow(caller.grant, OPERATE, workload_id)
        owned(caller.grant, workload_id)
        reason = body.reason if body is not None else None
        store.retry(workload_id, str(caller.grant.subject), ctx.clock(), reason)
        ctx.wakeup.notify()
        return JSONResponse(disclosed(store.get(workload_id)))

    @router.post(
        "/workloads/{workload_id}/decision",
        summary="Approve or reject",
        responses=_answers(DecisionAnswer, *_WITH_BODY),
    )
    def decide(caller: Auth, workload_id: WorkloadId, body: DecisionBody) -> JSONResponse:
        grant = caller.grant
        allow(grant, APPROVE, workload_id)
        owned(grant, workload_id)
        decision, replayed = store.decide(
            workload_id,
            grant.subject,
            body.outcome,
            body.reason,
            grant.id,
            body.input_hash,
            ctx.clock(),
        )
        ctx.wakeup.notify()
        return JSONResponse({"decision": decision.to_json(), "replayed": replayed})

    # -------------------------------------------------------------- lists and audit

    def listed(
        grant: Grant,
        state: str | None,
        definition: str | None,
        cursor: str | None,
        limit: int,
    ) -> JSONResponse:
        # A constrained grant sees only the work inside its constraints: the rest is hidden
        # from its pages and their cursors alike.
        def visible(w: Workload) -> bool:
            return within_constraints(grant, w.environment, w.definition_id)

        page, after = store.page(
            grant.tenant_id, grant.application_id, state=state, definition=definition,
            after=_decode_cursor(cursor), limit=limit,
            visible=visible if constrained(grant) else None,
        )  # fmt: skip
        items = [disclosed(w) for w in page]
        return JSONResponse({"items": items, "next_cursor": _encode_cursor(after)})

    Limit = Annotated[int, Query(ge=1, le=MAX_PAGE, description="Items per page")]
    PageCursor = Annotated[
        str | None,
        Query(max_length=1024, description="The previous page's next_cursor (opaque)"),
    ]

    @router.get(
        "/workloads",
        summary="List the application's workloads, a page at a time",
        responses=_answers(WorkloadPage, *_AUTH, 422),
        description=(
            "Priority descending, then oldest first. `definition` filters each page as read:"
            " a page may hold fewer than `limit` items while `next_cursor` is set."
        ),
    )
    def list_workloads(
        caller: Auth,
        state: Annotated[WorkloadState | None, Query()] = None,
        definition: Annotated[
            str | None, Query(min_length=1, max_length=MAX_ID_CHARS, pattern=NOT_BLANK)
        ] = None,
        limit: Limit = DEFAULT_PAGE,
        cursor: PageCursor = None,
    ) -> JSONResponse:
        whole_application(caller.grant, READ)
        return listed(
            caller.grant, state.value if state is not None else None, definition, cursor, limit
        )

    @router.get(
        "/approvals",
        summary="Workloads awaiting approval, a page at a time",
        responses=_answers(WorkloadPage, *_AUTH, 422),
    )
    def approvals(
        caller: Auth, limit: Limit = DEFAULT_PAGE, cursor: PageCursor = None
    ) -> JSONResponse:
        whole_application(caller.grant, APPROVE)
        return listed(caller.grant, WorkloadState.AWAITING_APPROVAL.value, None, cursor, limit)

    @router.get(
        "/dead-letters",
        summary="Dead-lettered workloads, a page at a time",
        responses=_answers(WorkloadPage, *_AUTH, 422),
    )
    def dead_letters(
        caller: Auth, limit: Limit = DEFAULT_PAGE, cursor: PageCursor = None
    ) -> JSONResponse:
        whole_application(caller.grant, OPERATE)
        return listed(caller.grant, WorkloadState.DEAD_LETTER.value, None, cursor, limit)

    @router.get(
        "/audit",
        summary="Committed transactions of the application after a revision",
        responses=_answers(AuditPage, *_AUTH, 422),
        description=(
            "Oldest first. Continue with `after=next_after`; one request reads a bounded"
            " stretch of the log, so a page may be empty while later entries exist: an"
            " empty page whose `next_after` equals `after` means nothing is left for now."
        ),
    )
    def audit(
        caller: Auth,
        after: Annotated[int, Query(ge=0, le=MAX_SAFE_INTEGER)] = 0,
        limit: Annotated[int, Query(ge=1, le=MAX_AUDIT_PAGE)] = 100,
    ) -> JSONResponse:
        grant = caller.grant
        whole_application(grant, AUDIT)
        if constrained(grant):
            # The log is the whole application's: a grant narrowed to some environments or
            # definitions cannot be given it.
            raise WorkloadError(
                ErrorCode.WORKLOAD_UNAUTHORIZED,
                "the audit is the whole application's: a grant constrained to environments"
                " or definitions may not read it",
                {"missing": "unconstrained grant"},
            )
        entries, next_after = store.audit_after(grant.tenant_id, grant.application_id, after, limit)
        return JSONResponse(
            {"items": [e.model_dump(mode="json") for e in entries], "next_after": next_after}
        )

    # -------------------------------------------------------------- grants

    @router.get(
        "/grants/revocations",
        summary="The grants revoked in this tenant and application",
        responses=_answers(RevocationList, *_AUTH),
    )
    def revocations(caller: Auth) -> JSONResponse:
        grant = caller.grant
        whole_application(grant, REVOKE)
        items = store.revocations(grant.tenant_id, grant.application_id)
        return JSONResponse({"items": items})

    @router.post(
        "/grants/{grant_id}/revoke",
        summary="Revoke a grant of this tenant and application",
        responses=_answers(RevokeAnswer, *_AUTH, 422),
        description="Idempotent: `revoked` is false when it already was revoked. The"
        " revocation is scoped to the caller's tenant and application, as the answer says.",
    )
    def revoke(
        caller: Auth,
        grant_id: Annotated[str, Path(min_length=1, max_length=MAX_ID_CHARS, pattern=NOT_BLANK)],
        body: EmptyBody | None = None,
    ) -> JSONResponse:
        grant = caller.grant
        # Revoking reaches every grant of the application, so it takes a grant over the
        # whole application, not one narrowed to some workloads or definitions.
        whole_application(grant, REVOKE)
        if constrained(grant):
            raise WorkloadError(
                ErrorCode.WORKLOAD_UNAUTHORIZED,
                "a grant constrained to environments or definitions may not revoke grants",
                {"missing": "unconstrained grant"},
            )
        revoked = store.revoke_grant(
            grant_id,
            str(grant.subject),
            ctx.clock(),
            tenant_id=grant.tenant_id,
            application_id=grant.application_id,
        )
        if revoked:
            log.info(
                "grant %s of %s/%s revoked by %s",
                grant_id, grant.tenant_id, grant.application_id, grant.subject,
            )  # fmt: skip
        scope = f"tenant {grant.tenant_id!r}, application {grant.application_id!r}"
        return JSONResponse(
            {
                "grant_id": grant_id,
                "tenant_id": grant.tenant_id,
                "application_id": grant.application_id,
                "revoked": revoked,
                "message": (
                    f"grant {grant_id} of {scope} is revoked"
                    + ("" if revoked else " (it already was)")
                    + ": requests under it are refused from now on. A grant of another"
                    " tenant or application is not affected."
                ),
            }
        )

    return router


def _encode_cursor(after: Cursor | None) -> str | None:
    if after is None:
        return None
    text = json.dumps(list(after), separators=(",", ":"))
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


def _decode_cursor(cursor: str | None) -> Cursor | None:
    if cursor is None or cursor == "":
        return None
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        value = json.loads(raw)
    except (binascii.Error, ValueError):
        value = None
    if not isinstance(value, list):
        raise WorkloadError(
            ErrorCode.WORKLOAD_INVALID,
            "cursor: not a cursor this server answered",
            {"fields": ["cursor"]},
        )
    return tuple(value)  # WorkloadStore.page checks its parts
