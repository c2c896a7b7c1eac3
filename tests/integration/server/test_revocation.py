"""Revoking a grant over HTTP, against a real server process: refused from the next
request on, on every endpoint; only ever within the revoker's tenant and application.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

import httpx
from support.server import WORK_CAPABILITY, Server, submission

from feltdb import Subject
from feltdb.auth.policy import AUDIT, CLAIM, READ, REVOKE, SUBMIT

REVOKER = {"subject": Subject.human("security"), "capabilities": [REVOKE, AUDIT]}


def revoke(http: httpx.Client, headers: dict[str, str], grant_id: str) -> httpx.Response:
    return http.post(f"/v1/grants/{grant_id}/revoke", headers=headers)


def test_a_revoked_grant_is_refused_from_the_next_request_on(
    server: Server, http: httpx.Client, app
):
    grant = server.grant(app, subject=Subject.agent("a1"), capabilities=[SUBMIT, READ])
    headers = {"Authorization": f"Bearer {server.keyring.sign(grant)}"}
    created = http.post("/v1/workloads", json=submission(), headers=headers)
    assert created.status_code == 201
    path = f"/v1/workloads/{created.json()['workload_id']}"
    assert http.get(path, headers=headers).status_code == 200

    revoker = server.headers(app, **REVOKER)
    answer = revoke(http, revoker, grant.id)
    assert answer.status_code == 200, answer.text
    said = answer.json()
    assert {k: said[k] for k in ("grant_id", "tenant_id", "application_id", "revoked")} == {
        "grant_id": grant.id,
        "tenant_id": "t",
        "application_id": app,
        "revoked": True,
    }

    for method, url, body in [
        ("GET", path, None),
        ("GET", "/v1/workloads", None),
        ("POST", "/v1/workloads", submission("two")),
        ("POST", f"{path}/cancel", None),
    ]:
        refused = http.request(method, url, json=body, headers=headers)
        assert refused.status_code == 403, (method, url, refused.text)
        assert refused.json()["error"]["code"] == "WORKLOAD_UNAUTHORIZED"
        assert refused.json()["error"]["details"] == {"grant_id": grant.id}

    # Idempotent: revoking again changes nothing and says so.
    assert revoke(http, revoker, grant.id).json()["revoked"] is False
    # The revocation is in the application's audit.
    audit = http.get("/v1/audit", params={"limit": 500}, headers=revoker).json()["items"]
    revocations = [e["audit"] for e in audit if e["audit"]["kind"] == "grant.revoked"]
    assert [(r["grant_id"], r["actor"]) for r in revocations] == [(grant.id, "human:security")]
    # Other grants of the application are untouched.
    assert http.get(path, headers=server.headers(app, capabilities=[READ])).status_code == 200


def test_a_revoker_can_revoke_its_own_grant(server: Server, http: httpx.Client, app):
    grant = server.grant(app, **REVOKER)
    headers = {"Authorization": f"Bearer {server.keyring.sign(grant)}"}
    assert revoke(http, headers, grant.id).json()["revoked"] is True
    assert revoke(http, headers, grant.id).status_code == 403


def test_revoking_needs_the_revoke_capability(server: Server, http: httpx.Client, app):
    victim = server.grant(app, capabilities=[READ])
    everything_but = server.headers(app, capabilities=[SUBMIT, READ, AUDIT])
    refused = revoke(http, everything_but, victim.id)
    assert refused.status_code == 403
    assert refused.json()["error"]["details"] == {"missing": "capability"}
    assert revoke(http, {}, victim.id).status_code == 401
    # Nothing was revoked.
    victim_headers = {"Authorization": f"Bearer {server.keyring.sign(victim)}"}
    assert http.get("/v1/workloads", headers=victim_headers).status_code == 200
    # Nor may it read which grants are revoked.
    listed = http.get("/v1/grants/revocations", headers=everything_but)
    assert listed.status_code == 403, listed.text
    assert listed.json()["error"]["details"] == {"missing": "capability"}
    allowed = http.get("/v1/grants/revocations", headers=server.headers(app, **REVOKER))
    assert allowed.status_code == 200, allowed.text


def test_a_revocation_never_reaches_another_tenant_s_grant(server: Server, http: httpx.Client, app):
    # The other tenant's grant, of an application of the same name.
    theirs = server.grant(app, tenant="t2", capabilities=[READ])
    their_headers = {"Authorization": f"Bearer {server.keyring.sign(theirs)}"}
    # Nor another application's of our own tenant.
    other_app = server.grant(f"{app}-b", capabilities=[READ])
    other_headers = {"Authorization": f"Bearer {server.keyring.sign(other_app)}"}

    ours = server.headers(app, **REVOKER)
    assert revoke(http, ours, theirs.id).json()["revoked"] is True  # recorded, for us only
    assert revoke(http, ours, other_app.id).json()["revoked"] is True
    assert http.get("/v1/workloads", headers=their_headers).status_code == 200
    assert http.get("/v1/workloads", headers=other_headers).status_code == 200

    # Their own revocation still works after ours was recorded.
    their_revoker = server.headers(app, tenant="t2", **REVOKER)
    assert revoke(http, their_revoker, theirs.id).json()["revoked"] is True
    assert http.get("/v1/workloads", headers=their_headers).status_code == 403
    # And it did not show in our audit.
    audit = http.get("/v1/audit", params={"limit": 500}, headers=ours).json()["items"]
    assert all(e["audit"]["tenant"] == "t" for e in audit)
    assert sum(e["audit"]["kind"] == "grant.revoked" for e in audit) == 2  # ours, not theirs


def _poll_while(server: Server, headers: dict[str, str], meanwhile) -> httpx.Response:
    """A long-poll for work (10 s at most) opened under ``headers``; once it waits, call
    ``meanwhile``; the poll's answer.
    """
    with httpx.Client(base_url=server.url, timeout=30) as poller:
        assert poller.post("/v1/claims", json={}, headers=headers).status_code == 204
        with ThreadPoolExecutor(1) as pool:
            poll = pool.submit(poller.post, "/v1/claims", json={"wait_ms": 10_000}, headers=headers)
            time.sleep(1.0)  # the poll has been verified and is waiting
            assert not poll.done()
            meanwhile()
            return poll.result(timeout=20)


def test_a_long_poll_opened_before_a_revocation_claims_nothing(
    server: Server, http: httpx.Client, app
):
    grant = server.grant(app, subject=Subject.worker("late"), capabilities=[CLAIM, WORK_CAPABILITY])
    headers = {"Authorization": f"Bearer {server.keyring.sign(grant)}"}
    admitted: list[str] = []

    def revoke_then_admit() -> None:
        assert revoke(http, server.headers(app, **REVOKER), grant.id).status_code == 200
        created = http.post("/v1/workloads", json=submission("late"), headers=server.headers(app))
        admitted.append(created.json()["workload_id"])

    answer = _poll_while(server, headers, revoke_then_admit)
    _refused_and_unclaimed(answer, "the grant was revoked", http, server, app, admitted[0])


def test_a_long_poll_outliving_its_grant_claims_nothing(server: Server, http: httpx.Client, app):
    grant = server.grant(
        app, subject=Subject.worker("brief"), capabilities=[CLAIM, WORK_CAPABILITY], lifetime=62
    )  # issued a minute ago: valid for two more seconds
    headers = {"Authorization": f"Bearer {server.keyring.sign(grant)}"}
    admitted: list[str] = []

    def admit_once_expired() -> None:
        time.sleep(max(0.0, grant.expires_at - time.time()) + 0.5)
        created = http.post("/v1/workloads", json=submission("brief"), headers=server.headers(app))
        admitted.append(created.json()["workload_id"])

    answer = _poll_while(server, headers, admit_once_expired)
    _refused_and_unclaimed(answer, "grant has expired", http, server, app, admitted[0])


def _refused_and_unclaimed(
    answer: httpx.Response, message: str, http: httpx.Client, server: Server, app, workload_id
) -> None:
    assert answer.status_code == 403, answer.text
    error = answer.json()["error"]
    assert (error["code"], error["message"]) == ("WORKLOAD_UNAUTHORIZED", message)
    work = http.get(f"/v1/workloads/{workload_id}", headers=server.headers(app)).json()
    assert (work["state"], work["fencing_token"]) == ("READY", 0)
