"""feltdb.errors: one error type, the reference's codes, each with a default message."""

from __future__ import annotations

import pytest

from feltdb import WorkloadError
from feltdb.errors import ErrorCode

# docs/api.md, "Errors", in its order.
API_CODES = [
    "WORKLOAD_NOT_FOUND",
    "WORKLOAD_INVALID",
    "WORKLOAD_UNAUTHORIZED",
    "IDEMPOTENCY_KEY_REUSED",
    "WORKLOAD_TRANSITION_DENIED",
    "WORKLOAD_ATTEMPTS_EXHAUSTED",
    "WORKLOAD_APPROVAL_PENDING",
    "WORKLOAD_REJECTED",
    "WORKLOAD_NOT_READY",
    "WORKLOAD_NOT_YET_ELIGIBLE",
    "WORKLOAD_CAPABILITY_DENIED",
    "WORKLOAD_CLAIM_INVALID",
    "WORKLOAD_STALE_FENCE",
    "WORKLOAD_LEASE_EXPIRED",
    "WORKLOAD_SECRET_REJECTED",
    "WORKLOAD_RESULT_CONFLICT",
    "WORKLOAD_RESULT_DUPLICATE",
    "WORKLOAD_RETRY_EXHAUSTED",
    "WORKLOAD_APPROVAL_NOT_REQUIRED",
    "WORKLOAD_APPROVAL_STALE",
    "WORKLOAD_APPROVAL_DECIDED",
    "WORKLOAD_APPROVAL_NOT_ACTIONABLE",
    "WORKLOAD_APPROVER_NOT_PERMITTED",
    "WORKLOAD_CONFLICT",
    "WORKLOAD_TIMED_OUT",
    "WORKLOAD_STORAGE_FAILURE",
    "WORKLOAD_MIGRATION_CONFLICT",
    "WORKLOAD_QUOTA_EXCEEDED",
]


def test_the_codes_are_exactly_those_of_api_md():
    assert len(API_CODES) == len(set(API_CODES)) == 28
    assert {code.value for code in ErrorCode} == set(API_CODES)


@pytest.mark.parametrize("code", list(ErrorCode), ids=str)
def test_each_code_is_spelled_as_its_name(code):
    assert code.value == code.name
    assert code == code.name  # a StrEnum: compares equal to its spelling


@pytest.mark.parametrize("code", list(ErrorCode), ids=str)
def test_each_code_has_a_default_message(code):
    assert isinstance(code.default_message, str)
    assert code.default_message.strip()
    assert code.default_message != code.value


def test_the_default_messages_are_distinct():
    messages = [code.default_message for code in ErrorCode]
    assert len(messages) == len(set(messages))


@pytest.mark.parametrize("code", API_CODES)
def test_an_error_without_a_message_uses_the_default(code):
    error = WorkloadError(code)
    assert error.code == code
    assert type(error.code) is str
    assert error.message == ErrorCode[code].default_message
    assert error.details is None
    assert str(error) == f"{code}: {error.message}"


def test_an_error_can_be_made_from_the_enum_member():
    error = WorkloadError(ErrorCode.WORKLOAD_STALE_FENCE)
    assert error.code == "WORKLOAD_STALE_FENCE"
    assert error.message == "claim or fencing token is stale"


def test_an_explicit_message_and_details_are_kept():
    error = WorkloadError("WORKLOAD_INVALID", "priority: not a number", {"fields": ["priority"]})
    assert error.message == "priority: not a number"
    assert error.details == {"fields": ["priority"]}


def test_an_empty_message_is_kept_rather_than_replaced():
    assert WorkloadError("WORKLOAD_INVALID", "").message == ""


@pytest.mark.parametrize("code", ["WORKLOAD_NOPE", "workload_invalid", "", "INVALID"])
def test_an_unknown_code_is_refused(code):
    with pytest.raises(ValueError, match="unknown error code"):
        WorkloadError(code)


def test_workload_error_is_an_exception():
    with pytest.raises(WorkloadError) as raised:
        raise WorkloadError("WORKLOAD_CONFLICT")
    assert isinstance(raised.value, Exception)


def test_errors_survive_pickling_across_process_boundaries():
    import pickle

    from feltdb.storage import StorageConflict

    original = WorkloadError("WORKLOAD_STALE_FENCE", "late", {"fields": ["x"]})
    copy = pickle.loads(pickle.dumps(original))
    assert (type(copy), copy.code, copy.message, copy.details, str(copy)) == (
        WorkloadError,
        original.code,
        original.message,
        original.details,
        str(original),
    )
    conflict = pickle.loads(pickle.dumps(StorageConflict("lost the race", {"key": "k"})))
    assert isinstance(conflict, StorageConflict)
    assert (conflict.code, conflict.message) == ("WORKLOAD_CONFLICT", "lost the race")
