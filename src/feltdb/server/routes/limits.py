"""The limits route: what the application's concurrency limits hold now
(``GET /v1/limits/concurrency``, ``workload:read`` over every workload of the application,
unconstrained; :mod:`feltdb.work.limits_view`).

Route functions have no docstrings (``# noqa: D103``): FastAPI would publish one as the
operation's OpenAPI description; the route's ``summary`` says what it does.
"""

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from feltdb.records.limits import ConcurrencyKeys
from feltdb.server.openapi import AUTH
from feltdb.server.openapi import answers as declared
from feltdb.server.routes.deps import PREFIX, Acting
from feltdb.work.limits_view import concurrency_keys_as

router = APIRouter(prefix=PREFIX)


@router.get(
    "/limits/concurrency",
    summary="The application's concurrency keys: each one's limit and the work holding it",
    responses=declared(ConcurrencyKeys, *AUTH),
    description="Each concurrency key a claim took a slot of, by key (at most 1,000; "
    "`complete` is false past that): the limit its last claim named, and the ids of the "
    "workloads whose claims hold its slots now. Needs `workload:read` over every workload "
    "of the application, unconstrained.",
)
def concurrency(acting: Acting) -> JSONResponse:  # noqa: D103
    return JSONResponse(concurrency_keys_as(acting).to_json())
