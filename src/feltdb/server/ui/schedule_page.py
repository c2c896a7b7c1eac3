"""The dashboard's schedules page (``/ui/schedules``): each schedule of the application,
when it occurs, its next occurrences, what it last admitted, and whether it is paused.

Read-only. It reads through the viewer's
:class:`~feltdb.work.schedule_authority.ScheduleAuthority`, the same call as
``GET /v1/schedules``, so it is authorized as that is (``schedule:manage`` over the whole
application, unconstrained). Instants are shown in UTC and, for a cron in another zone, as
the wall time there (where daylight saving shows).
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Final
from zoneinfo import ZoneInfo

from fastapi import APIRouter, Depends, Request
from fastapi.responses import HTMLResponse

from feltdb.fields import instant_text
from feltdb.server.ui.render import page
from feltdb.server.ui.routing import PageRoute
from feltdb.server.ui.viewer import Viewer, server_of, viewer_of
from feltdb.work.schedule_authority import ScheduleAuthority

router = APIRouter(prefix="/ui", include_in_schema=False, route_class=PageRoute)

Signed = Annotated[Viewer, Depends(viewer_of)]

UPCOMING: Final = 3
"""How many next occurrences the page shows of each active schedule."""


def shown_instant(instant: int | None, zone: str | None) -> str:
    """``instant`` as the dashboard writes it, with the wall time of ``zone`` when that is
    not UTC: ``2026-03-29 01:00:00 UTC (03:00 Europe/Berlin)``; ``—`` for none.
    """
    if instant is None:
        return "—"
    if zone is None or zone == "UTC":
        return instant_text(instant)
    return (
        f"{instant_text(instant)} ({datetime.fromtimestamp(instant, ZoneInfo(zone)):%H:%M} {zone})"
    )


def row(schedule: dict[str, Any], upcoming: list[int]) -> dict[str, Any]:
    """What the page shows of ``schedule``, with its ``upcoming`` occurrences."""
    zone = schedule["timezone"]
    if schedule["cron"] is not None:
        recurrence = f"cron {schedule['cron']} ({zone})"
    else:
        recurrence = f"every {schedule['interval_s']} s"
    return {
        **schedule,
        "recurrence": recurrence,
        "upcoming": [shown_instant(instant, zone) for instant in upcoming],
        "last": shown_instant(schedule["last_occurrence"], zone),
    }


@router.get("/schedules", response_class=HTMLResponse)
def schedules(request: Request, viewer: Signed) -> HTMLResponse:  # noqa: D103
    state = server_of(request)
    managing = ScheduleAuthority(viewer.caller.authority(state.store))
    now = state.clock()
    rows = [
        row(s, [] if s["paused"] else managing.next(s["schedule_id"], UPCOMING, now))
        for s in managing.listed(now)
    ]
    return page(request, "schedules.html", viewer, schedules=rows)
