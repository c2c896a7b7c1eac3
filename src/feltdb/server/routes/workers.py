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
from collections.abc import Callable, Sequence
from typing import TypeVar

from fastapi import APIRouter, Request, Response
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse

from feltdb.errors import ErrorCode, WorkloadError
from feltdb.records.workload import (
    WorkloadCheckpoint,
    WorkloadClaim,
    WorkloadExecutionContext,
    WorkloadResult,
)
from feltdb.server.batches import answered
from feltdb.server.bodies import (
    CheckpointBody,
    ClaimBatchAnswer,
    ClaimBody,
    ClaimManyBody,
    ClaimNextBody,
    CompleteBody,
    CompletionBatchAnswer,
    CompletionBatchBody,
    ContextBody,
    FailBody,
    FenceBody,
    HeartbeatBatchAnswer,
    HeartbeatBatchBody,
    HeartbeatBody,
    HeartbeatItem,
    StateAnswer,
    state_answer,
)
from feltdb.server.openapi import AUTH, BATCH, WITH_BODY
from feltdb.server.openapi import answers as declared
from feltdb.server.routes.deps import (
    PREFIX,
    Acting,
    Now,
    ServerState,
    State,
    WorkloadId,
)
from feltdb.work import worker_authority
from feltdb.work.claimed import Claims
from feltdb.work.disclosure import disclosed
from feltdb.work.inputs import DEFAULT_LEASE_MS
from feltdb.work.store import WorkloadStore
from feltdb.work.worker_authority import claim_choice

Found = TypeVar("Found")

RECHECK_S = 0.25
"""A long-poll also looks again this often, for work another server committed (its
commits do not wake this one) or work whose ``next_attempt_at`` arrived."""

router = APIRouter(prefix=PREFIX)

_RATE_RETRY_AFTER = {
    "description": "Seconds until work held back by a rate limit may start, when such work "
    "was all the claim found",
    "schema": {"type": "integer", "minimum": 1},
}


@router.post(
    "/claims",
    summary="Claim the next eligible workload (204 when none); long-polls up to wait_ms",
    responses={
        **declared(WorkloadClaim, *AUTH, 413, 422),
        204: {
            "description": "No claimable work (within wait_ms)",
            "headers": {"Retry-After": _RATE_RETRY_AFTER},
        },
    },
)
async def claim_next(  # noqa: D103
    acting: Acting, state: State, request: Request, body: ClaimNextBody | None = None
) -> Response:
    options = body if body is not None else ClaimNextBody()
    eligible = claim_choice(acting, options.capabilities, options.definitions)
    look = functools.partial(
        worker_authority.claim_work, acting, eligible, 1, lease_ms=options.lease_ms, start=False
    )
    claimed = await _long_poll(state, request, options.wait_ms, look)
    if not claimed:
        return Response(status_code=204, headers=_next_start(claimed))
    return JSONResponse(claimed[0].claim.to_json())


def _next_start(claimed: Claims) -> dict[str, str]:
    """``Retry-After`` for a claim that found nothing but work held back by a rate limit:
    the seconds until such work may start (none otherwise).
    """
    wait = claimed.next_start_s
    return {} if wait is None else {"Retry-After": str(max(1, wait))}


async def _long_poll(
    state: ServerState, request: Request, wait_ms: int, look: Callable[..., Found]
) -> Found:
    """``look(now=...)``'s first answer that found something, waiting up to ``wait_ms``
    for work to become claimable (woken by this server's commits, and looking again every
    :data:`RECHECK_S` for other writers'); its last answer when nothing was found.
    """
    state.wakeup.bind(asyncio.get_running_loop())
    deadline = time.monotonic() + wait_ms / 1000
    while True:
        signal = state.wakeup.signal()  # before looking: a commit meanwhile is not missed
        found = await run_in_threadpool(look, now=state.clock())
        if found:
            return found
        remaining = deadline - time.monotonic()
        if remaining <= 0 or await request.is_disconnected():
            return found
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(signal.wait(), min(remaining, RECHECK_S))


@router.post(
    "/workloads/{workload_id}/claim",
    summary="Claim a given workload",
    responses=declared(WorkloadClaim, *WITH_BODY, 425),
)
def claim(  # noqa: D103
    acting: Acting, now: Now, workload_id: WorkloadId, body: ClaimBody | None = None
) -> JSONResponse:
    lease_ms = body.lease_ms if body is not None else DEFAULT_LEASE_MS
    granted = acting.claim(workload_id, acting.held, now, lease_ms)
    return JSONResponse(granted.to_json())


@router.post(
    "/workloads/{workload_id}/start",
    status_code=204,
    summary="Start the attempt",
    responses=declared(None, *WITH_BODY),
)
def start(  # noqa: D103
    acting: Acting, now: Now, workload_id: WorkloadId, body: FenceBody
) -> Response:
    acting.start(workload_id, body.claim_id, body.fencing_token, now)
    return Response(status_code=204)


@router.post(
    "/workloads/{workload_id}/heartbeat",
    summary="Extend the lease",
    responses=declared(WorkloadClaim, *WITH_BODY),
)
def heartbeat(  # noqa: D103
    acting: Acting, now: Now, workload_id: WorkloadId, body: HeartbeatBody
) -> JSONResponse:
    extended = acting.heartbeat(workload_id, body.claim_id, body.fencing_token, now, body.extend_ms)
    return JSONResponse(extended.to_json())


