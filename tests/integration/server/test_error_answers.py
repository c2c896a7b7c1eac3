"""The error-status table through real requests, and hostile bodies never answered 500."""

from __future__ import annotations

import time

import httpx
import pytest
from support.server import Server, submission

from feltdb import Subject
from feltdb.server.errors import MAX_BODY_BYTES
from feltdb.work.identities import workload_id_for


def error_of(answer: httpx.Response, status: int) -> dict:
    assert answer.status_code == status, answer.text
    body = answer.json()
    assert set(body) == {"error"}
    assert set(body["error"]) == {"code", "message", "details"}
    error: dict = body["error"]
    return error


def test_unknown_work_is_404(server: Server, http, app):
    error = error_of(http.get("/v1/workloads/workload_nope", headers=server.headers(app)), 404)
    assert error["code"] == "WORKLOAD_NOT_FOUND"


def test_an_unknown_route_is_404_in_the_same_shape_with_a_code_of_its_own(http):
    # NOT_FOUND, not WORKLOAD_NOT_FOUND: a wrong URL is told apart from missing work.
    assert error_of(http.get("/v2/nothing"), 404)["code"] == "NOT_FOUND"
    assert error_of(http.get("/v1/v1/workloads"), 404)["code"] == "NOT_FOUND"


def test_a_method_a_route_does_not_take_is_405_method_not_allowed(http):
    answer = http.delete("/v1/workloads")
    assert error_of(answer, 405)["code"] == "METHOD_NOT_ALLOWED"
    assert set(answer.headers["allow"].split(", ")) >= {"GET", "POST"}


def test_a_stale_fence_is_409(server: Server, http, app):
    headers = server.headers(app)
    workload_id = http.post("/v1/workloads", json=submission(), headers=headers).json()[
        "workload_id"
    ]
    claim = http.post("/v1/claims", headers=headers).json()
    stale = {"claim_id": claim["claim_id"], "fencing_token": claim["fencing_token"] + 1}
    error = error_of(
        http.post(f"/v1/workloads/{workload_id}/start", json=stale, headers=headers), 409
    )
    assert error["code"] == "WORKLOAD_STALE_FENCE"


def test_a_reused_idempotency_key_is_409_naming_the_fields(server: Server, http, app):
    headers = server.headers(app)
    assert http.post("/v1/workloads", json=submission(), headers=headers).status_code == 201
    other = submission(input={"to": "bob@example.com"}, priority=5)
    error = error_of(http.post("/v1/workloads", json=other, headers=headers), 409)
    assert error["code"] == "IDEMPOTENCY_KEY_REUSED"


def test_early_work_is_425_with_retry_after(server: Server, http, app):
    headers = server.headers(app)
    eligible_at = int(time.time()) + 120
    workload_id = http.post(
        "/v1/workloads", json=submission(not_before=eligible_at), headers=headers
    ).json()["workload_id"]
    answer = http.post(f"/v1/workloads/{workload_id}/claim", headers=headers)
    error = error_of(answer, 425)
    assert error["code"] == "WORKLOAD_NOT_YET_ELIGIBLE"
    assert error["details"] == {"eligible_at": eligible_at}
    assert 60 <= int(answer.headers["Retry-After"]) <= 120


def test_secret_material_is_422(server: Server, http, app):
    body = submission(input={"password": "hunter2"})
    answer = http.post("/v1/workloads", json=body, headers=server.headers(app))
    assert error_of(answer, 422)["code"] == "WORKLOAD_SECRET_REJECTED"


