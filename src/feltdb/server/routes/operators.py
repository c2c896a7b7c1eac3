"""Operators' and approvers' routes: re-arm failed work, decide work awaiting approval,
and revoke grants of the tenant's application.

Route functions have no docstrings (``# noqa: D103``): FastAPI would publish one as the
operation's OpenAPI description; each route's ``summary`` says what it does.
"""

import logging
from typing import Annotated

from fastapi import APIRouter, Path
from fastapi.responses import JSONResponse

from feltdb.fields import MAX_ID_CHARS
from feltdb.records.workload import Workload
from feltdb.server.bodies import (
    DecisionAnswer,
    DecisionBody,
    RetryBody,
    RevocationList,
    RevokeAnswer,
    RevokeBody,
    revoke_answer,
)
from feltdb.server.fields import NOT_BLANK
from feltdb.server.openapi import AUTH, WITH_BODY
from feltdb.server.openapi import answers as declared
from feltdb.server.routes.deps import PREFIX, Acting, Auth, Now, State, WorkloadId
from feltdb.work.disclosure import disclosed

log = logging.getLogger("feltdb.server")

router = APIRouter(prefix=PREFIX)

GrantId = Annotated[str, Path(min_length=1, max_length=MAX_ID_CHARS, pattern=NOT_BLANK)]


@router.post(
    "/workloads/{workload_id}/retry",
    summary="Re-arm failed or dead-lettered work",
    responses=declared(Workload, *WITH_BODY),
)
def retry(  # noqa: D103
    acting: Acting, now: Now, workload_id: WorkloadId, body: RetryBody | None = None
) -> JSONResponse:
    reason = body.reason if body is not None else None
    return JSONResponse(disclosed(acting.retry(workload_id, reason, now)))


@router.post(
    "/workloads/{workload_id}/decision",
    summary="Approve or reject",
    responses=declared(DecisionAnswer, *WITH_BODY),
)
def decide(  # noqa: D103
    acting: Acting, now: Now, workload_id: WorkloadId, body: DecisionBody
) -> JSONResponse:
    decision, replayed = acting.decide(workload_id, body.outcome, body.reason, body.input_hash, now)
    return JSONResponse({"decision": decision.to_json(), "replayed": replayed})


@router.get(
    "/grants/revocations",
    summary="The grants revoked in this tenant and application",
    responses=declared(RevocationList, *AUTH),
)
def revocations(acting: Acting) -> JSONResponse:  # noqa: D103
    return JSONResponse({"items": acting.revocations()})


@router.post(
    "/grants/{grant_id}/revoke",
    summary="Revoke a grant of this tenant and application",
    responses=declared(RevokeAnswer, *AUTH, 404, 422),
    description="Idempotent: `revoked` is false when it already was revoked. The"
    " revocation is scoped to the caller's tenant and application, as the answer says."
    " An id feltdb never minted is refused (404) unless the body says `force`.",
)
def revoke(  # noqa: D103
    caller: Auth,
    acting: Acting,
    state: State,
    now: Now,
    grant_id: GrantId,
    body: RevokeBody | None = None,
) -> JSONResponse:
    grant = caller.grant
    revoked = acting.revoke(grant_id, now, force=body is not None and body.force)
    # Committed (now, or by an earlier revocation): in force on this server at once, not
    # within the bound of its verified tokens (feltdb.auth.verified).
    state.forget_grant(grant_id, tenant_id=grant.tenant_id, application_id=grant.application_id)
    if revoked:
        log.info(
            "grant %s of %s/%s revoked by %s",
            grant_id, grant.tenant_id, grant.application_id, grant.subject,
        )  # fmt: skip
    return JSONResponse(revoke_answer(grant_id, grant.tenant_id, grant.application_id, revoked))
