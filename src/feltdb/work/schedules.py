"""Recurring schedules: a row of its own per schedule, in :data:`SCHEDULES_COLLECTION`.

A schedule is a :class:`~feltdb.work.occurrences.Recurrence` (cron in a time zone, or an
interval), a workload template (a submission without its key, ``not_before``, trigger,
session or dependencies), a catch-up policy, and the requester and grant evidence of its
creator. Each occurrence is admitted by :mod:`feltdb.work.scheduler` under the key
:func:`occurrence_key` with ``not_before`` at the occurrence.

The row is keyed by a digest of ``[tenant, application, schedule id]`` (as revocations
are), indexed by tenant and application so an application's schedules are one ranged
read. Every change is a commit guarded by the version read (or require-absent), logged
with the audit kinds ``schedule.created``, ``.paused``, ``.resumed``, ``.deleted``.
"""

from __future__ import annotations

import re
import secrets
from typing import Any

from feltdb.auth import SignedGrant, Subject
from feltdb.errors import ErrorCode, WorkloadError
from feltdb.storage.base import (
    Database,
    Mutation,
    PlannedCommit,
    Precondition,
    RowIndex,
    StorageConflict,
    StoredRow,
)
from feltdb.storage.canonical import canonical_json, sha256_hex
from feltdb.work import inputs, occurrences
from feltdb.work.admitting import authorized
from feltdb.work.models import CreateWorkload
from feltdb.work.submission import admission_request

SCHEDULES_COLLECTION = "system_schedules"
"""Where schedules are kept."""

MAX_SCHEDULES_PER_APPLICATION = 100
"""The most schedules one tenant's application may have."""

MAX_TEMPLATE_BYTES = 64 * 1024
"""The largest workload template, as canonical JSON (its input included)."""

MAX_CATCH_UP = 1000
"""The most missed occurrences a schedule with ``catch_up="all"`` admits after an outage
(its ``max_catch_up``, 1 to this; 100 by default): earlier ones are skipped."""

DEFAULT_MAX_CATCH_UP = 100

CATCH_UP_POLICIES = ("skip", "all")
"""``skip``: after missed occurrences, admit only the latest; ``all``: admit each, oldest
first, at most ``max_catch_up`` of them."""

NOT_IN_A_TEMPLATE = ("idempotency_key", "not_before", "trigger", "session_id", "dependencies")
"""Submission fields the scheduler sets per occurrence, or that a recurrence cannot keep."""

_SCHEDULE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
"""A schedule id: 1 to 64 letters, digits, ``.``, ``_`` or ``-`` (safe in a URL path)."""

TRIGGER_PREFIX = "schedule:"
"""An occurrence's workload has trigger ``schedule:<id>``."""


def schedule_key(tenant_id: str, application_id: str, schedule_id: str) -> str:
    """The key of a schedule's row: a digest of ``[tenant, application, id]``."""
    return "schedule_" + sha256_hex(canonical_json([tenant_id, application_id, schedule_id]))[:32]


def schedule_id(value: Any) -> str:
    """``value`` if it is a schedule id (see :data:`_SCHEDULE_ID`).

    Raises:
        WorkloadError: ``WORKLOAD_INVALID`` naming ``schedule_id``.
    """
    if not isinstance(value, str) or _SCHEDULE_ID.fullmatch(value) is None:
        raise inputs.invalid(
            "schedule_id", "must be 1 to 64 letters, digits, '.', '_' or '-', starting alnum"
        )
    return value


def occurrence_key(schedule: str, instant: int) -> str:
    """The idempotency key of ``schedule``'s occurrence at ``instant``: a pure function of
    the two, so every scheduler admitting that occurrence names one workload.
    """
    return f"{TRIGGER_PREFIX}{schedule}@{instant}"


def occurrence_request(document: dict[str, Any], instant: int, now: int) -> CreateWorkload:
    """The admission of the occurrence at ``instant`` of the schedule stored as
    ``document``, made at ``now``: the template, keyed by :func:`occurrence_key`, with
    ``not_before`` the occurrence, requested by the schedule's creator under its grant.

    Raises:
        WorkloadError: ``WORKLOAD_INVALID`` naming each bad field of the template.
    """
    return admission_request(
        {
            **document["template"],
            "idempotency_key": occurrence_key(document["schedule_id"], instant),
            "not_before": instant,
            "trigger": TRIGGER_PREFIX + document["schedule_id"],
        },
        tenant_id=document["tenant_id"],
        application_id=document["application_id"],
        requested_by=Subject.parse(document["requested_by"]),
        authorization_snapshot=SignedGrant.parse(document["authorization_snapshot"]),
        created_at=now,
    )


