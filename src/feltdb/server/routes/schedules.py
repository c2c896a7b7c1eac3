"""Schedule routes: ``/v1/schedules`` (capability ``schedule:manage``, unconstrained; to
create one, ``workload:execute`` too).

Route functions have no docstrings (``# noqa: D103``): FastAPI would publish one as the
operation's OpenAPI description; each route's ``summary`` says what it does.
"""

from typing import Annotated, Any

from fastapi import APIRouter, Body, Path, Query
from fastapi.responses import JSONResponse

from feltdb.errors import ErrorCode, WorkloadError
from feltdb.server.bodies import EmptyBody
from feltdb.server.fields import integers_as_declared
from feltdb.server.openapi import AUTH
from feltdb.server.openapi import answers as declared
from feltdb.server.routes.deps import PREFIX, Acting, Auth, Now, State
from feltdb.server.schedule_bodies import (
    SCHEDULE_BODY,
    SCHEDULE_ID_PATTERN,
    SCHEDULE_SCHEMA,
    DeletedAnswer,
    NextOccurrences,
    ScheduleAnswer,
    ScheduleList,
)
from feltdb.work.occurrences import MAX_NEXT
from feltdb.work.schedule_authority import ScheduleAuthority

router = APIRouter(prefix=PREFIX)

ScheduleId = Annotated[
    str,
    Path(min_length=1, max_length=64, pattern=SCHEDULE_ID_PATTERN, description="The schedule"),
]
Count = Annotated[int, Query(ge=1, le=MAX_NEXT, description="How many occurrences")]
ON_SCHEDULE = (*AUTH, 404, 409, 422)


@router.post(
    "/schedules",
    status_code=201,
    summary="Create a recurring schedule",
    responses=declared(ScheduleAnswer, *AUTH, 409, 413, 422, status=201),
    openapi_extra=SCHEDULE_BODY,
)
def create(  # noqa: D103
    caller: Auth,
    acting: Acting,
    state: State,
    now: Now,
    body: Annotated[dict[str, Any], Body()],
) -> JSONResponse:
    if not isinstance(body, dict):
        raise WorkloadError(ErrorCode.WORKLOAD_INVALID, "a schedule is a JSON object")
    spec = integers_as_declared(body, SCHEDULE_SCHEMA)
    snapshot = state.keyring.evidence(caller.grant, caller.key_id)
    made = ScheduleAuthority(acting).create(spec, snapshot, now)
    return JSONResponse(made, status_code=201)


@router.get(
    "/schedules",
    summary="The recurring schedules of this tenant and application",
    responses=declared(ScheduleList, *AUTH),
)
def listed(acting: Acting, now: Now) -> JSONResponse:  # noqa: D103
    return JSONResponse({"items": ScheduleAuthority(acting).listed(now)})


@router.get(
    "/schedules/{schedule_id}",
    summary="Read a schedule",
    responses=declared(ScheduleAnswer, *AUTH, 404, 422),
)
def read(acting: Acting, now: Now, schedule_id: ScheduleId) -> JSONResponse:  # noqa: D103
    return JSONResponse(ScheduleAuthority(acting).get(schedule_id, now))


@router.post(
    "/schedules/{schedule_id}/pause",
    summary="Pause a schedule: nothing is admitted until it is resumed",
    responses=declared(ScheduleAnswer, *ON_SCHEDULE, 413),
)
def pause(  # noqa: D103
    acting: Acting, now: Now, schedule_id: ScheduleId, body: EmptyBody | None = None
) -> JSONResponse:
    return JSONResponse(ScheduleAuthority(acting).set_paused(schedule_id, True, now))


# Two routes, not one with an {action}: an {action} path would also take POST .../next,
# answering 422 where a method the path does not have is 405.
@router.post(
    "/schedules/{schedule_id}/resume",
    summary="Resume a schedule from now (occurrences missed while paused are not admitted)",
    responses=declared(ScheduleAnswer, *ON_SCHEDULE, 413),
)
def resume(  # noqa: D103
    acting: Acting, now: Now, schedule_id: ScheduleId, body: EmptyBody | None = None
) -> JSONResponse:
    return JSONResponse(ScheduleAuthority(acting).set_paused(schedule_id, False, now))


@router.delete(
    "/schedules/{schedule_id}",
    summary="Delete a schedule (the work it admitted stays)",
    responses=declared(DeletedAnswer, *ON_SCHEDULE),
)
def delete(acting: Acting, schedule_id: ScheduleId) -> JSONResponse:  # noqa: D103
    ScheduleAuthority(acting).delete(schedule_id)
    return JSONResponse({"schedule_id": schedule_id, "deleted": True})


@router.get(
    "/schedules/{schedule_id}/next",
    summary="A schedule's next occurrences: a dry run, admitting nothing",
    responses=declared(NextOccurrences, *AUTH, 404, 422),
)
def upcoming(  # noqa: D103
    acting: Acting, now: Now, schedule_id: ScheduleId, count: Count = 5
) -> JSONResponse:
    found = ScheduleAuthority(acting).next(schedule_id, count, now)
    return JSONResponse({"schedule_id": schedule_id, "occurrences": found})
