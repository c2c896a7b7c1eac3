"""The scheduler: admit every due occurrence of every schedule, exactly once.

:func:`run_due` is one pass. For each schedule that is not paused it reads the occurrences
in ``(cursor, now]`` (:func:`~feltdb.work.occurrences.due`), admits them in one
``admit_many`` (each keyed by :func:`~feltdb.work.schedules.occurrence_key`, so an
occurrence another scheduler admitted already is a replay, never a second workload), then
advances the schedule's cursor in a commit guarded by the version it read. Two schedulers
racing on one store admit each occurrence once: the admissions converge on one workload
per key, and one of the two advances wins; the other's is refused and changes nothing. A
scheduler that stops between the two commits leaves the cursor behind; the next pass
admits the same keys again, which replays.

Catch-up after an outage: ``skip`` admits the latest due occurrence only (the skipped ones
are recorded as ``skipped_before``); ``all`` admits each, oldest first, at most the
schedule's ``max_catch_up`` (earlier ones are skipped), and at most
:data:`MAX_PER_SCHEDULE_PER_PASS` per pass, the rest on the following passes.

Authority: an occurrence is requested by the schedule's creator under the grant evidence it
created the schedule with, checked as admission checks it when the schedule was created.
A revoked grant stops the schedule (it is paused, with the reason); an expired one does
not: the schedule was authorized when it was made, as work admitted with a later
``not_before`` is. The advance is logged as ``schedule.occurred`` by :data:`SCHEDULER`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from feltdb.auth import SignedGrant
from feltdb.errors import ErrorCode, WorkloadError
from feltdb.storage.base import StorageConflict, StoredRow
from feltdb.work import occurrences
from feltdb.work.models import CreateWorkload
from feltdb.work.revocations import is_grant_revoked
from feltdb.work.schedules import (
    SCHEDULES_COLLECTION,
    audit_of,
    occurrence_request,
    recurrence_of,
    stored,
    write,
)

SCHEDULER = "service:feltdb-scheduler"
"""Who the log records as advancing a schedule."""

MAX_PER_SCHEDULE_PER_PASS = 32
"""The most occurrences of one schedule a pass admits (one ``admit_many``)."""

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


def run_due(store: WorkloadStore, now: int, most: int = MAX_PER_PASS) -> list[Occurrence]:
    """One scheduler pass over every schedule of ``store`` (a ``WorkloadStore``) at
    ``now``: the occurrences admitted, at most ``most``. Costs one read of the schedules,
    and per schedule with due occurrences one ``admit_many`` and one guarded commit.

    Raises:
        WorkloadError: ``WORKLOAD_STORAGE_FAILURE``.
    """
    admitted: list[Occurrence] = []
    for row in store.db.list_rows(SCHEDULES_COLLECTION):
        room = most - len(admitted)
        if room <= 0:
            break
        document = stored(row)
        if document.get("paused"):
            continue
        admitted.extend(_run_schedule(store, row, document, now, room))
    return admitted


def _run_schedule(
    store: WorkloadStore, row: StoredRow, document: dict[str, Any], now: int, room: int
) -> list[Occurrence]:
    """Admit the due occurrences of one schedule and advance it; what was admitted."""
    rule = recurrence_of(document)
    bound = document["max_catch_up"] if document["catch_up"] == "all" else 1
    instants, skipped = occurrences.due(rule, document["cursor"], now, bound)
    if not instants:
        return []
    instants = instants[: min(room, MAX_PER_SCHEDULE_PER_PASS)]
    grant = SignedGrant.parse(document["authorization_snapshot"]).grant
    if is_grant_revoked(
        store.db,
        grant.id,
        tenant_id=document["tenant_id"],
        application_id=document["application_id"],
    ):
        _advance(store, row, {**document, "paused": True, "paused_reason": (
            f"the grant {grant.id} it was created under was revoked: recreate the schedule"
        ), "updated_at": now}, "paused", [])  # fmt: skip
        return []
    requests: list[CreateWorkload | WorkloadError] = []
    for instant in instants:
        try:
            requests.append(occurrence_request(document, instant, now))
        except WorkloadError as refusal:
            requests.append(refusal)
    answers = store.admit_many([r for r in requests if isinstance(r, CreateWorkload)])
    done: list[Occurrence] = []
    error: str | None = None
    answered = iter(answers)
    for instant, request in zip(instants, requests, strict=True):
        answer = request if isinstance(request, WorkloadError) else next(answered)
        if isinstance(answer, WorkloadError):
            if answer.code == ErrorCode.WORKLOAD_STORAGE_FAILURE:
                raise answer
            error = f"occurrence at {instant}: {answer}"
            continue
        workload, created = answer
        done.append(Occurrence(
            document["schedule_id"], document["tenant_id"], document["application_id"],
            instant, workload.workload_id, created,
        ))  # fmt: skip
    advanced = {
        **document,
        "cursor": instants[-1],
        "last_occurrence": done[-1].instant if done else document["last_occurrence"],
        "last_workload_id": done[-1].workload_id if done else document["last_workload_id"],
        "admitted": document["admitted"] + len(done),
        "skipped_before": instants[0] if skipped else document["skipped_before"],
        "last_error": error if error is not None else document["last_error"],
        "updated_at": now,
    }
    _advance(store, row, advanced, "occurred", done)
    return done


def _advance(
    store: WorkloadStore,
    row: StoredRow,
    document: dict[str, Any],
    kind: str,
    done: list[Occurrence],
) -> None:
    """Commit the schedule's ``document``, guarded by the version ``row`` was read at; a
    lost guard (another scheduler advanced it, or it was paused or deleted) changes
    nothing, for the next pass reads it again.
    """
    audit = audit_of(
        kind,
        SCHEDULER,
        document,
        occurrences=[occurrence.instant for occurrence in done],
        workload_ids=[occurrence.workload_id for occurrence in done],
    )
    try:
        write(store.db, document, row.key, row.version, audit)
    except StorageConflict:
        return