@router.post(
    "/workloads/{workload_id}/context",
    summary="The execution context",
    responses=declared(WorkloadExecutionContext, *WITH_BODY),
)
def context(  # noqa: D103
    acting: Acting, now: Now, workload_id: WorkloadId, body: ContextBody
) -> JSONResponse:
    found = acting.execution_context(
        workload_id, body.claim_id, body.fencing_token, now, body.secret_references
    )
    return JSONResponse(found.to_json())


@router.post(
    "/workloads/{workload_id}/checkpoint",
    summary="Commit progress",
    responses=declared(WorkloadCheckpoint, *WITH_BODY),
)
def checkpoint(  # noqa: D103
    acting: Acting, now: Now, workload_id: WorkloadId, body: CheckpointBody
) -> JSONResponse:
    saved = acting.checkpoint(workload_id, body.claim_id, body.fencing_token, body.state, now)
    return JSONResponse(saved.to_json())


@router.post(
    "/workloads/{workload_id}/complete",
    summary="Record the result",
    responses=declared(WorkloadResult, *WITH_BODY),
)
def complete(  # noqa: D103
    acting: Acting, now: Now, workload_id: WorkloadId, body: CompleteBody
) -> JSONResponse:
    recorded = (body.result_id, body.output, body.artifacts, body.schema_version)
    result = acting.complete(workload_id, body.claim_id, body.fencing_token, recorded, now)
    return JSONResponse(result.to_json())


@router.post(
    "/workloads/{workload_id}/fail",
    summary="Report the attempt failed",
    responses=declared(StateAnswer, *WITH_BODY),
)
def fail(  # noqa: D103
    acting: Acting, now: Now, workload_id: WorkloadId, body: FailBody
) -> JSONResponse:
    failure = (body.kind, body.error, body.effect)
    state = acting.fail(workload_id, body.claim_id, body.fencing_token, failure, now)
    return JSONResponse(state_answer(workload_id, state))


@router.post(
    "/workloads/{workload_id}/confirm-cancel",
    status_code=204,
    summary="Confirm a requested cancellation",
    responses=declared(None, *WITH_BODY),
)
def confirm_cancel(  # noqa: D103
    acting: Acting, now: Now, workload_id: WorkloadId, body: FenceBody
) -> Response:
    acting.confirm_cancel(workload_id, body.claim_id, body.fencing_token, now)
    return Response(status_code=204)


# ---------------------------------------------------------------------- batches
# One store call each. The token is checked for the whole request (``workload:claim`` in
# its application: 401/403 refuse it all); each item's workload is then authorized as the
# single route authorizes it, and refused on its own (403, or 404 outside the scope).


@router.post(
    "/batches/claims",
    summary="Claim (and with start, start) up to limit eligible workloads; none: []",
    responses=declared(ClaimBatchAnswer, *BATCH),
)
async def claim_many(  # noqa: D103
    acting: Acting, state: State, request: Request, body: ClaimManyBody
) -> JSONResponse:
    eligible = claim_choice(acting, body.capabilities, body.definitions)
    look = functools.partial(
        worker_authority.claim_work, acting, eligible, body.limit,
        lease_ms=body.lease_ms, start=body.start,
    )  # fmt: skip
    claimed = await _long_poll(state, request, body.wait_ms, look)
    if not claimed:
        request.state.idle_poll = True  # the access log's: not news (see metrics)
    items = [{"claim": w.claim.to_json(), "workload": disclosed(w.workload)} for w in claimed]
    return JSONResponse({"items": items}, headers=_next_start(claimed) if not claimed else None)


def _within_the_lease_cap(store: WorkloadStore, items: Sequence[HeartbeatItem]) -> None:
    """Refuse the whole request when an item asks for more than the store's lease cap: the
    schema declares the cap (a bound of the body's shape), so no such body is accepted.
    """
    over = [f"items.{n}.extend_ms" for n, i in enumerate(items) if i.extend_ms > store.max_lease_ms]
    if over:
        raise WorkloadError(
            ErrorCode.WORKLOAD_INVALID,
            f"{over[0]}: must be at most {store.max_lease_ms} (the server's lease cap)",
            {"fields": over},
        )


@router.post(
    "/batches/completions",
    summary="Record results, each answered as POST /v1/workloads/{id}/complete answers it",
    responses=declared(CompletionBatchAnswer, *BATCH),
)
def complete_many(  # noqa: D103
    acting: Acting, now: Now, body: CompletionBatchBody
) -> JSONResponse:
    acting.as_worker()
    results = worker_authority.complete_each(acting, body.items, now)
    return answered(results, "result", lambda result: (200, result.to_json()))


@router.post(
    "/batches/heartbeats",
    summary="Extend leases, each answered as POST /v1/workloads/{id}/heartbeat answers it",
    responses=declared(HeartbeatBatchAnswer, *BATCH),
)
def heartbeat_many(  # noqa: D103
    acting: Acting, now: Now, body: HeartbeatBatchBody
) -> JSONResponse:
    acting.as_worker()
    _within_the_lease_cap(acting.store, body.items)
    renewed = worker_authority.renew_each(acting, body.items, now)
    return answered(
        renewed,
        "claim",
        lambda renewal: (200, renewal.claim.to_json()),
        lambda renewal: {"cancellation_requested": renewal.cancellation_requested},
    )