def recurrence_of(document: dict[str, Any]) -> occurrences.Recurrence:
    """The recurrence a stored schedule keeps."""
    return occurrences.Recurrence(
        cron=document.get("cron"),
        timezone=document.get("timezone"),
        interval_s=document.get("interval_s"),
        anchor=document.get("anchor", 0),
    )


def _template(template: Any) -> dict[str, Any]:
    """``template`` if it is a JSON object within :data:`MAX_TEMPLATE_BYTES` holding none of
    :data:`NOT_IN_A_TEMPLATE` (the rest is checked as an admission is).

    Raises:
        WorkloadError: ``WORKLOAD_INVALID`` naming the field.
    """
    if not isinstance(template, dict):
        raise inputs.invalid("template", "must be a JSON object: a submission")
    kept = sorted(name for name in NOT_IN_A_TEMPLATE if name in template)
    if kept:
        raise WorkloadError(
            ErrorCode.WORKLOAD_INVALID,
            "template: the scheduler sets these per occurrence, or a recurrence cannot keep"
            " them: " + ", ".join(kept),
            {"fields": [f"template.{name}" for name in kept]},
        )
    try:
        size = len(canonical_json(template).encode("utf-8"))
    except ValueError as error:
        raise inputs.invalid("template", f"must be JSON: {error}") from None
    if size > MAX_TEMPLATE_BYTES:
        raise inputs.invalid("template", f"is {size:,} bytes of JSON, over {MAX_TEMPLATE_BYTES:,}")
    return template


def admissible(document: dict[str, Any], instant: int, now: int) -> None:
    """Refuse a schedule whose occurrence at ``instant`` admission would refuse: the checks
    of an admission (the template's fields, secrets, bounds, the grant binding the requester
    and covering the environment, definition and workload), made once, at creation.

    Raises:
        WorkloadError: ``WORKLOAD_INVALID``, ``WORKLOAD_SECRET_REJECTED``,
            ``WORKLOAD_UNAUTHORIZED``.
    """
    try:
        authorized(occurrence_request(document, instant, now))
    except WorkloadError as refusal:
        fields = (refusal.details or {}).get("fields")
        if not isinstance(fields, list):
            raise
        # Every field an occurrence's admission names is the template's.
        raise WorkloadError(
            refusal.code,
            f"template: {refusal.message}",
            {**(refusal.details or {}), "fields": [f"template.{name}" for name in fields]},
        ) from None


def new_schedule(
    spec: dict[str, Any],
    *,
    tenant_id: str,
    application_id: str,
    requested_by: Subject,
    authorization_snapshot: SignedGrant,
    now: int,
) -> dict[str, Any]:
    """The document of a new schedule from ``spec`` (``schedule_id``, ``cron`` with
    ``timezone`` or ``interval_s``, ``catch_up``, ``max_catch_up``, ``template``), checked
    whole: its first occurrence is checked as its admission will be (:func:`admissible`).

    Raises:
        WorkloadError: ``WORKLOAD_INVALID`` naming the field; the refusals of :func:`admissible`.
    """
    unknown = sorted(set(spec) - {*_SPEC_FIELDS})
    if unknown:
        raise WorkloadError(
            ErrorCode.WORKLOAD_INVALID,
            f"unknown schedule fields: {', '.join(unknown)}",
            {"fields": unknown},
        )
    rule = occurrences.recurrence(
        spec.get("cron"), spec.get("timezone"), spec.get("interval_s"), anchor=now
    )
    catch_up = spec.get("catch_up", "skip")
    if catch_up not in CATCH_UP_POLICIES:
        raise inputs.invalid("catch_up", "must be 'skip' or 'all'")
    most = inputs.integer(
        spec.get("max_catch_up", DEFAULT_MAX_CATCH_UP), "max_catch_up", 1, MAX_CATCH_UP
    )
    document: dict[str, Any] = {
        "schedule_id": schedule_id(spec.get("schedule_id")),
        "tenant_id": inputs.identifier(tenant_id, "tenant_id"),
        "application_id": inputs.identifier(application_id, "application_id"),
        "cron": rule.cron,
        "timezone": rule.timezone,
        "interval_s": rule.interval_s,
        "anchor": rule.anchor,
        "catch_up": catch_up,
        "max_catch_up": most,
        "template": _template(spec.get("template")),
        "requested_by": requested_by.to_json(),
        "authorization_snapshot": authorization_snapshot.to_json(),
        "created_by": str(requested_by),
        "created_at": now,
        "updated_at": now,
        "paused": False,
        "paused_reason": None,
        "cursor": now,
        "last_occurrence": None,
        "last_workload_id": None,
        "admitted": 0,
        "skipped_before": None,
        "last_error": None,
    }
    first = occurrences.occurrences_after(rule, now, 1)
    admissible(document, first[0] if first else now, now)
    return document


