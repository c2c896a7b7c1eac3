"""The dashboard's actions: cancel, retry (one or many), approve or reject, verify the
audit chain. Each is a form post that must carry its session's form token
(:func:`~feltdb.server.ui.viewer.check_form`) and is decided by the same
:class:`~feltdb.work.authority.Authority` call as its API twin, with the viewer's grant
and scope: a page that offered no button is no way around the policy (a forged post is
refused ``403``).

After a cancel, a retry or a decision the browser is redirected (303) to a page that shows
what it did, so a reload does not post it twice. What could not be done is said on the page
it was posted from, answered to the post itself, as are a retry of many dead letters (its
page lists each outcome) and a verification: reloading those posts again, which retries
nothing twice (re-armed work is no longer a dead letter) and verifies once more.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Final, TypeVar
from urllib.parse import quote

from fastapi import APIRouter, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import RedirectResponse, Response

from feltdb.errors import ErrorCode, WorkloadError
from feltdb.records.workload import ApprovalDecision
from feltdb.server.errors import as_told_to_clients, status_for
from feltdb.server.routes.deps import Caller, ServerState
from feltdb.server.ui.pages import approvals_page, audit_page, dead_letters_page
from feltdb.server.ui.render import UI_HEADERS, instant
from feltdb.server.ui.routing import PageRoute
from feltdb.server.ui.viewer import Viewer, check_form, field, form_of, server_of, viewer_of
from feltdb.server.verification import verify_chain
from feltdb.work import inputs
from feltdb.work.authority import Authority
from feltdb.work.events import approval_expired
from feltdb.work.states import ApprovalOutcome, WorkloadState

router = APIRouter(prefix="/ui", include_in_schema=False, route_class=PageRoute)

MAX_RETRIED: Final = 500
"""The most dead letters one post retries (a page's worth)."""
T = TypeVar("T")


async def _posted(request: Request) -> tuple[Viewer, dict[str, list[str]]]:
    """The post's verified session and its form, whose token it checked."""
    form = await form_of(request)
    viewer = await run_in_threadpool(viewer_of, request)
    check_form(request, viewer, form)
    return viewer, form


async def _acting(
    request: Request, workload_id: str
) -> tuple[Viewer, dict[str, list[str]], str, Authority]:
    """:func:`_posted`, for an action on ``workload_id`` (checked): and the viewer's
    authority, which decides what it may do as it decides for the API's twin.
    """
    viewer, form = await _posted(request)
    workload_id = inputs.identifier(workload_id, "workload_id")
    return viewer, form, workload_id, viewer.caller.authority(server_of(request).store)


def _redirect(path: str) -> RedirectResponse:
    return RedirectResponse(path, status_code=303, headers=UI_HEADERS)


def _workload_path(workload_id: str) -> str:
    return "/ui/workloads/" + quote(workload_id, safe="")


async def _blocking(call: Callable[[], T]) -> T:
    return await run_in_threadpool(call)


@router.post("/workloads/{workload_id}/cancel")
async def cancel(request: Request, workload_id: str) -> Response:  # noqa: D103
    _, _, workload_id, acting = await _acting(request, workload_id)
    clock = server_of(request).clock
    after = await _blocking(lambda: acting.cancel(workload_id, clock()))
    done = (
        "cancellation_requested" if after is WorkloadState.CANCELLATION_REQUESTED else "cancelled"
    )
    return _redirect(f"{_workload_path(workload_id)}?done={done}")


def _reason(form: dict[str, list[str]], required: str) -> str:
    """The form's reason, which ``required`` explains the need of.

    Raises:
        WorkloadError: ``WORKLOAD_INVALID`` when it is missing, blank or too long.
    """
    reason = inputs.reason(field(form, "reason"))
    if reason is None:
        raise inputs.invalid("reason", required)
    return reason


@router.post("/workloads/{workload_id}/retry")
async def retry(request: Request, workload_id: str) -> Response:  # noqa: D103
    _, form, workload_id, acting = await _acting(request, workload_id)
    clock = server_of(request).clock
    reason = _reason(form, "say why it is retried (it is recorded with the retry)")
    await _blocking(lambda: acting.retry(workload_id, reason, clock()))
    return _redirect(f"{_workload_path(workload_id)}?done=retried")


@router.post("/approvals/{workload_id}/decision")
async def decide(request: Request, workload_id: str) -> Response:  # noqa: D103
    viewer, form, workload_id, acting = await _acting(request, workload_id)
    caller, state = viewer.caller, server_of(request)
    grant = caller.grant
    outcome = field(form, "outcome")
    if outcome not in (ApprovalOutcome.APPROVED.value, ApprovalOutcome.REJECTED.value):
        raise inputs.invalid("outcome", "must be approved or rejected")
    verdict = ApprovalOutcome(outcome)
    input_hash = inputs.identifier(field(form, "input_hash"), "input_hash")
    reason = inputs.reason(field(form, "reason"))
    if verdict is ApprovalOutcome.REJECTED and reason is None:
        return await _inbox(request, viewer, 422, f"{workload_id} was not rejected: say why.")

    def decide_it() -> tuple[ApprovalDecision, bool]:
        return acting.decide(workload_id, verdict, reason, input_hash, state.clock())

    try:
        decision, replayed = await _blocking(decide_it)
    except WorkloadError as error:
        problem = await _blocking(partial(_undecided, state, caller, workload_id, error))
        if problem is None:
            raise
        return await _inbox(request, viewer, status_for(error), problem)
    if replayed and decision.decided_by != grant.subject:
        return await _inbox(
            request, viewer, 409,
            f"{workload_id} was already {decision.outcome.value} by {decision.decided_by} at "
            f"{instant(decision.decided_at)}: your decision was not recorded.",
        )  # fmt: skip
    # The page reads the decision back from the store: `outcome` only names it for the eye.
    return _redirect(f"/ui/approvals?decided={quote(workload_id, safe='')}&outcome={verdict}")


async def _inbox(request: Request, viewer: Viewer, status_code: int, problem: str) -> Response:
    """The approval inbox, saying why the decision just posted was not recorded."""
    return await _blocking(
        lambda: approvals_page(request, viewer, status_code=status_code, problem=problem)
    )


def _undecided(
    state: ServerState, caller: Caller, workload_id: str, error: WorkloadError
) -> str | None:
    """What the inbox says of a decision the store refused (``None``: not a refusal of
    this decision, answered as any other): who decided first, or what became of the work
    (read again: an approval that expired was timed out by the maintenance pass, which the
    refusal itself does not say).
    """
    details = error.details or {}
    if error.code == ErrorCode.WORKLOAD_APPROVAL_DECIDED:
        by = details.get("decided_by") or {}
        who = f"{by.get('kind', '?')}:{by.get('id', '?')}"
        return (
            f"{workload_id} was already {details.get('outcome')} by {who} at "
            f"{instant(details.get('decided_at'))}: your decision was not recorded."
        )
    if error.code == ErrorCode.WORKLOAD_TIMED_OUT:
        return f"The approval of {workload_id} expired before your decision: nothing was decided."
    if error.code == ErrorCode.WORKLOAD_APPROVAL_STALE:
        return (
            f"{workload_id}'s input is not the input this page showed: nothing was decided. "
            "Review it again."
        )
    if error.code == ErrorCode.WORKLOAD_APPROVAL_NOT_ACTIONABLE:
        now = state.store.get(workload_id, scope=caller.scope)
        # The approval's deadline passed: timed out, then retried or dead-lettered by its
        # policy, whichever state that left it in.
        expired = approval_expired(now)
        if expired is not None:
            return (
                f"The approval of {workload_id} expired at {instant(expired.at)}, before "
                f"your decision: nothing was decided (it is {now.state.value} now)."
            )
        return (
            f"{workload_id} is {now.state.value} now, no longer awaiting approval: nothing "
            "was decided."
        )
    if error.code in (ErrorCode.WORKLOAD_APPROVER_NOT_PERMITTED, ErrorCode.WORKLOAD_CONFLICT):
        return f"{workload_id} was not decided: {error.message}."
    return None


@router.post("/dead-letters/retry")
async def retry_dead_letters(request: Request) -> Response:  # noqa: D103
    viewer, form = await _posted(request)
    state = server_of(request)
    acting = viewer.caller.authority(state.store)
    chosen = form.get("workload_id", [])
    if not chosen:
        raise inputs.invalid("workload_id", "choose at least one dead letter to retry")
    if len(chosen) > MAX_RETRIED:
        raise inputs.invalid("workload_id", f"at most {MAX_RETRIED} at once")
    workload_ids = [inputs.identifier(w, "workload_id") for w in dict.fromkeys(chosen)]
    reason = _reason(form, "say why they are retried (it is recorded with each retry)")

    def retry_each() -> list[tuple[str, str | None]]:
        outcomes: list[tuple[str, str | None]] = []
        for workload_id in workload_ids:
            try:
                acting.retry(workload_id, reason, state.clock())
            except WorkloadError as error:
                if error.code == ErrorCode.WORKLOAD_STORAGE_FAILURE:
                    raise
                told = as_told_to_clients(error, state.store.db.target)
                outcomes.append((workload_id, told.message))
            else:
                outcomes.append((workload_id, None))
        return outcomes

    outcomes = await _blocking(retry_each)
    return await _blocking(lambda: dead_letters_page(request, viewer, outcomes=outcomes))


@router.post("/audit/verify")
async def verify(request: Request) -> Response:  # noqa: D103
    viewer, _ = await _posted(request)
    acting = viewer.caller.authority(server_of(request).store)
    report = await _blocking(lambda: verify_chain(acting))
    return await _blocking(lambda: audit_page(request, viewer, report=report))
