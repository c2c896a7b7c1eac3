"""The schedules as one caller may manage them: :class:`ScheduleAuthority`.

It follows :class:`~feltdb.work.authority.Authority` (which it wraps, so the caller is
composed once): every operation needs ``schedule:manage`` over the whole application,
from a grant narrowed to no environment or definition (a schedule list is the
application's, whatever work each schedule admits); creating one also needs
``workload:execute``, since its occurrences are the caller's submissions, and keeps the
caller's signed grant as their evidence. The holder of the store (``Authority.holding``)
is checked for nothing, as everywhere.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from feltdb.auth import Grant, SignedGrant
from feltdb.auth.capabilities import SCHEDULE
from feltdb.auth.policy import authorize_application, constrained
from feltdb.errors import ErrorCode, WorkloadError
from feltdb.work.authority import WHOLE_APPLICATION, Authority


def authorize_schedules(grant: Grant) -> None:
    """Refuse unless ``grant`` may manage the application's schedules: ``schedule:manage``
    on every workload of it, narrowed to no environment or definition.

    Raises:
        WorkloadError: ``WORKLOAD_UNAUTHORIZED`` naming what the grant lacks.
    """
    authorize_application(grant, SCHEDULE)
    if constrained(grant):
        raise WorkloadError(
            ErrorCode.WORKLOAD_UNAUTHORIZED,
            "a grant constrained to environments or definitions may not manage schedules",
            {"missing": WHOLE_APPLICATION},
        )


@dataclass(frozen=True, slots=True)
class ScheduleAuthority:
    """``acting``'s caller managing the schedules of its scope's application."""

    acting: Authority

    def _where(self, what: str) -> tuple[str, str]:
        """The caller's tenant and application, once it may manage their schedules."""
        self.acting.whole_application(authorize_schedules, what)
        return self.acting.scope.tenant_id, self.acting.scope.application_id

    def create(
        self, spec: dict[str, Any], snapshot: SignedGrant | None, now: int | None
    ) -> dict[str, Any]:
        """Create a schedule (:meth:`.Schedules.create`) whose occurrences the caller
        requests under ``snapshot``, its signed grant (``workload:execute`` too).

        Raises:
            WorkloadError: ``WORKLOAD_UNAUTHORIZED`` (also for a caller with no grant to
                keep); the store's refusals of ``create``.
        """
        tenant_id, application_id = self._where("schedules are the application's")
        self.acting.as_requester()
        if snapshot is None:
            raise WorkloadError(
                ErrorCode.WORKLOAD_UNAUTHORIZED,
                "a schedule keeps the grant it was made under: this caller has none",
                {"missing": "grant"},
            )
        return self.acting.store.schedules.create(
            spec, tenant_id=tenant_id, application_id=application_id,
            requested_by=self.acting.subject, authorization_snapshot=snapshot, now=now,
        )  # fmt: skip

    def listed(self, now: int | None) -> list[dict[str, Any]]:
        """The application's schedules (:meth:`.Schedules.listed`)."""
        tenant_id, application_id = self._where("schedules are the application's")
        return self.acting.store.schedules.listed(tenant_id, application_id, now)

    def get(self, schedule_id: str, now: int | None) -> dict[str, Any]:
        """One schedule (:meth:`.Schedules.get`)."""
        tenant_id, application_id = self._where("schedules are the application's")
        return self.acting.store.schedules.get(tenant_id, application_id, schedule_id, now)

    def set_paused(self, schedule_id: str, paused: bool, now: int | None) -> dict[str, Any]:
        """Pause or resume a schedule, as the caller (:meth:`.Schedules.set_paused`)."""
        tenant_id, application_id = self._where("schedules are the application's")
        return self.acting.store.schedules.set_paused(
            tenant_id, application_id, schedule_id, paused, self.acting.actor, now
        )

    def delete(self, schedule_id: str) -> None:
        """Delete a schedule, as the caller (:meth:`.Schedules.delete`)."""
        tenant_id, application_id = self._where("schedules are the application's")
        self.acting.store.schedules.delete(
            tenant_id, application_id, schedule_id, self.acting.actor
        )

    def next(self, schedule_id: str, count: int, now: int | None) -> list[int]:
        """A schedule's next ``count`` occurrences: a dry run (:meth:`.Schedules.next`)."""
        tenant_id, application_id = self._where("schedules are the application's")
        return self.acting.store.schedules.next(tenant_id, application_id, schedule_id, count, now)
