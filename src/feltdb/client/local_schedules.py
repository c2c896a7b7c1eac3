""":class:`~feltdb.client.LocalClient`'s schedule calls: the holder's
:class:`~feltdb.work.schedule_authority.ScheduleAuthority`, on the client's clock; a new
schedule keeps the client's signed grant as its occurrences' evidence.
"""

from __future__ import annotations

import builtins
from typing import Any

from feltdb.auth import SignedGrant
from feltdb.client.schedules import ScheduleSpec
from feltdb.work.authority import Authority
from feltdb.work.schedule_authority import ScheduleAuthority


class LocalSchedules:
    """The schedule calls, over the authority and clock of the class this is mixed into."""

    acting: Authority
    grant: SignedGrant | None

    def _now(self) -> int | None:
        raise NotImplementedError

    @property
    def _schedules(self) -> ScheduleAuthority:
        return ScheduleAuthority(self.acting)

    def create_schedule(self, spec: ScheduleSpec) -> dict[str, Any]:
        """See :meth:`ScheduleClient.create_schedule`: refused ``WORKLOAD_UNAUTHORIZED``
        for a client without a grant (its occurrences keep it as evidence).
        """
        return self._schedules.create(spec.to_json(), self.grant, self._now())

    def schedules(self) -> builtins.list[dict[str, Any]]:
        """See :meth:`ScheduleClient.schedules`."""
        return self._schedules.listed(self._now())

    def schedule(self, schedule_id: str) -> dict[str, Any]:
        """See :meth:`ScheduleClient.schedule`."""
        return self._schedules.get(schedule_id, self._now())

    def pause_schedule(self, schedule_id: str) -> dict[str, Any]:
        """See :meth:`ScheduleClient.pause_schedule`."""
        return self._schedules.set_paused(schedule_id, True, self._now())

    def resume_schedule(self, schedule_id: str) -> dict[str, Any]:
        """See :meth:`ScheduleClient.resume_schedule`."""
        return self._schedules.set_paused(schedule_id, False, self._now())

    def delete_schedule(self, schedule_id: str) -> None:
        """See :meth:`ScheduleClient.delete_schedule`."""
        self._schedules.delete(schedule_id)

    def next_occurrences(self, schedule_id: str, count: int = 5) -> builtins.list[int]:
        """See :meth:`ScheduleClient.next_occurrences`."""
        return self._schedules.next(schedule_id, count, self._now())
