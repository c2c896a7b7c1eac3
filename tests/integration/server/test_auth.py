"""Every /v1 endpoint refuses a request without a valid token that covers it.

No token, or one that cannot be decoded: 401. A decoded token that fails verification (bad
signature, unknown key, expired, not yet valid, revoked) or lacks the capability or the
resource: 403. Another tenant's or application's work: 404, exactly as missing work.
"""

from __future__ import annotations

import base64
import time

import httpx
import msgspec
import pytest
from support.server import Server, submission

from feltdb import GrantStatus, Subject
from feltdb.auth.policy import (
    ALL_CAPABILITIES,
    APPROVE,
    AUDIT,
    CANCEL,
    CLAIM,
    OPERATE,
    READ,
    REVOKE,
    SUBMIT,
)
from feltdb.auth.tokens import Keyring, decode_token, encode_token

FENCE = {"claim_id": "claim_x", "fencing_token": 1}
# (method, path, body, capability); {id} is the workload the request names.
ENDPOINTS = [
    ("POST", "/v1/workloads", submission(), SUBMIT),
    ("GET", "/v1/workloads/{id}", None, READ),
    ("POST", "/v1/workloads/{id}/cancel", None, CANCEL),
    ("POST", "/v1/claims", {}, CLAIM),
    ("POST", "/v1/workloads/{id}/claim", {}, CLAIM),
    ("POST", "/v1/workloads/{id}/start", FENCE, CLAIM),
    ("POST", "/v1/workloads/{id}/heartbeat", FENCE, CLAIM),
    ("POST", "/v1/workloads/{id}/context", FENCE, CLAIM),
    ("POST", "/v1/workloads/{id}/checkpoint", {**FENCE, "state": {}}, CLAIM),
    ("POST", "/v1/workloads/{id}/complete", {**FENCE, "result_id": "r", "output": 1}, CLAIM),
    ("POST", "/v1/workloads/{id}/fail", {**FENCE, "kind": "k", "error": "e"}, CLAIM),
    ("POST", "/v1/workloads/{id}/confirm-cancel", FENCE, CLAIM),
    ("POST", "/v1/workloads/{id}/retry", {"reason": "r"}, OPERATE),
    ("POST", "/v1/workloads/{id}/decision", {"outcome": "approved", "input_hash": "h"}, APPROVE),
    ("GET", "/v1/workloads", None, READ),
    ("GET", "/v1/approvals", None, APPROVE),
    ("GET", "/v1/dead-letters", None, OPERATE),
    ("GET", "/v1/workers", None, READ),
    ("GET", "/v1/audit", None, AUDIT),
    ("GET", "/v1/audit/verify", None, AUDIT),
    ("POST", "/v1/grants/g-someone/revoke", None, REVOKE),
]
WORKLOAD_ENDPOINTS = [e for e in ENDPOINTS if "{id}" in e[1]]
# Revoking a grant is scoped to the tenant and application, not to a workload resource.
RESOURCE_ENDPOINTS = [e for e in ENDPOINTS if e[3] != REVOKE]


def ids(endpoint) -> str:
    return f"{endpoint[0]} {endpoint[1]}"


def call(http: httpx.Client, endpoint, headers: dict[str, str], workload_id: str = "workload_0"):
    method, path, body, _ = endpoint
    return http.request(method, path.format(id=workload_id), json=body, headers=headers)


def refusal(answer: httpx.Response, status: int, code: str = "WORKLOAD_UNAUTHORIZED") -> None:
    assert answer.status_code == status, answer.text
    assert answer.json()["error"]["code"] == code


def tampered(token: str) -> str:
    """The token with its grant widened and the old signature kept."""
    signed = decode_token(token)
    grant = msgspec.structs.replace(signed.grant, tenant_id="t2")
    return encode_token(msgspec.structs.replace(signed, grant=grant))


UNDECODABLE = [
    None,
    "Basic dXNlcjpwYXNz",
    "Bearer",
    "Bearer not-a-token",
    "Bearer fgt1.!!!",
    "Bearer fgt1." + base64.urlsafe_b64encode(b'{"grant": 1}').decode().rstrip("="),
    "Bearer fgt1." + "A" * 10_000,  # (headers over 16 KiB are refused by uvicorn: 400)
]


@pytest.mark.parametrize("endpoint", ENDPOINTS, ids=ids)
@pytest.mark.parametrize("authorization", UNDECODABLE, ids=range(len(UNDECODABLE)))
def test_no_token_or_an_undecodable_one_is_401(http, endpoint, authorization):
    headers = {} if authorization is None else {"Authorization": authorization}
    answer = call(http, endpoint, headers)
    refusal(answer, 401)
    assert answer.headers["WWW-Authenticate"] == "Bearer"


