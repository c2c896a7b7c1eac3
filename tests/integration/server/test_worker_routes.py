"""What the worker runtime needs of the server beyond the store's operations: reading the
work it holds without ``workload:read``, and claiming only what its capabilities cover.
"""

from __future__ import annotations

import httpx
from support.server import WORK_CAPABILITY, Server, submission

from feltdb import Subject
from feltdb.auth.policy import CLAIM


def admit(server: Server, http: httpx.Client, app: str) -> str:
    answer = http.post("/v1/workloads", json=submission(), headers=server.headers(app))
    assert answer.status_code == 201, answer.text
    workload_id: str = answer.json()["workload_id"]
    return workload_id


def worker_headers(server: Server, app: str, name: str) -> dict[str, str]:
    return server.headers(app, subject=Subject.worker(name), capabilities={CLAIM, WORK_CAPABILITY})


def test_a_worker_reads_the_work_it_holds_and_nothing_else(
    server: Server, http: httpx.Client, app: str
) -> None:
    workload_id = admit(server, http, app)
    w1, w2 = worker_headers(server, app, "w1"), worker_headers(server, app, "w2")
    path = f"/v1/workloads/{workload_id}"

    unheld = http.get(path, headers=w1)
    assert unheld.status_code == 403, unheld.text
    assert unheld.json()["error"]["details"] == {"missing": "capability"}
    missing = http.get("/v1/workloads/workload_none", headers=w1)
    assert missing.status_code == 403  # not 404: no workload:read, no existence oracle

    claimed = http.post("/v1/claims", json={}, headers=w1)
    assert claimed.status_code == 200, claimed.text
    held = http.get(path, headers=w1)
    assert held.status_code == 200, held.text
    assert held.json()["state"] == "CLAIMED"
    assert held.json()["current_claim"]["worker_id"] == "worker:w1"
    assert http.get(path, headers=w2).status_code == 403  # held by another worker


def test_claims_may_narrow_the_grants_capabilities(
    server: Server, http: httpx.Client, app: str
) -> None:
    workload_id = admit(server, http, app)
    headers = worker_headers(server, app, "w1")

    narrowed = http.post("/v1/claims", json={"capabilities": ["sms:send"]}, headers=headers)
    assert narrowed.status_code == 204, narrowed.text
    # A capability the grant lacks is not gained by asking for it.
    widened = server.headers(app, subject=Subject.worker("w2"), capabilities={CLAIM})
    refused = http.post("/v1/claims", json={"capabilities": [WORK_CAPABILITY]}, headers=widened)
    assert refused.status_code == 204, refused.text

    covered = http.post("/v1/claims", json={"capabilities": [WORK_CAPABILITY]}, headers=headers)
    assert covered.status_code == 200, covered.text
    assert covered.json()["workload_id"] == workload_id


def test_a_worker_claims_only_the_definitions_it_serves(
    server: Server, http: httpx.Client, app: str
) -> None:
    headers = server.headers(app)
    for key, definition, priority in (("a", "report", 9), ("b", "send", 0)):
        body = submission(key, definition_id=definition, priority=priority)
        assert http.post("/v1/workloads", json=body, headers=headers).status_code == 201
    worker = worker_headers(server, app, "w1")
    claimed = http.post("/v1/claims", json={"definitions": ["send"]}, headers=worker)
    assert claimed.status_code == 200, claimed.text
    claimed_work = http.get(f"/v1/workloads/{claimed.json()['workload_id']}", headers=headers)
    assert claimed_work.json()["definition_id"] == "send"
    # Nothing more of "send"; the higher-priority "report" waits, READY, for its worker.
    assert (
        http.post("/v1/claims", json={"definitions": ["send"]}, headers=worker).status_code == 204
    )
    assert http.post("/v1/claims", json={"definitions": []}, headers=worker).status_code == 204
    listed = http.get("/v1/workloads", params={"state": "READY"}, headers=headers).json()
    assert [w["definition_id"] for w in listed["items"]] == ["report"]


def test_a_claim_by_id_waits_for_a_dependency_held_for_approval(
    server: Server, http: httpx.Client, app: str
) -> None:
    submitter = server.headers(app)
    gate = http.post(
        "/v1/workloads",
        json=submission("gate", approval={"approver_kinds": ["human"]}),
        headers=submitter,
    )
    assert gate.status_code == 201, gate.text
    gate_id = gate.json()["workload_id"]
    assert gate.json()["state"] == "AWAITING_APPROVAL"
    deploy = http.post(
        "/v1/workloads",
        json=submission(
            "deploy", dependencies=[{"workload_id": gate_id, "required_state": "SUCCEEDED"}]
        ),
        headers=submitter,
    )
    assert deploy.status_code == 201, deploy.text
    deploy_id = deploy.json()["workload_id"]
    headers = worker_headers(server, app, "w1")

    assert http.post("/v1/claims", json={}, headers=headers).status_code == 204
    batch = http.post("/v1/batches/claims", json={"limit": 10}, headers=headers)
    assert batch.status_code == 200, batch.text
    assert batch.json()["items"] == []
    refused = http.post(f"/v1/workloads/{deploy_id}/claim", json={}, headers=headers)
    assert refused.status_code == 425, refused.text
    error = refused.json()["error"]
    assert error["code"] == "WORKLOAD_NOT_YET_ELIGIBLE"
    assert error["details"] == {"waits_for": gate_id, "required_state": "SUCCEEDED"}
    assert refused.headers["Retry-After"] == "1"
    after = http.get(f"/v1/workloads/{deploy_id}", headers=submitter)
    assert after.json()["state"] == "READY"
    assert after.json()["fencing_token"] == 0
