"""Points 12 to 15: metrics labels, secret material, ignored bodies, revocation answers."""

from __future__ import annotations

import httpx
import pytest
from support.attack import REQUESTER, WORKER, admit, held
from support.server import Server, submission

# ------------------------------------------------------------------ 12: metrics labels


def test_failure_kinds_a_worker_chooses_are_never_label_values(
    http: httpx.Client, server: Server, app: str
):
    chosen = "kind-chosen-by-a-worker-" + "z" * 200
    workload_id, held_fence = held(http, server, app)
    worker = server.headers(app, subject=WORKER)
    failed = http.post(
        f"/v1/workloads/{workload_id}/fail",
        json={**held_fence, "kind": chosen, "error": "boom"},
        headers=worker,
    )
    assert failed.status_code == 200, failed.text
    text = http.get("/metrics").text
    assert chosen not in text
    assert 'feltdb_failures_total{kind="other"}' in text
    labels = {
        line.split('kind="', 1)[1].split('"', 1)[0]
        for line in text.splitlines()
        if line.startswith("feltdb_failures_total{")
    }
    assert labels <= {
        "other",
        "permanent",
        "no_handler",
        "invalid_output",
        "timeout",
        "worker_failure",
        "transient_connection",
    }


# ------------------------------------------------------------------ 13: secret material

SECRETS = {
    "stripe": "sk_live_4eC39HqLyjWDarjtT1zdp7dc",
    "aws": "AKIAIOSFODNN7EXAMPLE",
    "github": "ghp_" + "a1B2" * 9,
    "bearer": "Bearer abcdefghijklmnop.qrstuv",
    "feltdb": "fgt2.eyJncmFudCI6eyJhcHBsaWNhdGlvbl9pZCI6ImFwcCJ9fQ",
    "pem": "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjE=",
}


@pytest.mark.parametrize("secret", SECRETS.values(), ids=SECRETS.keys())
def test_secret_material_is_refused_in_every_field_that_is_stored_and_shown(
    http: httpx.Client, server: Server, app: str, secret: str
):
    headers = server.headers(app, subject=REQUESTER)
    for body in (
        submission("k", input={"note": secret}),
        submission("k", input={"apiKey": "x"}),
        submission(secret),
        submission("k", session_id=secret),
    ):
        answer = http.post("/v1/workloads", json=body, headers=headers)
        assert answer.status_code == 422, answer.text
        assert answer.json()["error"]["code"] == "WORKLOAD_SECRET_REJECTED"
    workload_id, held_fence = held(http, server, app)
    worker = server.headers(app, subject=WORKER)
    for action, body in (
        ("checkpoint", {"state": {"client_secret": "x"}}),
        ("complete", {"result_id": secret, "output": {}}),
        ("complete", {"result_id": "r", "output": {}, "artifacts": [f"s3://b/{secret}"]}),
        ("complete", {"result_id": "r", "output": {"access_token": "x"}}),
        ("fail", {"kind": secret, "error": "boom"}),
        ("fail", {"kind": "k", "error": f"auth failed: {secret}"}),
    ):
        answer = http.post(
            f"/v1/workloads/{workload_id}/{action}", json={**held_fence, **body}, headers=worker
        )
        assert answer.status_code == 422, (action, answer.text)
        assert answer.json()["error"]["code"] == "WORKLOAD_SECRET_REJECTED", action


def test_harmless_text_that_resembles_a_key_is_admitted(
    http: httpx.Client, server: Server, app: str
):
    body = submission("k", input={"library": "sk-learn", "tokens_used": 12, "note": "Bearer"})
    answer = http.post("/v1/workloads", json=body, headers=server.headers(app))
    assert answer.status_code == 201, answer.text


# ------------------------------------------------------------------ 14: bodies

BAD_BODIES = {
    "malformed": (b"{not json", 422),
    "nan": (b'{"x": NaN}', 422),
    "unknown-field": (b'{"forcibly": true}', 422),
    "force-as-text": (b'{"force": "true"}', 422),  # strict: revoke's one field is a bool
    "not-an-object": (b"[1]", 422),
}


