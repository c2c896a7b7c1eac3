"""The schedule calls of the client protocol (:class:`ScheduleClient`, which
:class:`~feltdb.client.protocol.WorkloadClient` extends), and what they send.

A schedule is answered as a dict: the fields of
:class:`~feltdb.server.schedule_bodies.ScheduleAnswer` (instants in unix seconds).
"""

from __future__ import annotations

import builtins
from dataclasses import dataclass, fields
from typing import Any, Protocol

from feltdb.work.schedules import DEFAULT_MAX_CATCH_UP


@dataclass(frozen=True, slots=True)
class ScheduleSpec:
    """A new schedule: ``cron`` (five fields) in ``timezone`` (IANA, default UTC), or every
    ``interval_s`` seconds; each occurrence admits ``template`` (a submission without key,
    ``not_before`` or trigger) with ``not_before`` the occurrence. After missed
    occurrences, ``catch_up="skip"`` admits the latest only, ``"all"`` each (at most
    ``max_catch_up``).
    """

    schedule_id: str
    template: dict[str, Any]
    cron: str | None = None
    timezone: str | None = None
    interval_s: int | None = None
    catch_up: str = "skip"
    max_catch_up: int = DEFAULT_MAX_CATCH_UP

    def to_json(self) -> dict[str, Any]:
        """The body of ``POST /v1/schedules``: the fields given (no ``null`` recurrence)."""
        spec = {field.name: getattr(self, field.name) for field in fields(self)}
        return {name: value for name, value in spec.items() if value is not None}


class ScheduleClient(Protocol):
    """The application's recurring schedules (``schedule:manage``; to create one,
    ``workload:execute`` too: its occurrences are this client's submissions).
    """

    def create_schedule(self, spec: ScheduleSpec) -> dict[str, Any]:
        """Create the schedule ``spec`` describes; refused ``WORKLOAD_CONFLICT`` when its
        id is taken, ``WORKLOAD_INVALID`` naming the field of a bad one.
        """
        ...

    def schedules(self) -> builtins.list[dict[str, Any]]:
        """The application's schedules, by id."""
        ...

    def schedule(self, schedule_id: str) -> dict[str, Any]:
        """One schedule (``WORKLOAD_NOT_FOUND`` when there is none of that id)."""
        ...

    def pause_schedule(self, schedule_id: str) -> dict[str, Any]:
        """Pause it: nothing is admitted until it is resumed."""
        ...

    def resume_schedule(self, schedule_id: str) -> dict[str, Any]:
        """Resume it from now: occurrences that fell while it was paused are not admitted."""
        ...

    def delete_schedule(self, schedule_id: str) -> None:
        """Delete it (the work it admitted stays)."""
        ...

    def next_occurrences(self, schedule_id: str, count: int = 5) -> builtins.list[int]:
        """Its next ``count`` occurrences (1 to 50): a dry run, admitting nothing."""
        ...
