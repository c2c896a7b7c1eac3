"""The one public error type of feltdb and its stable codes.

Every refusal anywhere in feltdb is a :class:`WorkloadError` whose ``code`` is one of
:class:`ErrorCode`. The codes are the reference's (feltdb 0.4.0), spelled identically,
so that clients in any language can branch on them.
"""

from __future__ import annotations

import enum
from typing import Any


class ErrorCode(enum.StrEnum):
    """Stable error codes, each with the message used when a refusal gives none."""

    default_message: str

    def __new__(cls, value: str, default_message: str) -> ErrorCode:  # noqa: D102
        member = str.__new__(cls, value)
        member._value_ = value
        member.default_message = default_message
        return member

    WORKLOAD_NOT_FOUND = ("WORKLOAD_NOT_FOUND", "workload not found")
    WORKLOAD_INVALID = ("WORKLOAD_INVALID", "the request is invalid")
    WORKLOAD_UNAUTHORIZED = (
        "WORKLOAD_UNAUTHORIZED",
        "authorization snapshot does not bind the requester",
    )
    IDEMPOTENCY_KEY_REUSED = (
        "IDEMPOTENCY_KEY_REUSED",
        "idempotency key was already used for a different request",
    )
    WORKLOAD_TRANSITION_DENIED = (
        "WORKLOAD_TRANSITION_DENIED",
        "the workload cannot make this transition",
    )
    WORKLOAD_ATTEMPTS_EXHAUSTED = (
        "WORKLOAD_ATTEMPTS_EXHAUSTED",
        "workload has used its attempt budget",
    )
    WORKLOAD_APPROVAL_PENDING = ("WORKLOAD_APPROVAL_PENDING", "workload is awaiting approval")
    WORKLOAD_REJECTED = ("WORKLOAD_REJECTED", "workload was rejected and will not run")
    WORKLOAD_NOT_READY = ("WORKLOAD_NOT_READY", "workload is not eligible")
    WORKLOAD_NOT_YET_ELIGIBLE = ("WORKLOAD_NOT_YET_ELIGIBLE", "workload is not claimable yet")
    WORKLOAD_CAPABILITY_DENIED = (
        "WORKLOAD_CAPABILITY_DENIED",
        "worker lacks required capability snapshot",
    )
    WORKLOAD_CLAIM_INVALID = ("WORKLOAD_CLAIM_INVALID", "no active claim")
    WORKLOAD_STALE_FENCE = ("WORKLOAD_STALE_FENCE", "claim or fencing token is stale")
    WORKLOAD_LEASE_EXPIRED = ("WORKLOAD_LEASE_EXPIRED", "claim lease expired")
    WORKLOAD_SECRET_REJECTED = (
        "WORKLOAD_SECRET_REJECTED",
        "plaintext secrets are forbidden in workload state",
    )
    WORKLOAD_RESULT_CONFLICT = (
        "WORKLOAD_RESULT_CONFLICT",
        "the result id was already recorded by a different report",
    )
    WORKLOAD_RESULT_DUPLICATE = (
        "WORKLOAD_RESULT_DUPLICATE",
        "result id belongs to another workload",
    )
    WORKLOAD_RETRY_EXHAUSTED = (
        "WORKLOAD_RETRY_EXHAUSTED",
        "workload has used every operator retry its policy allows",
    )
    WORKLOAD_APPROVAL_NOT_REQUIRED = (
        "WORKLOAD_APPROVAL_NOT_REQUIRED",
        "this workload was not admitted with an approval requirement",
    )
    WORKLOAD_APPROVAL_STALE = (
        "WORKLOAD_APPROVAL_STALE",
        "the decision names input this workload does not have",
    )
    WORKLOAD_APPROVAL_DECIDED = (
        "WORKLOAD_APPROVAL_DECIDED",
        "a different decision was already committed",
    )
    WORKLOAD_APPROVAL_NOT_ACTIONABLE = (
        "WORKLOAD_APPROVAL_NOT_ACTIONABLE",
        "the workload is no longer awaiting approval",
    )
    WORKLOAD_APPROVER_NOT_PERMITTED = (
        "WORKLOAD_APPROVER_NOT_PERMITTED",
        "the decider may not decide this workload",
    )
    WORKLOAD_CONFLICT = ("WORKLOAD_CONFLICT", "another writer committed this workload first")
    WORKLOAD_TIMED_OUT = ("WORKLOAD_TIMED_OUT", "the workload's deadline passed")
    WORKLOAD_STORAGE_FAILURE = (
        "WORKLOAD_STORAGE_FAILURE",
        "the store could not be read or written",
    )
    WORKLOAD_MIGRATION_CONFLICT = (
        "WORKLOAD_MIGRATION_CONFLICT",
        "the legacy source conflicts with canonical work",
    )
    WORKLOAD_QUOTA_EXCEEDED = (
        "WORKLOAD_QUOTA_EXCEEDED",
        "the admission quota of the tenant or grant is used up",
    )


class WorkloadError(Exception):
    """A refusal by the authority. Nothing was committed by the call that raised it.

    Attributes:
        code: one of :class:`ErrorCode`'s values, e.g. ``"WORKLOAD_STALE_FENCE"``.
        message: what went wrong, for people.
        details: structured detail for programs, e.g. ``{"fields": ["priority"]}``.
    """

    def __init__(
        self,
        code: ErrorCode | str,
        message: str | None = None,
        details: dict[str, Any] | None = None,
    ) -> None:
        if not isinstance(code, ErrorCode):
            try:
                code = ErrorCode[code]
            except KeyError:
                raise ValueError(f"unknown error code {code!r}") from None
        self.code: str = code.value
        self.message: str = message if message is not None else code.default_message
        self.details: dict[str, Any] | None = details
        super().__init__(f"{self.code}: {self.message}")

    def __reduce__(self) -> tuple[Any, ...]:
        # Rebuild from the attributes, not from args: subclasses take other arguments, and
        # errors must cross process boundaries (multiprocessing, worker pools).
        return (_rebuild, (type(self), self.code, self.message, self.details))

    def __repr__(self) -> str:
        return f"WorkloadError({self.code!r}, {self.message!r}, {self.details!r})"


def _rebuild(
    kind: type[WorkloadError], code: str, message: str, details: dict[str, Any] | None
) -> WorkloadError:
    error = Exception.__new__(kind)
    WorkloadError.__init__(error, code, message, details)
    return error