@pytest.mark.parametrize("body,status", BAD_BODIES.values(), ids=BAD_BODIES.keys())
def test_cancel_validates_its_body_and_changes_nothing_when_it_is_bad(
    http: httpx.Client, server: Server, app: str, body: bytes, status: int
):
    workload = admit(http, server.headers(app, subject=REQUESTER))
    headers = {**server.headers(app), "Content-Type": "application/json"}
    path = f"/v1/workloads/{workload['workload_id']}"
    answer = http.post(f"{path}/cancel", content=body, headers=headers)
    assert answer.status_code == status, answer.text
    assert http.get(path, headers=headers).json()["state"] == "READY"
    assert http.post(f"{path}/cancel", json={}, headers=headers).status_code == 200


@pytest.mark.parametrize("body,status", BAD_BODIES.values(), ids=BAD_BODIES.keys())
def test_revoke_validates_its_body_and_revokes_nothing_when_it_is_bad(
    http: httpx.Client, server: Server, app: str, body: bytes, status: int
):
    victim = server.grant(app)
    victim_headers = {"Authorization": f"Bearer {server.keyring.sign(victim)}"}
    headers = {**server.headers(app), "Content-Type": "application/json"}
    answer = http.post(f"/v1/grants/{victim.id}/revoke", content=body, headers=headers)
    assert answer.status_code == status, answer.text
    assert http.get("/v1/workloads", headers=victim_headers).status_code == 200


def test_a_chunked_body_over_the_limit_is_refused_and_changes_nothing(
    http: httpx.Client, server: Server, app: str
):
    workload = admit(http, server.headers(app, subject=REQUESTER))
    path = f"/v1/workloads/{workload['workload_id']}"
    headers = server.headers(app)

    def chunks() -> object:
        for _ in range(20):
            yield b" " * 64 * 1024  # 1.25 MiB of whitespace in all, no Content-Length

    for route in (f"{path}/cancel", "/v1/grants/some-grant/revoke"):
        answer = http.post(route, content=chunks(), headers=headers)
        assert answer.status_code == 413, (route, answer.text)
    assert http.get(path, headers=headers).json()["state"] == "READY"


# ------------------------------------------------------------------ 15: revocation answers


def test_revoking_says_which_tenant_and_application_it_applies_to(
    http: httpx.Client, server: Server, app: str
):
    theirs = server.grant(app, tenant="their-tenant")
    their_headers = {"Authorization": f"Bearer {server.keyring.sign(theirs)}"}
    answer = http.post(f"/v1/grants/{theirs.id}/revoke", headers=server.headers(app, tenant="t"))
    assert answer.status_code == 200, answer.text
    said = answer.json()
    assert (said["tenant_id"], said["application_id"]) == ("t", app)
    assert said["revoked"] is True
    assert "tenant 't'" in said["message"] and "another tenant" in said["message"]
    # Their grant, in their tenant, still works: nothing of theirs was revoked.
    assert http.get("/v1/workloads", headers=their_headers).status_code == 200
    again = http.post(f"/v1/grants/{theirs.id}/revoke", headers=server.headers(app, tenant="t"))
    assert again.json()["revoked"] is False
    assert "already" in again.json()["message"]


def test_request_methods_a_client_invents_are_never_label_values(
    http: httpx.Client, server: Server
):
    invented = "ZZ" + "Q" * 100
    http.request(invented, "/nope")
    text = http.get("/metrics").text
    assert invented not in text
    assert 'method="other"' in text


@pytest.mark.parametrize(
    "field", ["definition_id", "environment", "trigger", "definition_revision"]
)
def test_secret_material_is_refused_in_every_identifier_of_a_submission(
    http: httpx.Client, server: Server, app: str, field: str
):
    body = submission("k", **{field: SECRETS["stripe"]})
    answer = http.post("/v1/workloads", json=body, headers=server.headers(app))
    assert answer.status_code == 422, answer.text
    assert answer.json()["error"]["code"] == "WORKLOAD_SECRET_REJECTED"
    scoped = submission("k", capability_snapshot=[SECRETS["github"]])
    assert http.post("/v1/workloads", json=scoped, headers=server.headers(app)).status_code == 422
