"""Points 6 to 9: requests that once made the server answer 500 get a clear 4xx.

Every body here is sent as raw JSON text, as an attacker would write it: ``"\\ud800"`` is a
JSON escape that decodes to a lone surrogate, which no UTF-8 store can hold.
"""

from __future__ import annotations

import base64
import json
from typing import Any

import httpx
import pytest
from support.attack import WORKER, awaiting_approval, bearer, held
from support.server import Server, submission

from feltdb.auth.tokens import decode_token
from feltdb.storage.canonical import canonical_json

SURROGATE = "\\ud800"
"""A lone surrogate, as JSON text writes it."""


def raw(http: httpx.Client, method: str, path: str, text: str | bytes, headers: Any) -> Any:
    return http.request(
        method, path, content=text, headers={**headers, "Content-Type": "application/json"}
    )


def with_surrogate(document: dict[str, Any], path: list[Any]) -> str:
    """``document`` as JSON text with the string at ``path`` replaced by a lone surrogate
    (a key, when the path ends in ``("key",)``).
    """
    marker = "SURROGATE-MARKER"
    target: Any = document
    for part in path[:-1]:
        target = target[part]
    last = path[-1]
    if isinstance(last, tuple):
        target[marker] = target.pop(last[0])
    else:
        target[last] = marker if not isinstance(target[last], list) else [marker]
    return json.dumps(document).replace(marker, SURROGATE)


def assert_refused(answer: httpx.Response, status: int = 422) -> dict[str, Any]:
    assert answer.status_code == status, answer.text
    error: dict[str, Any] = answer.json()["error"]
    assert error["code"] == "WORKLOAD_INVALID", error
    return error


# ------------------------------------------------------------------ 6


def test_a_signature_of_non_ascii_characters_is_refused_not_a_crash(
    http: httpx.Client, server: Server, app: str
):
    real = server.token(app)
    prefix = real[: real.index(".") + 1]
    signed = decode_token(real).to_json()
    for signature in ("é" * 64, "\u2603", "0" * 63 + "é"):
        document = {**signed, "signature": signature}
        token = prefix + base64.urlsafe_b64encode(
            canonical_json(document).encode("utf-8")
        ).decode().rstrip("=")
        answer = http.get("/v1/workloads", headers=bearer(token))
        assert answer.status_code == 401, answer.text
        assert answer.json()["error"]["code"] == "WORKLOAD_UNAUTHORIZED"


# ------------------------------------------------------------------ 7

SUBMISSION_PATHS = [
    ["environment"],
    ["definition_id"],
    ["definition_revision"],
    ["trigger"],
    ["idempotency_key"],
    ["session_id"],
    ["input", "to"],
    ["input", ("to",)],
    ["capability_snapshot"],
    ["connection_scopes"],
]


@pytest.mark.parametrize("path", SUBMISSION_PATHS, ids=lambda p: ".".join(map(str, p)))
def test_a_lone_surrogate_in_a_submission_is_invalid(
    http: httpx.Client, server: Server, app: str, path: list[Any]
):
    body = submission("key", session_id="s", connection_scopes=["crm"])
    answer = raw(http, "POST", "/v1/workloads", with_surrogate(body, path), server.headers(app))
    assert_refused(answer)
    assert http.get("/v1/workloads", headers=server.headers(app)).json()["items"] == []


