"""The limits routes: what the application's concurrency limits hold now
(``GET /v1/limits/concurrency``, ``workload:read`` over every workload of the application,
unconstrained; :mod:`feltdb.work.limits_view`), and the admission quotas the caller's
admissions are charged to (``GET /v1/limits/quota``; :mod:`feltdb.work.quota_view`).

Route functions have no docstrings (``# noqa: D103``): FastAPI would publish one as the
operation's OpenAPI description; the route's ``summary`` says what it does.
"""

from typing import Annotated

from fastapi import APIRouter, Path
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from feltdb.fields import MAX_CONCURRENCY_LIMIT, MAX_ID_CHARS
from feltdb.records.limits import AdmissionQuotas, ConcurrencyKeys
from feltdb.server.fields import NOT_BLANK
from feltdb.server.openapi import AUTH
from feltdb.server.openapi import answers as declared
from feltdb.server.routes.deps import PREFIX, Acting, Now
from feltdb.work.limits_view import concurrency_keys_as, set_definition_limit_as
from feltdb.work.quota_view import admission_quotas_as

router = APIRouter(prefix=PREFIX)


@router.get(
    "/limits/concurrency",
    summary="The application's concurrency keys: each one's limit and the work holding it",
    responses=declared(ConcurrencyKeys, *AUTH),
    description="Each concurrency key a claim took a slot of, by key (at most 100; "
    "`complete` is false past that): the limit its last claim named, and the ids of the "
    "workloads whose claims hold its slots now. Needs `workload:read` over every workload "
    "of the application, unconstrained.",
)
def concurrency(acting: Acting) -> JSONResponse:  # noqa: D103
    return JSONResponse(concurrency_keys_as(acting).to_json())


class DefinitionLimit(BaseModel):
    """``PUT /v1/limits/concurrency/definitions/{definition_id}``: the default limit of the
    definition's new work (``null``: none).
    """

    model_config = ConfigDict(extra="forbid", strict=True)

    limit: int | None = Field(ge=1, le=MAX_CONCURRENCY_LIMIT)


DefinitionId = Annotated[str, Path(min_length=1, max_length=MAX_ID_CHARS, pattern=NOT_BLANK)]


@router.put(
    "/limits/concurrency/definitions/{definition_id}",
    summary="Set (or remove) a definition's default concurrency limit",
    responses=declared(DefinitionLimit, *AUTH, 409, 422),
    description="How many of the definition's workloads admitted from now on hold a claim "
    "at once, when they name no concurrency key of their own (they are given the key "
    "`definition:ID`); `null` removes it. Work already admitted keeps its limit. Needs "
    "`workload:operate` over every workload of the application, unconstrained.",
)
def set_definition_limit(  # noqa: D103
    acting: Acting, now: Now, definition_id: DefinitionId, body: DefinitionLimit
) -> JSONResponse:
    set_definition_limit_as(acting, definition_id, body.limit, now)
    return JSONResponse({"limit": body.limit})


@router.get(
    "/limits/quota",
    summary="The admission quotas the caller's admissions are charged to, and their use",
    responses=declared(AdmissionQuotas, *AUTH),
    description="The quota of the caller's tenant and the quota of the caller's grant, of "
    "those that exist (none: `quotas` is empty): each one's cap of unfinished work "
    "(`max_unfinished`) and rate (`per_second`, a bucket of that many rounded up), the "
    "tenant's (or grant's) unfinished work now, counted up to the cap (`unfinished`), and "
    "the admissions the bucket allows now (`tokens`). An admission past either is refused "
    "429 `WORKLOAD_QUOTA_EXCEEDED` with `Retry-After`. Only the store's holder sets quotas "
    "(`feltdb limits quota set --db`). Needs `workload:execute`, or `workload:read` over "
    "every workload of the application.",
)
def quota(acting: Acting, now: Now) -> JSONResponse:  # noqa: D103
    return JSONResponse(admission_quotas_as(acting, now).to_json())