@pytest.mark.parametrize(
    "content",
    [b"{", b"{'a': 1}", b"\xff\xfe", b"[1, 2", b'{"environment": }'],
    ids=["unclosed", "single quotes", "not utf-8", "unclosed array", "no value"],
)
def test_malformed_json_is_422(server: Server, http, app, content):
    answer = http.post(
        "/v1/workloads",
        content=content,
        headers={**server.headers(app), "Content-Type": "application/json"},
    )
    assert error_of(answer, 422)["code"] == "WORKLOAD_INVALID"


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("/v1/claims", {"wait_ms": "soon"}, "wait_ms"),
        ("/v1/claims", {"wait_ms": 30_001}, "wait_ms"),
        ("/v1/claims", {"lease_ms": True}, "lease_ms"),
        ("/v1/workloads/w/start", {"claim_id": "c", "fencing_token": "1"}, "fencing_token"),
        ("/v1/workloads/w/start", {"claim_id": 7, "fencing_token": 1}, "claim_id"),
        ("/v1/workloads/w/start", {"claim_id": "c", "fencing_token": 1, "x": 1}, "x"),
        ("/v1/workloads/w/heartbeat", {"claim_id": "c", "fencing_token": 10**40}, "fencing_token"),
        ("/v1/workloads", submission(priority="high"), "priority"),
        ("/v1/workloads", submission(capability_snapshot="email:send"), "capability_snapshot"),
        ("/v1/workloads", submission(idempotency_key=None), "idempotency_key"),
        ("/v1/workloads", [submission()], "body"),
    ],
)
def test_wrong_types_are_422_naming_the_field(server: Server, http, app, path, body, field):
    error = error_of(http.post(path, json=body, headers=server.headers(app)), 422)
    assert error["code"] == "WORKLOAD_INVALID"
    assert field in error["details"]["fields"]


def test_an_oversize_body_is_413_and_changes_nothing(server: Server, http, app):
    headers = server.headers(app)
    big = submission(key="big", input={"blob": "x" * MAX_BODY_BYTES})
    error = error_of(http.post("/v1/workloads", json=big, headers=headers), 413)
    assert error["code"] == "WORKLOAD_INVALID"
    workload_id = workload_id_for("t", app, Subject.worker("w1"), "big")
    assert http.get(f"/v1/workloads/{workload_id}", headers=headers).status_code == 404


def test_an_oversize_body_without_a_length_is_413(server: Server, http, app):
    def chunks():
        yield b'{"input": "'
        for _ in range(MAX_BODY_BYTES // 65536 + 1):
            yield b"x" * 65536
        yield b'"}'

    answer = http.post(
        "/v1/workloads",
        content=chunks(),
        headers={**server.headers(app), "Content-Type": "application/json"},
    )
    assert error_of(answer, 413)["code"] == "WORKLOAD_INVALID"


HOSTILE = [
    b"",
    b"null",
    b"[]",
    b'"text"',
    b"0",
    b"{}",
    b"[" * 50_000 + b"]" * 50_000,
    b'{"a":' * 5_000 + b"1" + b"}" * 5_000,
    b'{"input": 1e999, "state": NaN, "output": Infinity}',
    b'{"claim_id": null, "fencing_token": null}',
    b'{"claim_id": "c", "fencing_token": -1}',
    b'{"claim_id": "c", "fencing_token": 1.5, "state": {"\\u0000": "\\ud800"}}',
    b'{"outcome": "maybe", "input_hash": [], "reason": {}}',
    b'{"kind": "", "error": "", "claim_id": "", "fencing_token": 0, "effect": "some"}',
    b'{"result_id": "", "output": null, "claim_id": "c", "fencing_token": 0, "artifacts": "a"}',
    b'{"secret_references": ["plain"], "claim_id": "c", "fencing_token": 0}',
]


@pytest.mark.parametrize(
    "path",
    [
        "/v1/workloads",
        "/v1/claims",
        "/v1/workloads/{id}/claim",
        "/v1/workloads/{id}/start",
        "/v1/workloads/{id}/heartbeat",
        "/v1/workloads/{id}/context",
        "/v1/workloads/{id}/checkpoint",
        "/v1/workloads/{id}/complete",
        "/v1/workloads/{id}/fail",
        "/v1/workloads/{id}/confirm-cancel",
        "/v1/workloads/{id}/cancel",
        "/v1/workloads/{id}/retry",
        "/v1/workloads/{id}/decision",
    ],
)
def test_no_hostile_body_is_answered_500(server: Server, http, app, path):
    headers = {**server.headers(app), "Content-Type": "application/json"}
    workload_id = http.post("/v1/workloads", json=submission(), headers=headers).json()[
        "workload_id"
    ]
    for content in HOSTILE:
        answer = http.post(path.format(id=workload_id), content=content, headers=headers)
        assert answer.status_code < 500, (content[:60], answer.text)
        if answer.status_code >= 400:
            error_of(answer, answer.status_code)
    assert http.get("/healthz").status_code == 200
