"""The bodies of the ``/v1/schedules`` routes: the declared schema of a new schedule, and
the answers.

A new schedule's body is read as a dict and checked whole by the store
(:func:`~feltdb.work.schedules.new_schedule`), as a submission's is by admission; FastAPI
is told its schema (:data:`SCHEDULE_SCHEMA`), which says every bound the store checks
but a cron expression's grammar, a zone's presence in the IANA database, and that exactly
one of ``cron`` and ``interval_s`` is given. Its ``template`` is the submission's schema
without the fields the scheduler sets per occurrence.
"""

from __future__ import annotations

import copy
from typing import Any

from pydantic import BaseModel

from feltdb.server.openapi import SUBMISSION_SCHEMA
from feltdb.work.occurrences import MAX_CRON_CHARS, MAX_INTERVAL_S, MIN_INTERVAL_S
from feltdb.work.schedules import (
    CATCH_UP_POLICIES,
    DEFAULT_MAX_CATCH_UP,
    MAX_CATCH_UP,
    NOT_IN_A_TEMPLATE,
)

SCHEDULE_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"
"""A schedule id, as :func:`~feltdb.work.schedules.schedule_id` checks it."""


def _template_schema() -> dict[str, Any]:
    """The submission's schema without :data:`~feltdb.work.schedules.NOT_IN_A_TEMPLATE`."""
    schema = copy.deepcopy(SUBMISSION_SCHEMA)
    for name in NOT_IN_A_TEMPLATE:
        schema["properties"].pop(name, None)
    schema["required"] = [n for n in schema.get("required", []) if n not in NOT_IN_A_TEMPLATE]
    schema.update(
        title="ScheduleTemplate",
        description="What each occurrence submits: a submission without idempotency_key,"
        " not_before, trigger, session_id or dependencies (the scheduler sets the key, the"
        " instant and the trigger schedule:<id>).",
    )
    return schema


def _nullable(schema: dict[str, Any]) -> dict[str, Any]:
    return {"anyOf": [schema, {"type": "null"}], "default": None}


SCHEDULE_SCHEMA: dict[str, Any] = {
    "title": "CreateSchedule",
    "type": "object",
    "additionalProperties": False,
    "required": ["schedule_id", "template"],
    "properties": {
        "schedule_id": {"type": "string", "pattern": SCHEDULE_ID_PATTERN},
        "cron": _nullable({"type": "string", "minLength": 1, "maxLength": MAX_CRON_CHARS}),
        "timezone": _nullable({"type": "string", "minLength": 1, "maxLength": 64}),
        "interval_s": _nullable(
            {"type": "integer", "minimum": MIN_INTERVAL_S, "maximum": MAX_INTERVAL_S}
        ),
        "catch_up": {"type": "string", "enum": list(CATCH_UP_POLICIES), "default": "skip"},
        "max_catch_up": {
            "type": "integer",
            "minimum": 1,
            "maximum": MAX_CATCH_UP,
            "default": DEFAULT_MAX_CATCH_UP,
        },
        "template": _template_schema(),
    },
    "description": "A recurring schedule: five-field cron in an IANA time zone (UTC by"
    " default) or interval_s, exactly one; catch_up skip (after missed occurrences, admit"
    " the latest only) or all (each, oldest first, at most max_catch_up).",
}
"""The declared body of ``POST /v1/schedules``."""

_EXAMPLE = {
    "schedule_id": "nightly-report",
    "cron": "30 2 * * *",
    "timezone": "Europe/Berlin",
    "catch_up": "skip",
    "template": {"definition_id": "report", "input": {"period": "day"}},
}

SCHEDULE_BODY = {
    "requestBody": {
        "required": True,
        "content": {"application/json": {"schema": SCHEDULE_SCHEMA, "example": _EXAMPLE}},
    }
}
"""``POST /v1/schedules``'s ``openapi_extra``."""


class ScheduleAnswer(BaseModel):
    """A schedule as it is answered: its recurrence, template and catch-up policy, whether
    it is paused (and why, when the scheduler paused it), what it last admitted, and its
    next occurrence (``null`` while paused). Instants are unix seconds.
    """

    schedule_id: str
    tenant_id: str
    application_id: str
    cron: str | None
    timezone: str | None
    interval_s: int | None
    catch_up: str
    max_catch_up: int
    template: dict[str, Any]
    created_by: str
    created_at: int
    updated_at: int
    paused: bool
    paused_reason: str | None
    last_occurrence: int | None
    last_workload_id: str | None
    admitted: int
    """How many occurrences were admitted."""
    skipped_before: int | None
    """When catch-up last skipped occurrences: those before this instant were skipped."""
    last_error: str | None
    """The last refusal of an occurrence's admission (the occurrence is passed over)."""
    grant_id: str
    """The grant the creator held: the evidence each occurrence keeps."""
    next_occurrence: int | None


class ScheduleList(BaseModel):
    """The application's schedules, by id."""

    items: list[ScheduleAnswer]


class NextOccurrences(BaseModel):
    """A dry run: the schedule's next occurrences (unix seconds), admitting nothing."""

    schedule_id: str
    occurrences: list[int]


class DeletedAnswer(BaseModel):
    """The schedule was deleted (the work it admitted stays)."""

    schedule_id: str
    deleted: bool
