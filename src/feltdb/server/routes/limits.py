"""The limits routes: what the application's concurrency limits hold now
(``GET /v1/limits/concurrency``) and its rate limits (``GET /v1/limits/rate``), each to
``workload:read`` over every workload of the application, unconstrained; a definition's
default concurrency limit and a rate limit set by ``workload:operate`` over all of it
(:mod:`feltdb.work.limits_view`); and the admission quotas the caller's admissions are
charged to (``GET /v1/limits/quota``; :mod:`feltdb.work.quota_view`).

Route functions have no docstrings (``# noqa: D103``): FastAPI would publish one as the
operation's OpenAPI description; the route's ``summary`` says what it does.
"""

from typing import Annotated

from annotated_types import Ge, Le
from fastapi import APIRouter, Path, Response
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, WithJsonSchema

from feltdb.fields import MAX_CONCURRENCY_LIMIT, MAX_ID_CHARS, MAX_RATE_PERIOD_S, MAX_RATE_STARTS
from feltdb.records.limits import AdmissionQuotas, ConcurrencyKeys, RateLimits
from feltdb.server.fields import NOT_BLANK, JsonInteger
from feltdb.server.openapi import AUTH
from feltdb.server.openapi import answers as declared
from feltdb.server.routes.deps import PREFIX, Acting, Now
from feltdb.work.claim_aging import MAX_AGING_S
from feltdb.work.limits_view import (
    aging_as,
    concurrency_keys_as,
    rate_limits_as,
    set_aging_as,
    set_definition_limit_as,
    set_rate_limit_as,
)
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


# Integers as JSON writes them (5 or 5.0), declared with their bounds: where they may be
# null too, pydantic would otherwise declare the bounds under names JSON Schema ignores.
DefaultLimit = Annotated[
    JsonInteger,
    Ge(1),
    Le(MAX_CONCURRENCY_LIMIT),
    WithJsonSchema({"type": "integer", "minimum": 1, "maximum": MAX_CONCURRENCY_LIMIT}),
]
AgingSeconds = Annotated[
    JsonInteger,
    Ge(1),
    Le(MAX_AGING_S),
    WithJsonSchema({"type": "integer", "minimum": 1, "maximum": MAX_AGING_S}),
]


class DefinitionLimit(BaseModel):
    """``PUT /v1/limits/concurrency/definitions/{definition_id}``: the default limit of the
    definition's new work (``null``: none).
    """

    model_config = ConfigDict(extra="forbid", strict=True)

    limit: DefaultLimit | None


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
    "/limits/rate",
    summary="The application's rate limits: each one's starts per period",
    responses=declared(RateLimits, *AUTH),
    description="Each rate limit set in the application, by name (at most 1,000): at most "
    "`starts` starts of its work per `period_s` seconds, per key. Needs `workload:read` over "
    "every workload of the application, unconstrained.",
)
def rate(acting: Acting) -> JSONResponse:  # noqa: D103
    return JSONResponse(rate_limits_as(acting).to_json())


class RateLimitBody(BaseModel):
    """``PUT /v1/limits/rate/{name}``: at most ``starts`` starts per ``period_s`` seconds."""

    model_config = ConfigDict(extra="forbid", strict=True)

    starts: JsonInteger = Field(ge=1, le=MAX_RATE_STARTS)
    period_s: JsonInteger = Field(ge=1, le=MAX_RATE_PERIOD_S)


RateName = Annotated[str, Path(min_length=1, max_length=MAX_ID_CHARS, pattern=NOT_BLANK)]


@router.put(
    "/limits/rate/{name}",
    summary="Set a rate limit: at most `starts` starts of its work per `period_s` seconds",
    responses=declared(RateLimitBody, *AUTH, 409, 422),
    description="Work naming the limit (`rate_limit`, and `rate_key` for a window of its "
    "own) starts at most that often; a change applies to claims from now on. Needs "
    "`workload:operate` over every workload of the application, unconstrained.",
)
def set_rate(  # noqa: D103
    acting: Acting, now: Now, name: RateName, body: RateLimitBody
) -> JSONResponse:
    set_rate_limit_as(acting, name, (body.starts, body.period_s), now)
    return JSONResponse(body.model_dump())


@router.delete(
    "/limits/rate/{name}",
    status_code=204,
    summary="Remove a rate limit: its work runs unlimited",
    responses=declared(None, *AUTH, 409, 422),
    description="Needs `workload:operate` over every workload of the application, "
    "unconstrained. Removing a limit that is not set changes nothing.",
)
def remove_rate(acting: Acting, now: Now, name: RateName) -> Response:  # noqa: D103
    set_rate_limit_as(acting, name, None, now)
    return Response(status_code=204)


class AgingBody(BaseModel):
    """``PUT /v1/limits/aging``: one priority step per ``aging_s`` seconds waited
    (``null``: none).
    """

    model_config = ConfigDict(extra="forbid", strict=True)

    aging_s: AgingSeconds | None


@router.get(
    "/limits/aging",
    summary="The application's aging period",
    responses=declared(AgingBody, *AUTH),
    description="At each claim, ready work counts one priority higher for every `aging_s` "
    "seconds since it was created (`null`: claims follow priority alone). Needs "
    "`workload:read` over every workload of the application, unconstrained.",
)
def aging(acting: Acting) -> JSONResponse:  # noqa: D103
    return JSONResponse({"aging_s": aging_as(acting)})


@router.put(
    "/limits/aging",
    summary="Set (or remove) the application's aging period",
    responses=declared(AgingBody, *AUTH, 409, 422),
    description="1 second to 30 days; `null` removes it. Another server applies a change "
    "within a second. Needs `workload:operate` over every workload of the application, "
    "unconstrained.",
)
def set_aging(acting: Acting, now: Now, body: AgingBody) -> JSONResponse:  # noqa: D103
    set_aging_as(acting, body.aging_s, now)
    return JSONResponse({"aging_s": body.aging_s})


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
