"""The schedules of one store (``WorkloadStore.schedules``): create, read, list, pause,
resume, delete, the next occurrences (a dry run), and the scheduler's pass.

Each operation names the tenant and application it acts in; the caller's authority (who
may manage schedules) is :mod:`feltdb.work.schedule_authority`'s.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from feltdb.auth import SignedGrant, Subject
from feltdb.storage.base import Database, StorageConflict, StoredRow
from feltdb.work import inputs, occurrences, scheduler, schedules
from feltdb.work.schedules import SCHEDULES_COLLECTION, schedule_key, stored

if TYPE_CHECKING:  # the store builds the schedules; this module needs only its methods
    from feltdb.work.store import WorkloadStore


def view(document: dict[str, Any], now: int) -> dict[str, Any]:
    """A schedule as it is answered and shown: its stored fields but the grant evidence
    (only its id), with ``next_occurrence``, the first one after ``now`` and its cursor
    (``None`` while paused).
    """
    shown = {
        key: value
        for key, value in document.items()
        if key not in ("authorization_snapshot", "requested_by", "anchor", "cursor")
    }
    shown["grant_id"] = document["authorization_snapshot"]["grant"]["id"]
    after = max(now, document["cursor"])
    upcoming = occurrences.occurrences_after(schedules.recurrence_of(document), after, 1)
    shown["next_occurrence"] = None if document["paused"] or not upcoming else upcoming[0]
    return shown


class Schedules:
    """The schedules of one store: see the module. ``now`` of ``None`` is the store's clock."""

    def __init__(self, store: WorkloadStore, clock: Callable[[int | None], int]) -> None:
        self._store, self._clock = store, clock

    @property
    def _db(self) -> Database:
        return self._store.db

    def create(
        self,
        spec: dict[str, Any],
        *,
        tenant_id: str,
        application_id: str,
        requested_by: Subject,
        authorization_snapshot: SignedGrant,
        now: int | None = None,
    ) -> dict[str, Any]:
        """Create a schedule from ``spec`` (:func:`~feltdb.work.schedules.new_schedule`),
        its occurrences requested by ``requested_by`` under ``authorization_snapshot``;
        answers its :func:`view`. Occurrences count from now: the first is the first after it.

        Raises:
            WorkloadError: ``WORKLOAD_INVALID`` naming the field (also for an application
                with :data:`~.schedules.MAX_SCHEDULES_PER_APPLICATION` schedules);
                ``WORKLOAD_SECRET_REJECTED``, ``WORKLOAD_UNAUTHORIZED`` (the template as
                admission would refuse it); ``WORKLOAD_CONFLICT`` (the id is taken).
        """
        at = self._clock(now)
        document = schedules.new_schedule(
            spec, tenant_id=tenant_id, application_id=application_id,
            requested_by=requested_by, authorization_snapshot=authorization_snapshot, now=at,
        )  # fmt: skip
        schedules.create(self._db, document, str(requested_by))
        return view(document, at)

    def _read(self, tenant_id: str, application_id: str, schedule_id: str) -> StoredRow:
        name = schedules.schedule_id(schedule_id)
        key = schedule_key(tenant_id, application_id, name)
        row = self._db.get_row(SCHEDULES_COLLECTION, key)
        if row is None:
            raise schedules.not_found(name)
        return row

    def get(
        self, tenant_id: str, application_id: str, schedule_id: str, now: int | None = None
    ) -> dict[str, Any]:
        """The schedule's :func:`view`.

        Raises:
            WorkloadError: ``WORKLOAD_INVALID`` (not an id); ``WORKLOAD_NOT_FOUND``.
        """
        row = self._read(tenant_id, application_id, schedule_id)
        return view(stored(row), self._clock(now))

    def listed(
        self, tenant_id: str, application_id: str, now: int | None = None
    ) -> list[dict[str, Any]]:
        """The application's schedules (at most
        :data:`~.schedules.MAX_SCHEDULES_PER_APPLICATION`), by id: one ranged read.
        """
        at = self._clock(now)
        rows = self._db.list_rows(
            SCHEDULES_COLLECTION,
            tenant_id=inputs.identifier(tenant_id, "tenant_id"),
            application_id=inputs.identifier(application_id, "application_id"),
            limit=schedules.MAX_SCHEDULES_PER_APPLICATION,
        )
        shown = [view(stored(row), at) for row in rows]
        return sorted(shown, key=lambda schedule: str(schedule["schedule_id"]))

    def set_paused(
        self,
        tenant_id: str,
        application_id: str,
        schedule_id: str,
        paused: bool,
        actor: str,
        now: int | None = None,
    ) -> dict[str, Any]:
        """Pause the schedule (``paused``): no occurrence is admitted until it is resumed;
        or resume it: the occurrences after now are admitted, those that fell while it was
        paused never are. Setting what is already set changes nothing. Answers its
        :func:`view`.

        Raises:
            WorkloadError: ``WORKLOAD_NOT_FOUND``; ``WORKLOAD_CONFLICT`` (changed meanwhile).
        """
        at, actor = self._clock(now), inputs.actor(actor)
        row = self._read(tenant_id, application_id, schedule_id)
        document = stored(row)
        if document["paused"] == paused:
            return view(document, at)
        changed = {**document, "paused": paused, "paused_reason": None, "updated_at": at}
        if not paused:
            changed["cursor"] = max(document["cursor"], at)
        kind = "paused" if paused else "resumed"
        try:
            schedules.write(
                self._db, changed, row.key, row.version, schedules.audit_of(kind, actor, changed)
            )
        except StorageConflict:
            raise schedules.conflict(document["schedule_id"], kind[:-1] + "ing") from None
        return view(changed, at)

    def delete(self, tenant_id: str, application_id: str, schedule_id: str, actor: str) -> None:
        """Delete the schedule: no occurrence of it is admitted from now on (work admitted
        for it stays).

        Raises:
            WorkloadError: ``WORKLOAD_NOT_FOUND``; ``WORKLOAD_CONFLICT`` (changed meanwhile).
        """
        actor = inputs.actor(actor)
        row = self._read(tenant_id, application_id, schedule_id)
        document = stored(row)
        try:
            schedules.write(
                self._db, None, row.key, row.version, schedules.audit_of("deleted", actor, document)
            )
        except StorageConflict:
            raise schedules.conflict(document["schedule_id"], "deleting") from None

    def next(
        self,
        tenant_id: str,
        application_id: str,
        schedule_id: str,
        count: int = 5,
        now: int | None = None,
    ) -> list[int]:
        """The schedule's next ``count`` occurrences (1 to
        :data:`~.occurrences.MAX_NEXT`) after now and its cursor, paused or not: a dry
        run, admitting nothing.

        Raises:
            WorkloadError: ``WORKLOAD_INVALID`` (a bad count); ``WORKLOAD_NOT_FOUND``.
        """
        document = stored(self._read(tenant_id, application_id, schedule_id))
        after = max(self._clock(now), document["cursor"])
        return occurrences.next_occurrences(schedules.recurrence_of(document), after, count)

    def run_due(
        self, now: int | None = None, most: int = scheduler.MAX_PER_PASS
    ) -> list[scheduler.Occurrence]:
        """One scheduler pass at ``now`` (:func:`~feltdb.work.scheduler.run_due`): every
        due occurrence of every tenant's schedules admitted, at most ``most``.

        Raises:
            WorkloadError: ``WORKLOAD_STORAGE_FAILURE``.
        """
        return scheduler.run_due(self._store, self._clock(now), most)