def unverifiable_tokens(server: Server, app: str) -> dict[str, str]:
    now = int(time.time())
    return {
        "bad signature": tampered(server.token(app)),
        "unknown key": Keyring.generate().sign(server.grant(app)),
        "expired": server.token(app, issued_at=now - 7200, lifetime=3600),
        "not yet valid": server.token(app, issued_at=now + 3600),
        "revoked": server.token(app, status=GrantStatus.REVOKED),
        "suspended": server.token(app, status=GrantStatus.SUSPENDED),
    }


@pytest.mark.parametrize("endpoint", ENDPOINTS, ids=ids)
def test_a_token_that_fails_verification_is_403(server: Server, http, app, endpoint):
    for reason, token in unverifiable_tokens(server, app).items():
        answer = call(http, endpoint, {"Authorization": f"Bearer {token}"})
        assert answer.status_code == 403, (reason, answer.text)
        assert answer.json()["error"]["code"] == "WORKLOAD_UNAUTHORIZED", reason


def test_a_grant_revoked_in_the_store_is_refused_by_every_endpoint_from_then_on(
    server: Server, http, app
):
    grant = server.grant(app)
    headers = {"Authorization": f"Bearer {server.keyring.sign(grant)}"}
    assert call(http, ENDPOINTS[1], headers).status_code == 404  # accepted: no such workload
    revoked = http.post(f"/v1/grants/{grant.id}/revoke", headers=server.headers(app))
    assert revoked.status_code == 200, revoked.text
    for endpoint in ENDPOINTS:
        refusal(call(http, endpoint, headers), 403)


@pytest.mark.parametrize("endpoint", ENDPOINTS, ids=ids)
def test_a_grant_without_the_endpoints_capability_is_403(server: Server, http, app, endpoint):
    capability = endpoint[3]
    headers = server.headers(app, capabilities=ALL_CAPABILITIES - {capability})
    answer = call(http, endpoint, headers)
    refusal(answer, 403)
    assert answer.json()["error"]["details"] == {"missing": "capability"}


@pytest.mark.parametrize("endpoint", RESOURCE_ENDPOINTS, ids=ids)
def test_a_grant_whose_resources_do_not_cover_the_workload_is_403(
    server: Server, http, app, endpoint
):
    headers = server.headers(app, resources=[f"flow://{app}/workloads/workload_only_this"])
    answer = call(http, endpoint, headers)
    refusal(answer, 403)
    assert answer.json()["error"]["details"] == {"missing": "resource"}


@pytest.fixture
def foreign_workload(server: Server, http: httpx.Client, app) -> str:
    answer = http.post("/v1/workloads", json=submission(), headers=server.headers(app))
    assert answer.status_code == 201
    workload_id: str = answer.json()["workload_id"]
    return workload_id


@pytest.mark.parametrize("endpoint", WORKLOAD_ENDPOINTS, ids=ids)
@pytest.mark.parametrize("where", ["other tenant", "other application"])
def test_another_tenants_work_is_indistinguishable_from_missing_work(
    server: Server, http, app, foreign_workload, endpoint, where
):
    if where == "other tenant":
        headers = server.headers(app, tenant="t2")
    else:
        other = f"{app}-2"
        headers = server.headers(other, resources=[f"flow://{other}/*", f"flow://{app}/*"])
    foreign = call(http, endpoint, headers, foreign_workload)
    refusal(foreign, 404, "WORKLOAD_NOT_FOUND")
    missing = call(http, endpoint, headers, "workload_missing")
    refusal(missing, 404, "WORKLOAD_NOT_FOUND")
    assert foreign.json()["error"]["message"] == missing.json()["error"]["message"].replace(
        "workload_missing", foreign_workload
    )
    # ...and nothing changed
    assert (
        http.get(f"/v1/workloads/{foreign_workload}", headers=server.headers(app)).json()["state"]
        == "READY"
    )


def test_another_tenants_worker_claims_nothing(server: Server, http, app, foreign_workload):
    answer = http.post("/v1/claims", headers=server.headers(app, tenant="t2"))
    assert answer.status_code == 204


def test_a_worker_acts_under_its_own_name(server: Server, http, app, foreign_workload):
    claim = http.post(
        "/v1/claims", headers=server.headers(app, subject=Subject.worker("w9"))
    ).json()
    assert claim["worker_id"] == "worker:w9"  # KIND:ID: no other kind can act as it