def test_a_lone_surrogate_in_any_worker_or_operator_field_is_invalid(
    http: httpx.Client, server: Server, app: str
):
    workload_id, held_fence = held(http, server, app)
    worker = server.headers(app, subject=WORKER)
    base = f"/v1/workloads/{workload_id}"
    for action, body, path in (
        ("checkpoint", {**held_fence, "state": {"k": "v"}}, ["state", "k"]),
        ("checkpoint", {**held_fence, "state": {"k": "v"}}, ["state", ("k",)]),
        ("complete", {**held_fence, "result_id": "r", "output": {}}, ["result_id"]),
        ("complete", {**held_fence, "result_id": "r", "output": {"o": "v"}}, ["output", "o"]),
        (
            "complete",
            {**held_fence, "result_id": "r", "output": {}, "artifacts": ["a"]},
            ["artifacts"],
        ),
        ("fail", {**held_fence, "kind": "k", "error": "e"}, ["kind"]),
        ("fail", {**held_fence, "kind": "k", "error": "e"}, ["error"]),
        ("heartbeat", {**held_fence}, ["claim_id"]),
    ):
        answer = raw(http, "POST", f"{base}/{action}", with_surrogate(body, path), worker)
        assert answer.status_code == 422, (action, path, answer.text)
        assert answer.json()["error"]["code"] == "WORKLOAD_INVALID", (action, path)
    assert http.get(base, headers=server.headers(app)).json()["state"] == "RUNNING"
    gated, approver = awaiting_approval(http, server, app)
    decision = {"outcome": "rejected", "reason": "r", "input_hash": gated["input_hash"]}
    answer = raw(
        http,
        "POST",
        f"/v1/workloads/{gated['workload_id']}/decision",
        with_surrogate(decision, ["reason"]),
        approver,
    )
    assert_refused(answer)


def test_a_lone_surrogate_in_a_list_cursor_is_invalid(http: httpx.Client, server: Server, app: str):
    text = '[0, 0, "' + SURROGATE + '"]'
    cursor = base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")
    answer = http.get("/v1/workloads", params={"cursor": cursor}, headers=server.headers(app))
    assert_refused(answer)


# ------------------------------------------------------------------ 8


def nested(depth: int) -> Any:
    value: Any = "leaf"
    for _ in range(depth):
        value = {"k": value}
    return value


@pytest.mark.parametrize("depth", [65, 256, 900])
def test_a_document_nested_past_64_levels_is_invalid_everywhere(
    http: httpx.Client, server: Server, app: str, depth: int
):
    answer = http.post(
        "/v1/workloads",
        json=submission(f"deep-{depth}", input=nested(depth)),
        headers=server.headers(app),
    )
    assert "nests deeper than 64" in assert_refused(answer)["message"]
    workload_id, held_fence = held(http, server, app)
    worker = server.headers(app, subject=WORKER)
    for action, body in (
        ("checkpoint", {**held_fence, "state": nested(depth)}),
        ("complete", {**held_fence, "result_id": "r", "output": nested(depth)}),
    ):
        answer = http.post(f"/v1/workloads/{workload_id}/{action}", json=body, headers=worker)
        assert "nests deeper than 64" in assert_refused(answer)["message"], action


def test_a_document_of_exactly_64_levels_is_admitted(http: httpx.Client, server: Server, app: str):
    answer = http.post(
        "/v1/workloads", json=submission("deep-64", input=nested(64)), headers=server.headers(app)
    )
    assert answer.status_code == 201, answer.text


# ------------------------------------------------------------------ 9


@pytest.mark.parametrize(
    "body",
    [b"[" * 100_000 + b"]" * 100_000, b'{"environment": "\xff\xfe"}', b"\xff\xfe\x00{"],
    ids=["nested-past-the-parser", "latin-1-in-a-string", "not-utf-8"],
)
def test_an_unparseable_body_is_invalid_json_422(
    http: httpx.Client, server: Server, app: str, body: bytes
):
    answer = raw(http, "POST", "/v1/workloads", body, server.headers(app))
    assert assert_refused(answer)["details"] == {"fields": ["body"]}


def test_a_lone_surrogate_inside_a_forged_tokens_grant_is_refused_not_a_crash(
    http: httpx.Client, server: Server, app: str
):
    real = server.token(app)
    prefix = real[: real.index(".") + 1]
    signed = decode_token(real).to_json()
    text = json.dumps({**signed, "grant": {**signed["grant"], "id": "MARK"}}).replace(
        "MARK", SURROGATE
    )
    token = prefix + base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")
    answer = http.get("/v1/workloads", headers=bearer(token))
    assert answer.status_code in (401, 403), answer.text
    assert answer.json()["error"]["code"] == "WORKLOAD_UNAUTHORIZED"
