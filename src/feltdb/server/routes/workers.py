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

from feltdb.auth.policy import CLAIM, authorize, authorize_worker, claim_filter, worker_name
from feltdb.errors import ErrorCode, WorkloadError
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
    CompletionItem,
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
    Auth,
    Caller,
    Now,
    ServerState,
    State,
    Store,
    WorkloadId,
)
from feltdb.work.batches import Completion, Heartbeat, per_item
from feltdb.work.disclosure import disclosed
from feltdb.work.inputs import DEFAULT_LEASE_MS
from feltdb.work.models import (
    WorkloadCheckpoint,
    WorkloadClaim,
    WorkloadExecutionContext,
    WorkloadResult,
)
from feltdb.work.store import WorkloadStore

Item = TypeVar("Item", CompletionItem, HeartbeatItem)
Found = TypeVar("Found")
Prepared = TypeVar("Prepared")
Answer = TypeVar("Answer")

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
    claim = await _long_poll(state, request, options.wait_ms, look)
    return Response(status_code=204) if claim is None else JSONResponse(claim.to_json())


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
    caller: Auth, state: State, request: Request, body: ClaimManyBody
) -> JSONResponse:
    grant = caller.grant
    eligible = claim_filter(grant, body.capabilities, body.definitions)
    look = functools.partial(
        state.store.claim_work, grant.tenant_id, grant.application_id,
        worker_name(grant.subject), eligible.capabilities, body.limit,
        lease_ms=body.lease_ms, definitions=eligible.definitions,
        environments=eligible.environments, start=body.start,
    )  # fmt: skip
    claimed = await _long_poll(state, request, body.wait_ms, look)
    items = [{"claim": w.claim.to_json(), "workload": disclosed(w.workload)} for w in claimed]
    return JSONResponse({"items": items})


def _as_worker(caller: Caller) -> None:
    """Refuse the whole request unless its grant holds ``workload:claim`` in its own
    tenant and application (each item's workload is authorized on its own).
    """
    authorize(caller.grant, CLAIM, caller.grant.tenant_id, caller.grant.application_id)


def _each_workload(
    caller: Caller,
    items: Sequence[Item],
    make: Callable[[Item, str], Prepared],
    run: Callable[[list[Prepared]], Sequence[Answer | WorkloadError]],
) -> list[Answer | WorkloadError]:
    """Authorize each item's workload as the single route does (refusing that item
    alone), ``make`` the store's item as the worker the grant names, and ``run`` the
    authorized ones in one store call.
    """
    grant = caller.grant
    return per_item(items, lambda item: make(item, authorize_worker(grant, item.workload_id)), run)


def _completion(item: CompletionItem, worker: str) -> Completion:
    return Completion(
        item.workload_id, item.claim_id, worker, item.fencing_token, item.result_id,
        item.output, item.artifacts, item.schema_version,
    )  # fmt: skip


def _heartbeat(item: HeartbeatItem, worker: str) -> Heartbeat:
    return Heartbeat(item.workload_id, item.claim_id, worker, item.fencing_token, item.extend_ms)


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
    caller: Auth, store: Store, now: Now, body: CompletionBatchBody
) -> JSONResponse:
    _as_worker(caller)
    results = _each_workload(
        caller,
        body.items,
        _completion,
        lambda ready: store.complete_many(ready, now, scope=caller.scope),
    )
    return answered(results, "result", lambda result: (200, result.to_json()))


@router.post(
    "/batches/heartbeats",
    summary="Extend leases, each answered as POST /v1/workloads/{id}/heartbeat answers it",
    responses=declared(HeartbeatBatchAnswer, *BATCH),
)
def heartbeat_many(  # noqa: D103
    caller: Auth, store: Store, now: Now, body: HeartbeatBatchBody
) -> JSONResponse:
    _as_worker(caller)
    _within_the_lease_cap(store, body.items)
    renewed = _each_workload(
        caller,
        body.items,
        _heartbeat,
        lambda ready: store.renew_leases(ready, now, scope=caller.scope),
    )
    return answered(
        renewed,
        "claim",
        lambda renewal: (200, renewal.claim.to_json()),
        lambda renewal: {"cancellation_requested": renewal.cancellation_requested},
    )
