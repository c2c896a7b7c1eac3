"""The dashboard's pages: what a signed-in viewer reads.

Each page reads through the viewer's :class:`~feltdb.work.authority.Authority`, the same
call as its API twin, so it is authorized as that is and reads with the viewer's scope:
the list of workloads and the workers need ``workload:read`` over the application, the
approval inbox ``workload:approve``, the dead letters ``workload:operate``, the audit
``audit:read``; a workload's page is read as ``GET /v1/workloads/{id}`` is. The overview
shows each of its sections only to the grant its list would allow (the counts: the
workloads', the chart: the audit's, the recent dead letters: theirs), and a page offers
only the actions the grant allows (the policy's ``allows*``); an action is authorized
again when posted (:mod:`.actions`).

Route functions have no docstrings (``# noqa: D103``), as the API's routes.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Annotated, Final
from urllib.parse import urlencode

from fastapi import APIRouter, Depends, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from feltdb.auth.policy import (
    APPROVE,
    CANCEL,
    OPERATE,
    allows,
    may_read,
)
from feltdb.errors import ErrorCode, WorkloadError
from feltdb.fields import MAX_ID_CHARS, MAX_SUBJECT_CHARS
from feltdb.records.summary import WorkloadSummary
from feltdb.records.workload import ApprovalDecision, Workload
from feltdb.server.ui import overview as dashboard_overview
from feltdb.server.ui.chart import chart_of
from feltdb.server.ui.render import UI_HEADERS, page
from feltdb.server.ui.retention_view import retention_view
from feltdb.server.ui.routing import PageRoute
from feltdb.server.ui.viewer import Viewer, server_of, viewer_of
from feltdb.work import inputs
from feltdb.work.approvals import may_decide
from feltdb.work.authority import Authority
from feltdb.work.cursors import decode_cursor, encode_cursor
from feltdb.work.deadlines import deadline_instants
from feltdb.work.inputs import Cursor
from feltdb.work.listing import SummaryPage
from feltdb.work.operators import RETRYABLE_BY_OPERATOR
from feltdb.work.search import MAX_QUERY_CHARS, search
from feltdb.work.states import TERMINAL_STATES, WorkloadState
from feltdb.work.store import WorkloadStore

router = APIRouter(prefix="/ui", include_in_schema=False, route_class=PageRoute)

MAX_STATE_CHARS: Final = 40
"""The longest ``state`` filter read (the longest state's name is 22 characters)."""
MAX_CURSOR_CHARS: Final = 1024
"""The longest ``cursor`` read, as the API's lists (``GET /v1/workloads``)."""
MAX_REVISION_DIGITS: Final = 16
"""The longest ``before`` read: a revision is a safe integer (at most 16 digits)."""
PAGE_SIZE: Final = 50
"""Rows a list page shows."""
RECENT_DEAD_LETTERS: Final = 5
MAX_RECHECKED: Final = 200
"""The most recently dead-lettered ids the overview re-reads to find those to show."""
"""Dead letters the overview shows."""

Signed = Annotated[Viewer, Depends(viewer_of)]


def _text(request: Request, name: str, bound: int) -> str | None:
    """A query parameter, stripped (``None``: absent or empty).

    Raises:
        WorkloadError: ``WORKLOAD_INVALID`` past ``bound`` characters.
    """
    value = (request.query_params.get(name) or "").strip()
    if len(value) > bound:
        raise inputs.invalid(name, f"must be at most {bound} characters")
    return value or None


def _state(request: Request) -> WorkloadState | None:
    parsed = inputs.state(_text(request, "state", MAX_STATE_CHARS))
    return None if parsed is None else WorkloadState(parsed)


@router.get("/", response_class=HTMLResponse)
def overview(request: Request, viewer: Signed) -> Response:  # noqa: D103
    state, offers = server_of(request), viewer.offers
    if offers.approvals and not (offers.workloads or offers.dead_letters or offers.audit):
        # An approver's whole dashboard is the inbox: land there, not on an overview of
        # everything the grant may not see.
        return RedirectResponse("/ui/approvals", status_code=303, headers=UI_HEADERS)
    grant, store = viewer.caller.grant, server_of(request).store
    now = state.clock()
    summary = recent = retention = None
    if offers.workloads:
        summary = dashboard_overview.summarize(
            store.db, grant.tenant_id, grant.application_id, viewer.caller.scope
        )
        retention = retention_view(request, store, viewer.caller.scope, now)
    if offers.audit or offers.dead_letters:
        recent = dashboard_overview.recent(store.db, grant.tenant_id, grant.application_id, now)
    throughput = recent.throughput if recent is not None and offers.audit else None
    dead = None
    if recent is not None and offers.dead_letters:
        dead = _still_dead(store, viewer, recent.dead_lettered)
    states = [s for s in WorkloadState if summary is not None and summary.total(s)]
    return page(
        request, "overview.html", viewer, summary=summary, states=states, now=now,
        throughput=throughput, chart=None if throughput is None else chart_of(throughput),
        dead_letters=dead, dead_state=WorkloadState.DEAD_LETTER, retention=retention,
    )  # fmt: skip


def _still_dead(store: WorkloadStore, viewer: Viewer, named: list[str]) -> list[Workload]:
    """Of the work the log says was dead-lettered (newest first), the first
    :data:`RECENT_DEAD_LETTERS` the viewer sees that are dead letters still.
    """
    found: list[Workload] = []
    # Bounded by the ids re-read, not by those the viewer sees: work outside the scope
    # ahead of it does not hide the viewer's own.
    for workload_id in named[:MAX_RECHECKED]:
        try:
            workload = store.get(workload_id, scope=viewer.caller.scope)
        except WorkloadError as error:
            if error.code != ErrorCode.WORKLOAD_NOT_FOUND:
                raise
            continue
        if workload.state is WorkloadState.DEAD_LETTER:
            found.append(workload)
            if len(found) == RECENT_DEAD_LETTERS:
                break
    return found


@router.get("/workloads", response_class=HTMLResponse)
def workloads(request: Request, viewer: Signed) -> HTMLResponse:  # noqa: D103
    acting = viewer.caller.authority(server_of(request).store)
    chosen = _state(request)
    definition = _text(request, "definition", MAX_ID_CHARS)
    if definition is not None:
        definition = inputs.identifier(definition, "definition")
    query = _text(request, "q", MAX_QUERY_CHARS)
    after = decode_cursor(_text(request, "cursor", MAX_CURSOR_CHARS))
    found = search(acting.workload_pages(chosen, definition), query, after, PAGE_SIZE)
    kept = {"state": chosen.value if chosen else None, "definition": definition, "q": query}
    following = encode_cursor(found.after)
    onward = None if following is None else _href("/ui/workloads", {**kept, "cursor": following})
    return page(
        request, "workloads.html", viewer, found=found, states=list(WorkloadState),
        chosen=chosen, definition=definition, query=query, first=after is None,
        first_href=_href("/ui/workloads", kept), next_href=onward,
    )  # fmt: skip


@router.get("/workers", response_class=HTMLResponse)
def workers(request: Request, viewer: Signed) -> HTMLResponse:  # noqa: D103
    state = server_of(request)
    seen = viewer.caller.authority(state.store).workers(state.clock())
    return page(request, "workers.html", viewer, seen=seen)


def _href(path: str, query: dict[str, str | None]) -> str:
    """``path`` with the given query parameters (those that are ``None`` left out)."""
    given = {name: value for name, value in query.items() if value is not None}
    return f"{path}?{urlencode(given)}" if given else path


@router.get("/workloads/{workload_id}", response_class=HTMLResponse)
def workload(request: Request, viewer: Signed, workload_id: str) -> HTMLResponse:  # noqa: D103
    grant, store = viewer.caller.grant, server_of(request).store
    workload_id = inputs.identifier(workload_id, "workload_id")
    found = viewer.caller.authority(store).read(workload_id)
    may_cancel = allows(grant, CANCEL, workload_id) and found.state not in TERMINAL_STATES
    may_retry = allows(grant, OPERATE, workload_id) and found.state in RETRYABLE_BY_OPERATOR
    return page(
        request, "workload.html", viewer, workload=found, deadlines=deadline_instants(found),
        may_cancel=may_cancel and found.state is not WorkloadState.CANCELLATION_REQUESTED,
        may_retry=may_retry,
        may_decide=allows(grant, APPROVE, workload_id) and may_decide(found, grant.subject),
        notice=_notice(request),
    )  # fmt: skip


NOTICES: Final = {
    "cancelled": "Cancelled.",
    "cancellation_requested": "Cancellation requested: its worker is told at its next heartbeat.",
    "retried": "Re-armed: it is READY for a worker again.",
}
"""What a page says after an action redirected to it (by key: no text from the query)."""


def _notice(request: Request) -> str | None:
    return NOTICES.get(request.query_params.get("done", ""))


Listing = Callable[[Authority, Cursor | None, int], SummaryPage]
"""One of the authority's lists (its approvals, its dead letters), as the API lists it."""


def _listed(
    request: Request, viewer: Viewer, listing: Listing
) -> tuple[list[WorkloadSummary], Cursor | None, Cursor | None]:
    """The page of ``listing`` after the request's ``cursor``, read and authorized by the
    viewer's authority as the API's list is: the page, the cursor after it and the one it
    was read after.
    """
    acting = viewer.caller.authority(server_of(request).store)
    after = decode_cursor(_text(request, "cursor", MAX_CURSOR_CHARS))
    items, following = listing(acting, after, PAGE_SIZE)
    return items, following, after


@router.get("/approvals", response_class=HTMLResponse)
def approvals(request: Request, viewer: Signed) -> HTMLResponse:  # noqa: D103
    return approvals_page(request, viewer)


def approvals_page(
    request: Request, viewer: Viewer, *, status_code: int = 200, problem: str | None = None
) -> HTMLResponse:
    """The approval inbox; ``problem`` says why a decision just posted was not recorded."""
    items, following, after = _listed(request, viewer, Authority.approvals)
    grant = viewer.caller.grant
    decidable = {
        w.workload_id
        for w in items
        if allows(grant, APPROVE, w.workload_id) and may_decide(w, grant.subject)
    }
    decided = _decided(request, viewer)
    return page(
        request, "approvals.html", viewer, status_code=status_code, items=items,
        decidable=decidable, next_cursor=encode_cursor(following),
        first=after is None, problem=problem, decided=decided,
    )  # fmt: skip


def _decided(request: Request, viewer: Viewer) -> ApprovalDecision | None:
    """The decision a redirect after a decision names (``?decided=ID``), as committed: never
    text from the query, and only of work the viewer sees.
    """
    named = request.query_params.get("decided")
    if named is None or not named or len(named) > MAX_ID_CHARS:
        return None
    try:
        workload = server_of(request).store.get(named, scope=viewer.caller.scope)
    except WorkloadError as error:
        if error.code == ErrorCode.WORKLOAD_STORAGE_FAILURE:
            raise
        return None
    if workload.approval is None or not may_read(viewer.caller.grant, workload):
        return None
    return workload.approval.decision


@router.get("/dead-letters", response_class=HTMLResponse)
def dead_letters(request: Request, viewer: Signed) -> HTMLResponse:  # noqa: D103
    return dead_letters_page(request, viewer)


def dead_letters_page(
    request: Request,
    viewer: Viewer,
    *,
    status_code: int = 200,
    outcomes: list[tuple[str, str | None]] | None = None,
) -> HTMLResponse:
    """The dead letters; ``outcomes``: each retried workload and why it was not (``None``:
    it was), after a retry was posted.
    """
    items, following, after = _listed(request, viewer, Authority.dead_letters)
    return page(
        request, "dead_letters.html", viewer, status_code=status_code, items=items,
        next_cursor=encode_cursor(following), first=after is None, outcomes=outcomes,
    )  # fmt: skip


@router.get("/audit", response_class=HTMLResponse)
def audit(request: Request, viewer: Signed) -> HTMLResponse:  # noqa: D103
    return audit_page(request, viewer)


def audit_page(
    request: Request, viewer: Viewer, *, status_code: int = 200, report: object = None
) -> HTMLResponse:
    """The audit, newest first; ``report``: a verification of the chain just asked for."""
    acting = viewer.caller.authority(server_of(request).store)
    acting.audit_reader()
    work_id = _text(request, "workload", MAX_ID_CHARS)
    subject = _text(request, "subject", MAX_SUBJECT_CHARS)
    before = _revision(_text(request, "before", MAX_REVISION_DIGITS))
    entries, older = acting.audit_before(before, PAGE_SIZE, work_id=work_id, subject=subject)
    kept = {"workload": work_id, "subject": subject}
    return page(
        request, "audit.html", viewer, status_code=status_code, entries=entries, older=older,
        work_id=work_id, subject=subject, report=report, first=before is None,
        newest_href=_href("/ui/audit", kept),
        older_href=None if older is None else _href("/ui/audit", {**kept, "before": str(older)}),
    )  # fmt: skip


def _revision(text: str | None) -> int | None:
    """The audit's ``before``: a log revision, in ASCII digits (``None``: the newest)."""
    if text is None:
        return None
    if not re.fullmatch(r"[1-9][0-9]*", text):
        raise inputs.invalid("before", "must be a revision (a positive whole number)")
    return inputs.integer(int(text), "before", 1)
