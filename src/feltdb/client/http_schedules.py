""":class:`~feltdb.client.Client`'s schedule calls, over ``/v1/schedules``."""

from __future__ import annotations

import builtins
from typing import Any
from urllib.parse import quote

from feltdb.client.schedules import ScheduleSpec
from feltdb.client.transport import Transport


def _path(schedule_id: str, action: str = "") -> str:
    return f"/v1/schedules/{quote(schedule_id, safe='')}{action}"


class HttpSchedules(Transport):
    """The schedule calls, over the transport of the class this is mixed into."""

    def create_schedule(self, spec: ScheduleSpec) -> dict[str, Any]:
        """See :meth:`ScheduleClient.create_schedule` (``POST /v1/schedules``)."""
        return self._ask("POST", "/v1/schedules", spec.to_json())

    def schedules(self) -> builtins.list[dict[str, Any]]:
        """See :meth:`ScheduleClient.schedules` (``GET /v1/schedules``)."""
        items: list[dict[str, Any]] = self._ask("GET", "/v1/schedules")["items"]
        return items

    def schedule(self, schedule_id: str) -> dict[str, Any]:
        """See :meth:`ScheduleClient.schedule`."""
        return self._ask("GET", _path(schedule_id))

    def pause_schedule(self, schedule_id: str) -> dict[str, Any]:
        """See :meth:`ScheduleClient.pause_schedule`."""
        return self._ask("POST", _path(schedule_id, "/pause"))

    def resume_schedule(self, schedule_id: str) -> dict[str, Any]:
        """See :meth:`ScheduleClient.resume_schedule`."""
        return self._ask("POST", _path(schedule_id, "/resume"))

    def delete_schedule(self, schedule_id: str) -> None:
        """See :meth:`ScheduleClient.delete_schedule`."""
        self._ask("DELETE", _path(schedule_id))

    def next_occurrences(self, schedule_id: str, count: int = 5) -> builtins.list[int]:
        """See :meth:`ScheduleClient.next_occurrences`."""
        answer = self._ask("GET", _path(schedule_id, "/next"), params={"count": count})
        return [int(instant) for instant in answer["occurrences"]]
