"""Requesters' routes: admit work, read it, cancel it.

Route functions have no docstrings (``# noqa: D103``): FastAPI would publish one as the
operation's OpenAPI description; each route's ``summary`` says what it does.
"""

from typing import Annotated, Any

from fastapi import APIRouter, Body, Header
from fastapi.responses import JSONResponse

from feltdb.errors import ErrorCode, WorkloadError
from feltdb.fields import MAX_ID_CHARS
from feltdb.records.workload import Workload
from feltdb.server.batches import answered
from feltdb.server.bodies import (
    AdmissionBatchAnswer,
    AdmissionBatchBody,
    EmptyBody,
    StateAnswer,
    state_answer,
)
from feltdb.server.fields import integers_as_declared
from feltdb.server.openapi import (
    AUTH,
    BATCH,
    ON_WORKLOAD,
    SUBMISSION_SCHEMA,
    SUBMIT_BODY,
    WITH_BODY,
)
from feltdb.server.openapi import answers as declared
from feltdb.server.routes.deps import (
    PREFIX,
    Acting,
    Auth,
    Caller,
    Now,
    ServerState,
    State,
    WorkloadId,
)
from feltdb.work.batches import per_item
from feltdb.work.disclosure import disclosed
from feltdb.work.models import CreateWorkload
from feltdb.work.submission import SUPPLIED_BY_THE_AUTHORITY, admission_request

router = APIRouter(prefix=PREFIX)


def submitted_fields(body: dict[str, Any]) -> dict[str, Any]:
    """The submission ``body`` as the schema reads it (whole-number floats the schema
    declares integers are integers), refusing the fields the token and the server supply.

    Raises:
        WorkloadError: ``WORKLOAD_INVALID`` naming each field of the authority's.
    """
    supplied = sorted(name for name in SUPPLIED_BY_THE_AUTHORITY if name in body)
    if supplied:
        raise WorkloadError(
            ErrorCode.WORKLOAD_INVALID,
            "these fields come from the bearer token and the server, not the body: "
            + ", ".join(supplied),
            {"fields": supplied},
        )
    fields: dict[str, Any] = integers_as_declared(body, SUBMISSION_SCHEMA)
    return fields


IdempotencyKeyHeader = Annotated[
    str | None,
    Header(
        alias="Idempotency-Key",
        min_length=1,
        max_length=MAX_ID_CHARS,
        description="The idempotency key, if the body does not name one (the same if both do)",
    ),
]


def keyed(body: dict[str, Any], key: str) -> dict[str, Any]:
    """``body`` with the ``Idempotency-Key`` header's ``key``: the body's own key, if it
    names one, must be the same.

    Raises:
        WorkloadError: ``WORKLOAD_INVALID`` naming ``idempotency_key`` when the two differ.
    """
    if "idempotency_key" not in body:
        return {**body, "idempotency_key": key}
    named = body["idempotency_key"]
    if isinstance(named, str) and named != key:
        raise WorkloadError(
            ErrorCode.WORKLOAD_INVALID,
            "idempotency_key: the body and the Idempotency-Key header name different keys",
            {"fields": ["Idempotency-Key"]},
        )
    return body  # the same key, or one the submission's own check refuses


@router.post(
    "/workloads",
    status_code=201,
    summary="Admit a workload (200 on a replay)",
    responses={
        **declared(Workload, *WITH_BODY, 425, 429, status=201),
        200: {"model": Workload, "description": "A replay: the workload already admitted"},
    },
    openapi_extra=SUBMIT_BODY,
)
def submit(  # noqa: D103
    caller: Auth,
    acting: Acting,
    state: State,
    body: Annotated[dict[str, Any], Body()],
    key: IdempotencyKeyHeader = None,
) -> JSONResponse:
    acting.as_requester()
    if key is not None and isinstance(body, dict):
        body = keyed(body, key)
    # The store refuses a request whose grant does not cover the new workload's URI.
    workload, created = state.store.admit(admission(caller, state, state.clock(), body))
    return JSONResponse(disclosed(workload), status_code=201 if created else 200)


def admission(caller: Caller, state: ServerState, now: int, body: Any) -> CreateWorkload:
    """The request to admit submission ``body``, as ``caller``: the tenant, the
    application and the requester are the token's, the authorization snapshot its signed
    grant (evidence, signed in its own domain: never the token itself), ``created_at`` now.

    Raises:
        WorkloadError: ``WORKLOAD_INVALID`` for a body that is not a submission.
    """
    if not isinstance(body, dict):
        raise WorkloadError(ErrorCode.WORKLOAD_INVALID, "a submission is a JSON object")
    grant = caller.grant
    return admission_request(
        submitted_fields(body),
        tenant_id=grant.tenant_id,
        application_id=grant.application_id,
        requested_by=grant.subject,
        authorization_snapshot=state.keyring.evidence(grant, caller.key_id),
        created_at=now,
    )


@router.post(
    "/batches/workloads",
    summary="Admit workloads, each answered as POST /v1/workloads answers it",
    responses=declared(AdmissionBatchAnswer, *BATCH),
    description="Each item is decided on its own and answered in its place: 201 or 200 "
    "with the workload, or its refusal's status and error, as POST /v1/workloads answers "
    "it; an item an admission quota refuses is 429 `WORKLOAD_QUOTA_EXCEEDED`, its "
    "`details.retry_after_s` the seconds to wait, and the others are admitted.",
)
def submit_many(  # noqa: D103
    caller: Auth, acting: Acting, state: State, body: AdmissionBatchBody
) -> JSONResponse:
    acting.as_requester()
    now = state.clock()
    admitted = per_item(
        body.items, lambda item: admission(caller, state, now, item), state.store.admit_many
    )
    return answered(
        admitted, "workload", lambda answer: (201 if answer[1] else 200, disclosed(answer[0]))
    )


@router.get(
    "/workloads/{workload_id}",
    summary="Read a committed workload",
    responses=declared(Workload, *AUTH, 404, 422),
)
def read(acting: Acting, workload_id: WorkloadId) -> JSONResponse:  # noqa: D103
    return JSONResponse(disclosed(acting.read(workload_id)))


@router.post(
    "/workloads/{workload_id}/cancel",
    summary="Cancel, or request cancellation",
    responses=declared(StateAnswer, *ON_WORKLOAD),
)
def cancel(  # noqa: D103
    acting: Acting, now: Now, workload_id: WorkloadId, body: EmptyBody | None = None
) -> JSONResponse:
    return JSONResponse(state_answer(workload_id, acting.cancel(workload_id, now)))
