"""The lists (the application's workloads, the approvers' inbox, the dead letters, the
workers its work names) and the audit: pages over the whole application, so each needs a
grant covering all of its work; and the audit chain's verification, which the audit's
readers may ask for.

A list holds only the work of the grant's scope: a constrained grant's pages and cursors
never show work outside its environments or definitions (the store hides it).

Route functions have no docstrings (``# noqa: D103``): FastAPI would publish one as the
operation's OpenAPI description; each route's ``summary`` says what it does.
"""

from typing import Annotated

from fastapi import APIRouter, Query
from fastapi.responses import JSONResponse

from feltdb.fields import MAX_ID_CHARS, MAX_SAFE_INTEGER
from feltdb.records.workers import WorkersSeen
from feltdb.server.bodies import AuditPage, WorkloadPage
from feltdb.server.fields import NOT_BLANK
from feltdb.server.openapi import AUTH
from feltdb.server.openapi import answers as declared
from feltdb.server.routes.deps import PREFIX, Acting, Now
from feltdb.server.verification import verify_chain
from feltdb.storage.audit_chain import ChainReport
from feltdb.work.audit import ANCHOR, anchor_of
from feltdb.work.cursors import decode_cursor, encode_cursor
from feltdb.work.listing import SummaryPage
from feltdb.work.states import WorkloadState

DEFAULT_PAGE = 50
"""Items a list answers unless told ``limit``."""
MAX_PAGE = 500
"""The most items one list page may hold."""
MAX_AUDIT_PAGE = 500
"""The most entries one ``GET /v1/audit`` answers."""

router = APIRouter(prefix=PREFIX)

Limit = Annotated[int, Query(ge=1, le=MAX_PAGE, description="Items per page")]
PageCursor = Annotated[
    str | None,
    Query(max_length=1024, description="The previous page's next_cursor (opaque)"),
]
Definition = Annotated[str | None, Query(min_length=1, max_length=MAX_ID_CHARS, pattern=NOT_BLANK)]


def listed(found: SummaryPage) -> JSONResponse:
    """A page of work as answered: its summaries, and the next page's cursor."""
    page, after = found
    items = [summary.to_json() for summary in page]
    return JSONResponse({"items": items, "next_cursor": encode_cursor(after)})


@router.get(
    "/workloads",
    summary="List the application's workloads, a page at a time",
    responses=declared(WorkloadPage, *AUTH, 422),
    description=(
        "Priority descending, then oldest first, `definition` keeping only work of that"
        " definition. Each item is a summary (no input, checkpoints, result or history:"
        " `GET /v1/workloads/{id}` answers those). A page reads at most 4 MiB of stored"
        " records past its first item, so a page of large workloads may hold fewer than"
        " `limit` items while `next_cursor` is set: follow it until it is null."
    ),
)
def list_workloads(  # noqa: D103
    acting: Acting,
    state: Annotated[WorkloadState | None, Query()] = None,
    definition: Definition = None,
    limit: Limit = DEFAULT_PAGE,
    cursor: PageCursor = None,
) -> JSONResponse:
    return listed(acting.workloads(state, definition, decode_cursor(cursor), limit))


@router.get(
    "/approvals",
    summary="Workloads awaiting approval, a page at a time",
    responses=declared(WorkloadPage, *AUTH, 422),
)
def approvals(  # noqa: D103
    acting: Acting, limit: Limit = DEFAULT_PAGE, cursor: PageCursor = None
) -> JSONResponse:
    return listed(acting.approvals(decode_cursor(cursor), limit))


@router.get(
    "/dead-letters",
    summary="Dead-lettered workloads, a page at a time",
    responses=declared(WorkloadPage, *AUTH, 422),
)
def dead_letters(  # noqa: D103
    acting: Acting, limit: Limit = DEFAULT_PAGE, cursor: PageCursor = None
) -> JSONResponse:
    return listed(acting.dead_letters(decode_cursor(cursor), limit))


@router.get(
    "/workers",
    summary="The workers the application's work names: leases held, completions, failures",
    responses=declared(WorkersSeen, *AUTH, 422),
    description=(
        "Read from the store's own records, so every server on one database answers the"
        " same: the current claims of the work held now (CLAIMED, RUNNING, CHECKPOINTED,"
        " CANCELLATION_REQUESTED; at most 2,000 workloads read) and the completions and"
        " failures the log recorded for each worker in the last 10 whole minutes (not"
        " counted for a grant constrained to environments or definitions: `counted` is"
        " false). A worker is `stale` when a lease it holds has expired or its freshest"
        " heartbeat is over 120 s old. At most 200 workers, freshest heartbeat first; each"
        " names at most 20 definitions and shows at most 20 leases (`lease_count` says"
        " how many it holds). `complete` is false when a read stopped at its bound."
    ),
)
def workers(acting: Acting, now: Now) -> JSONResponse:  # noqa: D103
    return JSONResponse(acting.workers(now).to_json())


@router.get(
    "/audit",
    summary="Committed transactions of the application after a revision",
    responses=declared(AuditPage, *AUTH, 422),
    description=(
        "Oldest first. Continue with `after=next_after`; one request reads a bounded"
        " stretch of the log, so a page may be empty while later entries exist: an"
        " empty page whose `next_after` equals `after` means nothing is left for now."
    ),
)
def audit(  # noqa: D103
    acting: Acting,
    after: Annotated[int, Query(ge=0, le=MAX_SAFE_INTEGER)] = 0,
    limit: Annotated[int, Query(ge=1, le=MAX_AUDIT_PAGE)] = 100,
) -> JSONResponse:
    entries, next_after = acting.audit_after(after, limit)
    return JSONResponse(
        {"items": [e.model_dump(mode="json") for e in entries], "next_after": next_after}
    )


@router.get(
    "/audit/verify",
    summary="Verify the audit chain: the first transaction altered, removed or reordered",
    responses=declared(ChainReport, *AUTH, 422),
    description=(
        "Seals the log's final entries, then walks the whole chain and checks every row"
        " against the transaction that wrote it; `ok` is false and `problem` names the first"
        " fault found. The chain is every tenant's: a fault in another application's"
        " transaction is told by its kind and revision only. `anchor` (`REVISION:LINK`, an"
        " earlier answer's `head_revision` and `head_link`) must still be in the chain. One"
        " verification runs at a time: another request meanwhile is answered 503, with"
        " `Retry-After` the seconds the last verification took (1 to 60)."
    ),
)
def verify_audit(  # noqa: D103
    acting: Acting,
    anchor: Annotated[str | None, Query(max_length=84, pattern=f"^{ANCHOR.pattern}$")] = None,
) -> JSONResponse:
    noted = None if anchor is None else anchor_of(anchor)
    return JSONResponse(verify_chain(acting, noted).model_dump(mode="json"))
