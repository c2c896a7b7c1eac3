"""The HTTP clients' schedule calls, over ``/v1/schedules`` (:class:`~feltdb.client.Client`
and :class:`~feltdb.client.AsyncClient` alike).
"""

from __future__ import annotations

import builtins
from typing import Any
from urllib.parse import quote

from feltdb.client.calls import Steps, ask, operation
from feltdb.client.schedules import ScheduleSpec


def _path(schedule_id: str, action: str = "") -> str:
    return f"/v1/schedules/{quote(schedule_id, safe='')}{action}"


class HttpSchedules:
    """The schedule calls."""

    @operation
    def create_schedule(self, spec: ScheduleSpec) -> Steps[dict[str, Any]]:
        """See :meth:`ScheduleClient.create_schedule` (``POST /v1/schedules``)."""
        return (yield from ask("POST", "/v1/schedules", spec.to_json()))

    @operation
    def schedules(self) -> Steps[builtins.list[dict[str, Any]]]:
        """See :meth:`ScheduleClient.schedules` (``GET /v1/schedules``)."""
        items: list[dict[str, Any]] = (yield from ask("GET", "/v1/schedules"))["items"]
        return items

    @operation
    def schedule(self, schedule_id: str) -> Steps[dict[str, Any]]:
        """See :meth:`ScheduleClient.schedule`."""
        return (yield from ask("GET", _path(schedule_id)))

    @operation
    def pause_schedule(self, schedule_id: str) -> Steps[dict[str, Any]]:
        """See :meth:`ScheduleClient.pause_schedule`."""
        return (yield from ask("POST", _path(schedule_id, "/pause")))

    @operation
    def resume_schedule(self, schedule_id: str) -> Steps[dict[str, Any]]:
        """See :meth:`ScheduleClient.resume_schedule`."""
        return (yield from ask("POST", _path(schedule_id, "/resume")))

    @operation
    def delete_schedule(self, schedule_id: str) -> Steps[None]:
        """See :meth:`ScheduleClient.delete_schedule`."""
        yield from ask("DELETE", _path(schedule_id))

    @operation
    def next_occurrences(self, schedule_id: str, count: int = 5) -> Steps[builtins.list[int]]:
        """See :meth:`ScheduleClient.next_occurrences`."""
        answer = yield from ask("GET", _path(schedule_id, "/next"), params={"count": count})
        return [int(instant) for instant in answer["occurrences"]]
