"""Workers' routes: claim work (or long-poll for it), then act on it under the claim.

Each route on one workload needs ``workload:claim`` on it and makes one scoped store call:
work outside the grant's scope is answered as missing, and the claim's fence (whether this
worker holds the claim it names, under the current fencing token) is the store's to check.

Route functions have no docstrings (``# noqa: D103``): FastAPI would publish one as the
operation's OpenAPI description; each route's ``summary`` says what it does.
"""

import asyncio
import contextlib
import functools
import time

from fastapi import APIRouter, Request, Response
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse

from feltdb.auth.policy import authorize_worker, claim_filter, worker_name
from feltdb.server.bodies import (
    CheckpointBody,
    ClaimBody,
    ClaimNextBody,
    CompleteBody,
    ContextBody,
    FailBody,
    FenceBody,
    HeartbeatBody,
    StateAnswer,
    state_answer,
)
from feltdb.server.openapi import AUTH, WITH_BODY
from feltdb.server.openapi import answers as declared
from feltdb.server.routes.deps import PREFIX, Auth, Now, State, Store, WorkloadId
from feltdb.work.inputs import DEFAULT_LEASE_MS
from feltdb.work.models import (
    WorkloadCheckpoint,
    WorkloadClaim,
    WorkloadExecutionContext,
    WorkloadResult,
)

RECHECK_S = 0.25
"""A long-poll also looks again this often, for work another server committed (its
commits do not wake this one) or work whose ``next_attempt_at`` arrived."""

router = APIRouter(prefix=PREFIX)


@router.post(
    "/claims",
    summary="Claim the next eligible workload (204 when none); long-polls up to wait_ms",
    responses={
        **declared(WorkloadClaim, *AUTH, 413, 422),
        204: {"description": "No claimable work (within wait_ms)"},
    },
)
async def claim_next(  # noqa: D103
    caller: Auth, state: State, request: Request, body: ClaimNextBody | None = None
) -> Response:
    grant = caller.grant
    options = body if body is not None else ClaimNextBody()
    eligible = claim_filter(grant, options.capabilities, options.definitions)
    look = functools.partial(
        state.store.claim_next,
        grant.tenant_id,
        grant.application_id,
        worker_name(grant.subject),
        eligible.capabilities,
        lease_ms=options.lease_ms,
        definitions=eligible.definitions,
        environments=eligible.environments,
    )
    state.wakeup.bind(asyncio.get_running_loop())
    deadline = time.monotonic() + options.wait_ms / 1000
    while True:
        signal = state.wakeup.signal()  # before looking: a commit meanwhile is not missed
        claim = await run_in_threadpool(look, now=state.clock())
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
    responses=declared(WorkloadClaim, *WITH_BODY, 425),
)
def claim(  # noqa: D103
    caller: Auth, store: Store, now: Now, workload_id: WorkloadId, body: ClaimBody | None = None
) -> JSONResponse:
    worker = authorize_worker(caller.grant, workload_id)
    lease_ms = body.lease_ms if body is not None else DEFAULT_LEASE_MS
    granted = store.claim(
        workload_id, worker, caller.grant.capabilities, now, lease_ms, scope=caller.scope
    )
    return JSONResponse(granted.to_json())


@router.post(
    "/workloads/{workload_id}/start",
    status_code=204,
    summary="Start the attempt",
    responses=declared(None, *WITH_BODY),
)
def start(  # noqa: D103
    caller: Auth, store: Store, now: Now, workload_id: WorkloadId, body: FenceBody
) -> Response:
    worker = authorize_worker(caller.grant, workload_id)
    store.start(workload_id, body.claim_id, worker, body.fencing_token, now, scope=caller.scope)
    return Response(status_code=204)


@router.post(
    "/workloads/{workload_id}/heartbeat",
    summary="Extend the lease",
    responses=declared(WorkloadClaim, *WITH_BODY),
)
def heartbeat(  # noqa: D103
    caller: Auth, store: Store, now: Now, workload_id: WorkloadId, body: HeartbeatBody
) -> JSONResponse:
    worker = authorize_worker(caller.grant, workload_id)
    extended = store.heartbeat(
        workload_id, body.claim_id, worker, body.fencing_token, now, body.extend_ms,
        scope=caller.scope,
    )  # fmt: skip
    return JSONResponse(extended.to_json())


@router.post(
    "/workloads/{workload_id}/context",
    summary="The execution context",
    responses=declared(WorkloadExecutionContext, *WITH_BODY),
)
def context(  # noqa: D103
    caller: Auth, store: Store, now: Now, workload_id: WorkloadId, body: ContextBody
) -> JSONResponse:
    worker = authorize_worker(caller.grant, workload_id)
    found = store.execution_context(
        workload_id, body.claim_id, worker, body.fencing_token, now, body.secret_references,
        scope=caller.scope,
    )  # fmt: skip
    return JSONResponse(found.to_json())


@router.post(
    "/workloads/{workload_id}/checkpoint",
    summary="Commit progress",
    responses=declared(WorkloadCheckpoint, *WITH_BODY),
)
def checkpoint(  # noqa: D103
    caller: Auth, store: Store, now: Now, workload_id: WorkloadId, body: CheckpointBody
) -> JSONResponse:
    worker = authorize_worker(caller.grant, workload_id)
    saved = store.checkpoint(
        workload_id, body.claim_id, worker, body.fencing_token, body.state, now,
        scope=caller.scope,
    )  # fmt: skip
    return JSONResponse(saved.to_json())


@router.post(
    "/workloads/{workload_id}/complete",
    summary="Record the result",
    responses=declared(WorkloadResult, *WITH_BODY),
)
def complete(  # noqa: D103
    caller: Auth, store: Store, now: Now, workload_id: WorkloadId, body: CompleteBody
) -> JSONResponse:
    worker = authorize_worker(caller.grant, workload_id)
    result = store.complete(
        workload_id, body.claim_id, worker, body.fencing_token, body.result_id, body.output,
        body.artifacts, body.schema_version, now, scope=caller.scope,
    )  # fmt: skip
    return JSONResponse(result.to_json())


@router.post(
    "/workloads/{workload_id}/fail",
    summary="Report the attempt failed",
    responses=declared(StateAnswer, *WITH_BODY),
)
def fail(  # noqa: D103
    caller: Auth, store: Store, now: Now, workload_id: WorkloadId, body: FailBody
) -> JSONResponse:
    worker = authorize_worker(caller.grant, workload_id)
    state = store.fail(
        workload_id, body.claim_id, worker, body.fencing_token, body.kind, body.error, now,
        body.effect, scope=caller.scope,
    )  # fmt: skip
    return JSONResponse(state_answer(workload_id, state))


@router.post(
    "/workloads/{workload_id}/confirm-cancel",
    status_code=204,
    summary="Confirm a requested cancellation",
    responses=declared(None, *WITH_BODY),
)
def confirm_cancel(  # noqa: D103
    caller: Auth, store: Store, now: Now, workload_id: WorkloadId, body: FenceBody
) -> Response:
    worker = authorize_worker(caller.grant, workload_id)
    store.confirm_cancel(
        workload_id, body.claim_id, worker, body.fencing_token, now, scope=caller.scope
    )
    return Response(status_code=204)