_SPEC_FIELDS = (
    "schedule_id",
    "cron",
    "timezone",
    "interval_s",
    "catch_up",
    "max_catch_up",
    "template",
)


def row_index(document: dict[str, Any]) -> RowIndex:
    """The indexed columns of a schedule's row: its tenant, application and creation."""
    return RowIndex(
        tenant_id=document["tenant_id"],
        application_id=document["application_id"],
        created_at=document["created_at"],
    )


def stored(row: StoredRow) -> dict[str, Any]:
    """A schedule's stored document, without the backend's version stamp."""
    return {key: value for key, value in row.document.items() if key != "__version"}


def planned(
    document: dict[str, Any] | None,
    key: str,
    version: int | None,
    audit: dict[str, Any],
) -> PlannedCommit:
    """The commit of ``document`` (``None``: a delete) at ``key``, guarded by ``version``
    (``None``: the row must not exist), logged with ``audit``.
    """
    operation_id = "schedule_tx_" + secrets.token_hex(12)
    index = row_index(document) if document is not None else RowIndex()
    return PlannedCommit(
        operation_id,
        [Mutation(SCHEDULES_COLLECTION, key, document, index)],
        [
            Precondition(
                SCHEDULES_COLLECTION,
                key,
                require_absent=version is None,
                expected_version=version,
            )
        ],
        {**audit, "operation_id": operation_id},
    )


def write(
    db: Database,
    document: dict[str, Any] | None,
    key: str,
    version: int | None,
    audit: dict[str, Any],
) -> None:
    """Commit :func:`planned`.

    Raises:
        StorageConflict: the guard was lost; WorkloadError: ``WORKLOAD_STORAGE_FAILURE``.
    """
    plan = planned(document, key, version, audit)
    db.commit(plan.operation_id, plan.mutations, plan.preconditions, plan.audit)


def audit_of(kind: str, actor: str, document: dict[str, Any], **more: Any) -> dict[str, Any]:
    """The audit record of a change of the schedule ``document`` by ``actor``."""
    return {
        "kind": f"schedule.{kind}",
        "subject": actor,
        "actor": actor,
        "tenant": document["tenant_id"],
        "application": document["application_id"],
        "schedule_id": document["schedule_id"],
        **more,
    }


def conflict(schedule: str, what: str) -> WorkloadError:
    """``WORKLOAD_CONFLICT``: another writer changed ``schedule`` while ``what``."""
    return WorkloadError(
        ErrorCode.WORKLOAD_CONFLICT,
        f"schedule {schedule} was changed by another writer while {what}: read it again",
        {"schedule_id": schedule},
    )


def not_found(schedule: str) -> WorkloadError:
    """``WORKLOAD_NOT_FOUND`` for ``schedule``."""
    return WorkloadError(
        ErrorCode.WORKLOAD_NOT_FOUND, f"schedule {schedule} not found", {"schedule_id": schedule}
    )


def too_many(tenant_id: str, application_id: str) -> WorkloadError:
    """``WORKLOAD_CONFLICT``: the application has :data:`MAX_SCHEDULES_PER_APPLICATION`
    (a refusal by what is stored, not by the request's shape).
    """
    return WorkloadError(
        ErrorCode.WORKLOAD_CONFLICT,
        f"application {application_id} of tenant {tenant_id} has"
        f" {MAX_SCHEDULES_PER_APPLICATION} schedules, the most it may: delete one first",
        {"fields": ["schedule_id"]},
    )


def create(db: Database, document: dict[str, Any], actor: str) -> None:
    """Commit the new schedule ``document`` (from :func:`new_schedule`).

    Raises:
        WorkloadError: ``WORKLOAD_CONFLICT`` when a schedule of that id exists;
            ``WORKLOAD_INVALID`` when the application has as many schedules as it may.
    """
    tenant_id, application_id = document["tenant_id"], document["application_id"]
    name = document["schedule_id"]
    key = schedule_key(tenant_id, application_id, name)
    exists = WorkloadError(
        ErrorCode.WORKLOAD_CONFLICT,
        f"schedule {name} exists: delete it first, or choose another id",
        {"schedule_id": name},
    )
    if db.get_row(SCHEDULES_COLLECTION, key) is not None:
        raise exists
    held = db.list_rows(
        SCHEDULES_COLLECTION,
        tenant_id=tenant_id,
        application_id=application_id,
        limit=MAX_SCHEDULES_PER_APPLICATION,
    )
    if len(held) >= MAX_SCHEDULES_PER_APPLICATION:
        raise too_many(tenant_id, application_id)
    try:
        write(db, document, key, None, audit_of("created", actor, document))
    except StorageConflict:
        raise exists from None
