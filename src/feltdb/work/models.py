"""The requests that enter the authority: validated where they enter.

``CreateWorkload`` (and the HTTP submission made from it) is pydantic: constructing one
from bad input raises :class:`~feltdb.errors.WorkloadError` ``WORKLOAD_INVALID`` naming
every bad field, nested ones by path (``retry_policy.max_attempts``). The records the
authority makes from a request are plain structs (:mod:`feltdb.records.workload`).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from pydantic._internal._model_construction import ModelMetaclass

from feltdb.auth import SignedGrant, Subject
from feltdb.errors import ErrorCode, WorkloadError
from feltdb.fields import ConcurrencyLimit, Instant, Priority, StringSet, TraceContext
from feltdb.records.workload import (
    ApprovalPolicy,
    WorkloadDependency,
    WorkloadRetryPolicy,
    WorkloadTimeouts,
)
from feltdb.storage.canonical import canonical_json


def invalid_input(record: str, error: ValidationError) -> WorkloadError:
    """Translate a validation failure into ``WORKLOAD_INVALID`` naming each bad field."""
    fields: list[str] = []
    problems: list[str] = []
    for item in error.errors(include_url=False):
        path = ".".join(str(part) for part in item["loc"]) or record
        if path not in fields:
            fields.append(path)
        problems.append(f"{path}: {item['msg']}")
    return WorkloadError(
        ErrorCode.WORKLOAD_INVALID,
        f"invalid {record}: " + "; ".join(problems),
        {"fields": fields},
    )


class _RequestMeta(ModelMetaclass):
    # Wrapping construction here rather than in __init__: pydantic routes model_validate
    # (and every nested model) through a custom __init__, which would lose field paths.
    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        try:
            return super().__call__(*args, **kwargs)
        except ValidationError as error:
            raise invalid_input(cls.__name__, error) from error


class Request(BaseModel, metaclass=_RequestMeta):
    """Base of the requests that enter the authority (pydantic, validated when made):
    strict about unknown fields, JSON by the reference's names. Its maker may still change
    one before it is submitted (an assignment is not validated: the admission validates
    what it is given).
    """

    model_config = ConfigDict(
        extra="forbid",
        serialize_by_alias=True,
        validate_by_name=True,
        validate_by_alias=True,
    )

    @classmethod
    def parse(cls, data: Any) -> Any:
        """Validate ``data`` (a dict or a JSON string) into this request.

        Raises:
            WorkloadError: ``WORKLOAD_INVALID`` naming each bad field.
        """
        try:
            if isinstance(data, str | bytes):
                return cls.model_validate_json(data)
            return cls.model_validate(data)
        except ValidationError as error:
            raise invalid_input(cls.__name__, error) from error

    def to_json(self) -> dict[str, Any]:
        """This request as a JSON-ready dict with the reference's field names."""
        return self.model_dump(mode="json")


def _require_json(value: Any) -> Any:
    try:
        canonical_json(value)
    except ValueError as error:
        raise ValueError(
            f"must be JSON (objects, arrays, strings, numbers, booleans, null): {error}"
        ) from None
    return value


class CreateWorkload(Request):
    """A request to admit a workload. Construct it with keywords."""

    tenant_id: str
    application_id: str
    environment: str
    definition_id: str
    definition_revision: str
    trigger: str
    input: Any
    requested_by: Subject
    session_id: str | None = None
    authorization_snapshot: SignedGrant
    capability_snapshot: StringSet
    connection_scopes: StringSet = Field(default_factory=frozenset)
    priority: Priority = 0
    idempotency_key: str
    retry_policy: WorkloadRetryPolicy = Field(default_factory=WorkloadRetryPolicy)
    timeouts: WorkloadTimeouts = Field(default_factory=WorkloadTimeouts)
    dependencies: list[WorkloadDependency] = Field(default_factory=list)
    not_before: Instant | None = None
    """Not claimable before this instant. Not a schedule: nothing re-arms it. A past
    instant is not an error; it means "eligible now"."""
    created_at: Instant
    approval: ApprovalPolicy | None = Field(default=None, exclude_if=lambda value: value is None)
    """Require an approval decision before the work may be claimed."""
    concurrency_key: str | None = Field(default=None, exclude_if=lambda value: value is None)
    """With ``concurrency_limit``: at most that many workloads of this key (in the tenant's
    application) hold a live claim at once; a claim skips to other work meanwhile."""
    concurrency_limit: ConcurrencyLimit | None = Field(
        default=None, exclude_if=lambda value: value is None
    )
    rate_limit: str | None = Field(default=None, exclude_if=lambda value: value is None)
    """The name of a rate limit of the application (N starts a period): its claims wait
    their turn. A name not set runs unlimited."""
    rate_key: str | None = Field(default=None, exclude_if=lambda value: value is None)
    """With ``rate_limit``: the key whose own window the starts count in (a customer)."""
    fairness_key: str | None = Field(default=None, exclude_if=lambda value: value is None)
    """The key (a customer) whose work takes turns with other keys' at each claim, so one
    key's backlog does not starve another's."""
    trace_context: TraceContext | None = Field(default=None, exclude_if=lambda value: value is None)
    """The caller's W3C trace context (``traceparent``, ``tracestate``), so the work's
    spans join its trace; clients fill it in from the current span (:mod:`feltdb.tracing`).
    A replay of the key from another trace still answers the original workload."""

    _validate_input = field_validator("input")(classmethod(lambda cls, value: _require_json(value)))
