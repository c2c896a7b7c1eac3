"""A submission needs only a definition and an input, on every path (issue 25, point 6):
the other fields have one set of documented defaults, and the key may come as the
``Idempotency-Key`` header."""

from __future__ import annotations

import httpx
import pytest
from support.server import Server

from feltdb.client import Client
from feltdb.work.submission import SUBMISSION_DEFAULTS


def defaults_of(workload: dict) -> dict:
    return {name: workload[name] for name in SUBMISSION_DEFAULTS}


def test_a_minimal_submission_takes_the_documented_defaults(
    server: Server, http: httpx.Client, app: str
):
    headers = server.headers(app)
    first = http.post(
        "/v1/workloads", json={"definition_id": "send", "input": {"to": "ada"}}, headers=headers
    )
    assert first.status_code == 201, first.text
    assert (
        defaults_of(first.json())
        == SUBMISSION_DEFAULTS
        == {
            "environment": "production",
            "definition_revision": "1",
            "trigger": "api",
            "capability_snapshot": [],
        }
    )
    # No key given: a new random one each time, so sending it again admits new work.
    again = http.post(
        "/v1/workloads", json={"definition_id": "send", "input": {"to": "ada"}}, headers=headers
    )
    assert again.status_code == 201
    assert again.json()["idempotency_key"] != first.json()["idempotency_key"]
    assert again.json()["workload_id"] != first.json()["workload_id"]


def test_the_idempotency_key_header_replays_the_first_admission(
    server: Server, http: httpx.Client, app: str
):
    headers = {**server.headers(app), "Idempotency-Key": "invoice-42"}
    body = {"definition_id": "send", "input": {"invoice": 42}}
    first = http.post("/v1/workloads", json=body, headers=headers)
    replay = http.post("/v1/workloads", json=body, headers=headers)
    assert (first.status_code, replay.status_code) == (201, 200)
    assert replay.json()["workload_id"] == first.json()["workload_id"]
    assert first.json()["idempotency_key"] == "invoice-42"
    # The same key in the body as well is the same request.
    both = http.post(
        "/v1/workloads", json={**body, "idempotency_key": "invoice-42"}, headers=headers
    )
    assert both.status_code == 200 and both.json()["workload_id"] == first.json()["workload_id"]


@pytest.mark.parametrize(
    ("header", "body_key"),
    [("other-key", "body-key"), ("x" * 300, "body-key"), ("", "body-key"), ("key", None)],
    ids=["another-key", "too-long", "empty", "a-null-key-in-the-body"],
)
def test_a_key_the_header_and_body_disagree_on_or_a_bad_one_is_refused(
    server: Server, http: httpx.Client, app: str, header: str, body_key: str | None
):
    answer = http.post(
        "/v1/workloads",
        json={"definition_id": "send", "input": {}, "idempotency_key": body_key},
        headers={**server.headers(app), "Idempotency-Key": header},
    )
    assert answer.status_code == 422, answer.text
    error = answer.json()["error"]
    assert error["code"] == "WORKLOAD_INVALID"
    if header == "other-key":
        assert "different keys" in error["message"]
        assert error["details"] == {"fields": ["Idempotency-Key"]}
    listed = http.get("/v1/workloads", headers=server.headers(app)).json()["items"]
    assert [w for w in listed if w["idempotency_key"] in (body_key, header)] == []


def test_the_client_admits_with_a_definition_and_an_input(server: Server, app: str):
    with Client(server.url, server.token(app)) as felt:
        workload, created = felt.admit(
            definition_id="send", input={"n": 1}, idempotency_key="client-1"
        )
        replayed, again = felt.admit(
            definition_id="send", input={"n": 1}, idempotency_key="client-1"
        )
    assert (created, again) == (True, False) and replayed.workload_id == workload.workload_id
    assert (workload.environment, workload.definition_revision, workload.trigger) == (
        "production", "1", "api"
    )  # fmt: skip
    assert workload.capability_snapshot == frozenset()
