"""The scheduler: admit every due occurrence of every schedule, exactly once.

:func:`run_due` is one pass. For each schedule that is not paused it reads the occurrences
in ``(cursor, now]`` (:func:`~feltdb.work.occurrences.due`); it admits every schedule's in
one ``admit_many`` (each keyed by :func:`~feltdb.work.schedules.occurrence_key`, so an
occurrence another scheduler admitted already is a replay, never a second workload), then
advances each schedule's cursor in a commit guarded by the version it read (all in one
``commit_many``, each plan its own guard). Two schedulers
racing on one store admit each occurrence once: the admissions converge on one workload
per key, and one of the two advances wins; the other's is refused and changes nothing. A
scheduler that stops between the two commits leaves the cursor behind; the next pass
admits the same keys again, which replays.

Catch-up after an outage: ``skip`` admits the latest due occurrence only (the skipped ones
are recorded as ``skipped_before``); ``all`` admits each, oldest first, at most the
schedule's ``max_catch_up`` (earlier ones are skipped), and at most
:data:`MAX_PER_SCHEDULE_PER_PASS` per pass, the rest on the following passes.

Admission quotas (:mod:`feltdb.work.quota_charges`) count occurrences as any admission: an
occurrence refused ``WORKLOAD_QUOTA_EXCEEDED`` is held back, not passed over. The cursor
stops before it (the refusal is the schedule's ``last_error``), and the next pass admits
it when the quota has room, as the catch-up rule says (``skip``: only the latest due then).
Any other refusal passes the occurrence over, and says so.

Authority: an occurrence is requested by the schedule's creator under the grant evidence it
created the schedule with, checked as admission checks it when the schedule was created.
A revoked grant stops the schedule (it is paused, with the reason); an expired one does
not: the schedule was authorized when it was made, as work admitted with a later
``not_before`` is. The advance is logged as ``schedule.occurred`` by :data:`SCHEDULER`.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from feltdb.auth import SignedGrant
from feltdb.errors import ErrorCode, WorkloadError
from feltdb.records.workload import Workload
from feltdb.storage.base import PlannedCommit, StorageConflict, StoredRow
from feltdb.work import occurrences
from feltdb.work.inputs import MAX_BATCH_ITEMS
from feltdb.work.models import CreateWorkload
from feltdb.work.revocations import is_grant_revoked
from feltdb.work.schedules import (
    SCHEDULES_COLLECTION,
    audit_of,
    occurrence_request,
    planned,
    recurrence_of,
    stored,
    write,
)

log = logging.getLogger("feltdb.scheduler")

SCHEDULER = "service:feltdb-scheduler"
"""Who the log records as advancing a schedule."""

MAX_PER_SCHEDULE_PER_PASS = 32
"""The most occurrences of one schedule a pass admits ."""

MAX_PER_PASS = 512
"""The most occurrences one pass admits, over every schedule; the rest wait a pass."""

if TYPE_CHECKING:  # the store builds the schedules; this module needs only its methods
    from feltdb.work.store import WorkloadStore


@dataclass(frozen=True, slots=True)
class Occurrence:
    """An occurrence a pass admitted (or found admitted): its schedule, tenant,
    application, instant and workload; ``created`` when this pass created the workload.
    """

    schedule_id: str
    tenant_id: str
    application_id: str
    instant: int
    workload_id: str
    created: bool


@dataclass(frozen=True, slots=True)
class _Due:
    """A schedule's due occurrences, as one pass read them: its row, its document, the
    instants (and whether earlier ones were skipped), and each one's admission request
    (or why it cannot be made).
    """

    row: StoredRow
    document: dict[str, Any]
    instants: list[int]
    skipped: bool
    requests: list[CreateWorkload | WorkloadError]


def run_due(store: WorkloadStore, now: int, most: int = MAX_PER_PASS) -> list[Occurrence]:
    """One scheduler pass over every schedule of ``store`` at ``now``: the occurrences
    admitted, at most ``most``. Costs one read of the schedules, one ``admit_many`` of
    every due occurrence (one transaction per :data:`~.inputs.MAX_BATCH_ITEMS`), and one
    ``commit_many`` of the schedules' guarded advances: two transactions however many
    schedules fire at once.

    A schedule whose row cannot be read as one is logged and passed over.

    Raises:
        WorkloadError: ``WORKLOAD_STORAGE_FAILURE``.
    """
    due: list[_Due] = []
    room = most
    for row in store.db.list_rows(SCHEDULES_COLLECTION):
        if room <= 0:
            break
        document = stored(row)
        if document.get("paused"):
            continue
        try:
            found = _due(store, row, document, now, room)
        except (WorkloadError, KeyError, TypeError, ValueError) as error:
            if getattr(error, "code", None) == ErrorCode.WORKLOAD_STORAGE_FAILURE:
                raise
            # One schedule the pass cannot read (a row written by other code) must not
            # stop every other schedule's occurrences.
            log.error("schedule row %s skipped: %s", row.key, error)
            continue
        if found is not None:
            due.append(found)
            room -= len(found.instants)
    requests = [r for d in due for r in d.requests if isinstance(r, CreateWorkload)]
    answers: list[tuple[Workload, bool] | WorkloadError] = []
    for start in range(0, len(requests), MAX_BATCH_ITEMS):
        answers.extend(store.admit_many(requests[start : start + MAX_BATCH_ITEMS]))
    answered = iter(answers)
    admitted: list[Occurrence] = []
    plans: list[PlannedCommit] = []
    for schedule in due:
        done, plan = _advanced(schedule, answered, now)
        admitted.extend(done)
        plans.append(plan)
    for start in range(0, len(plans), MAX_BATCH_ITEMS):
        # A lost guard (another scheduler advanced the schedule, or it was paused or
        # deleted) changes nothing: the next pass reads it again.
        store.db.commit_many(plans[start : start + MAX_BATCH_ITEMS])
    return admitted


def _due(
    store: WorkloadStore, row: StoredRow, document: dict[str, Any], now: int, room: int
) -> _Due | None:
    """The due occurrences of one schedule (at most ``room``), or ``None`` when none is
    due, or when its creator's grant was revoked (then it is paused, saying why).
    """
    rule = recurrence_of(document)
    bound = document["max_catch_up"] if document["catch_up"] == "all" else 1
    instants, skipped = occurrences.due(rule, document["cursor"], now, bound)
    if not instants:
        return None
    instants = instants[: min(room, MAX_PER_SCHEDULE_PER_PASS)]
    grant = SignedGrant.parse(document["authorization_snapshot"]).grant
    tenant_id, application_id = document["tenant_id"], document["application_id"]
    if is_grant_revoked(store.db, grant.id, tenant_id=tenant_id, application_id=application_id):
        reason = f"the grant {grant.id} it was created under was revoked: recreate the schedule"
        paused = {**document, "paused": True, "paused_reason": reason, "updated_at": now}
        with contextlib.suppress(StorageConflict):  # changed meanwhile: read next pass
            write(store.db, paused, row.key, row.version, audit_of("paused", SCHEDULER, paused))
        return None
    requests: list[CreateWorkload | WorkloadError] = []
    for instant in instants:
        try:
            requests.append(occurrence_request(document, instant, now))
        except WorkloadError as refusal:
            requests.append(refusal)
    return _Due(row, document, instants, skipped, requests)


def _advanced(
    schedule: _Due, answers: Iterator[tuple[Workload, bool] | WorkloadError], now: int
) -> tuple[list[Occurrence], PlannedCommit]:
    """What ``schedule``'s occurrences were answered (taken from ``answers`` in order),
    and the guarded commit that advances it past them.

    Raises:
        WorkloadError: ``WORKLOAD_STORAGE_FAILURE``.
    """
    document = schedule.document
    done: list[Occurrence] = []
    error: str | None = None
    cursor = schedule.instants[-1]
    for place, (instant, request) in enumerate(
        zip(schedule.instants, schedule.requests, strict=True)
    ):
        answer = request if isinstance(request, WorkloadError) else next(answers)
        if isinstance(answer, WorkloadError):
            if answer.code == ErrorCode.WORKLOAD_STORAGE_FAILURE:
                raise answer
            error = f"occurrence at {instant}: {answer}"  # passed over, and said
            if answer.code == ErrorCode.WORKLOAD_QUOTA_EXCEEDED and cursor >= instant:
                # Held back, not passed over: the cursor stops before it, and the next pass
                # admits it (as the catch-up rule says) when the quota has room.
                cursor = schedule.instants[place - 1] if place else document["cursor"]
            continue
        workload, created = answer
        if instant > cursor:
            continue  # admitted after one held back: a replay at the next pass
        done.append(Occurrence(
            document["schedule_id"], document["tenant_id"], document["application_id"],
            instant, workload.workload_id, created,
        ))  # fmt: skip
    advanced = {
        **document,
        "cursor": cursor,
        "last_occurrence": done[-1].instant if done else document["last_occurrence"],
        "last_workload_id": done[-1].workload_id if done else document["last_workload_id"],
        "admitted": document["admitted"] + len(done),
        "skipped_before": schedule.instants[0] if schedule.skipped else document["skipped_before"],
        "last_error": error if error is not None else document["last_error"],
        "updated_at": now,
    }
    audit = audit_of(
        "occurred", SCHEDULER, advanced,
        occurrences=[occurrence.instant for occurrence in done],
        workload_ids=[occurrence.workload_id for occurrence in done],
    )  # fmt: skip
    return done, planned(advanced, schedule.row.key, schedule.row.version, audit)
