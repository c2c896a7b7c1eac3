"""The batch routes as an attacker sees them: a batch is no way around the single routes'
fences, scopes and grants. Each item is refused as its single route refuses it, and the
refusal of one item neither refuses nor reveals anything of another.
"""

from __future__ import annotations

from typing import Any

import httpx
from support.attack import REQUESTER, WORKER, admit, bearer, claim, fence, held
from support.server import Server

from feltdb import Subject

ATTACKER = Subject.worker("w2")


def items(answer: httpx.Response) -> list[dict[str, Any]]:
    assert answer.status_code == 200, answer.text
    found: list[dict[str, Any]] = answer.json()["items"]
    return found


def test_a_worker_cannot_complete_another_workers_claim_in_a_batch(
    http: httpx.Client, server: Server, app: str
):
    victim_id, victim_fence = held(http, server, app)
    admit(http, server.headers(app, subject=REQUESTER), "attacker's")
    attacker = server.headers(app, subject=ATTACKER)
    own = claim(http, attacker)
    batch = [
        {"workload_id": victim_id, **victim_fence, "result_id": "stolen", "output": {"x": 1}},
        {"workload_id": own["workload_id"], **fence(own), "result_id": "mine", "output": 1},
    ]
    answer = items(http.post("/v1/batches/completions", json={"items": batch}, headers=attacker))
    # The fence names w1's claim: w2 holding it word for word is still not w1.
    assert answer[0]["status"] == 409 and answer[0]["error"]["code"] == "WORKLOAD_STALE_FENCE"
    # Its own item is decided on its own (claimed, not started: refused as the single
    # route would refuse it), and the victim's work is untouched.
    single = http.post(
        f"/v1/workloads/{own['workload_id']}/complete",
        json={**fence(own), "result_id": "mine", "output": 1},
        headers=attacker,
    )
    assert (answer[1]["status"], answer[1]["error"]["code"]) == (
        single.status_code,
        single.json()["error"]["code"],
    )
    victim = http.get(f"/v1/workloads/{victim_id}", headers=server.headers(app))
    assert victim.json()["state"] == "RUNNING" and victim.json()["result"] is None
    # The holder still completes it, with the fence it holds.
    mine = [{"workload_id": victim_id, **victim_fence, "result_id": "real", "output": 2}]
    ok = http.post(
        "/v1/batches/completions", json={"items": mine}, headers=server.headers(app, subject=WORKER)
    )
    assert items(ok)[0]["status"] == 200


def test_a_batch_learns_nothing_of_another_tenants_work(
    http: httpx.Client, server: Server, app: str
):
    theirs = admit(http, server.headers(app, tenant="t-victim", subject=REQUESTER))
    attacker = server.headers(app, subject=ATTACKER)
    beat = {"claim_id": "claim_guess", "fencing_token": 1}
    batch = [
        {"workload_id": theirs["workload_id"], **beat},
        {"workload_id": "workload_that_does_not_exist", **beat},
    ]
    hidden, missing = items(
        http.post("/v1/batches/heartbeats", json={"items": batch}, headers=attacker)
    )
    assert hidden["status"] == missing["status"] == 404
    assert hidden["error"]["code"] == missing["error"]["code"] == "WORKLOAD_NOT_FOUND"
    # Word for word what missing work is told, but for the id it names.
    assert hidden["error"]["message"].replace(theirs["workload_id"], "ID") == missing["error"][
        "message"
    ].replace("workload_that_does_not_exist", "ID")


def test_a_batch_submission_cannot_speak_for_the_token(
    http: httpx.Client, server: Server, app: str
):
    headers = server.headers(app, subject=REQUESTER)
    forged = {
        "environment": "production", "definition_id": "send", "definition_revision": "r1",
        "trigger": "manual", "input": {}, "capability_snapshot": [], "idempotency_key": "f",
        "requested_by": {"kind": "human", "id": "ceo"}, "tenant_id": "t-victim",
    }  # fmt: skip
    (answer,) = items(http.post("/v1/batches/workloads", json={"items": [forged]}, headers=headers))
    assert answer["status"] == 422
    assert answer["error"]["details"] == {"fields": ["requested_by", "tenant_id"]}


def test_a_huge_batch_body_is_refused_whole_413(http: httpx.Client, server: Server, app: str):
    headers = bearer(server.token(app, subject=WORKER))
    blob = "x" * 2048
    batch = [
        {"workload_id": f"w{i}", "claim_id": "c", "fencing_token": 1, "result_id": "r",
         "output": blob}
        for i in range(600)
    ]  # fmt: skip
    answer = http.post("/v1/batches/completions", json={"items": batch}, headers=headers)
    assert answer.status_code == 413, answer.text
    assert answer.json()["error"]["code"] == "WORKLOAD_INVALID"
