"""feltdb.server.errors: one table from every error code to an HTTP status."""

from __future__ import annotations

import json

import pytest

from feltdb import WorkloadError
from feltdb.errors import ErrorCode
from feltdb.server.errors import (
    ERROR_DESCRIPTIONS,
    STATUS_BY_CODE,
    ErrorBody,
    Unauthenticated,
    error_response,
    error_responses,
    status_for,
)


@pytest.mark.parametrize("code", list(ErrorCode), ids=str)
def test_every_code_has_a_client_or_server_error_status(code):
    assert STATUS_BY_CODE[code] in {403, 404, 409, 422, 425, 429, 503}


def test_the_table_has_no_other_keys():
    assert set(STATUS_BY_CODE) == set(ErrorCode)


@pytest.mark.parametrize(
    ("code", "status"),
    [
        ("WORKLOAD_NOT_FOUND", 404),
        ("WORKLOAD_STALE_FENCE", 409),
        ("WORKLOAD_CONFLICT", 409),
        ("WORKLOAD_INVALID", 422),
        ("WORKLOAD_SECRET_REJECTED", 422),
        ("WORKLOAD_UNAUTHORIZED", 403),
        ("WORKLOAD_CAPABILITY_DENIED", 403),
        ("WORKLOAD_APPROVER_NOT_PERMITTED", 403),
        ("WORKLOAD_NOT_YET_ELIGIBLE", 425),
        ("WORKLOAD_QUOTA_EXCEEDED", 429),
        ("WORKLOAD_STORAGE_FAILURE", 503),
    ],
)
def test_the_documented_statuses(code, status):
    assert status_for(WorkloadError(code)) == status


def test_a_missing_or_undecodable_token_is_401_with_a_challenge():
    error = Unauthenticated("no token")
    assert error.code == "WORKLOAD_UNAUTHORIZED"
    response = error_response(error, now=0)
    assert response.status_code == 401
    assert response.headers["WWW-Authenticate"] == "Bearer"


def test_the_body_is_code_message_and_details():
    response = error_response(WorkloadError("WORKLOAD_INVALID", "bad", {"fields": ["x"]}), 0)
    assert json.loads(response.body) == {
        "error": {"code": "WORKLOAD_INVALID", "message": "bad", "details": {"fields": ["x"]}}
    }


@pytest.mark.parametrize(("eligible_at", "retry_after"), [(130, "30"), (100, "1"), (None, "1")])
def test_not_yet_eligible_says_when_to_retry(eligible_at, retry_after):
    details = {"eligible_at": eligible_at} if eligible_at is not None else None
    response = error_response(WorkloadError("WORKLOAD_NOT_YET_ELIGIBLE", "early", details), 100)
    assert response.status_code == 425
    assert response.headers["Retry-After"] == retry_after


@pytest.mark.parametrize(("wait", "retry_after"), [(7, "7"), (0, "1")])
def test_a_quota_refusal_says_when_to_retry(wait, retry_after):
    details = {"quota": "per_second", "retry_after_s": wait}
    response = error_response(WorkloadError("WORKLOAD_QUOTA_EXCEEDED", "full", details), 100)
    assert response.status_code == 429
    assert response.headers["Retry-After"] == retry_after


def test_every_error_body_matches_the_declared_schema():
    response = error_response(WorkloadError("WORKLOAD_CONFLICT", "lost", {"revision": 3}), 0)
    ErrorBody.model_validate_json(response.body)
    ErrorBody.model_validate_json(error_response(Unauthenticated("no token"), 0).body)


def test_declared_error_responses_carry_the_schema_and_required_headers():
    answers = error_responses(*ERROR_DESCRIPTIONS)
    assert set(answers) == {401, 403, 404, 409, 413, 422, 425, 429, 503}
    assert all(answer["model"] is ErrorBody for answer in answers.values())
    assert answers[401]["headers"]["WWW-Authenticate"]["required"] is True
    assert answers[425]["headers"]["Retry-After"]["required"] is True
    assert answers[429]["headers"]["Retry-After"]["required"] is True
    assert set(STATUS_BY_CODE.values()) <= set(answers)


def test_an_answer_withholds_where_the_store_is():
    from feltdb.server.errors import as_told_to_clients

    target = "/srv/feltdb/work.db"
    error = WorkloadError(
        "WORKLOAD_STORAGE_FAILURE",
        f"SQLite store {target}: commit failed: database is locked",
        {"where": target, "attempts": 3},
    )
    told = as_told_to_clients(error, target)
    assert told.code == "WORKLOAD_STORAGE_FAILURE"
    assert told.message == "SQLite store [location withheld]: commit failed: database is locked"
    assert told.details == {"where": "[location withheld]", "attempts": 3}
    assert target not in str(told)
    assert as_told_to_clients(error, "").message == error.message
