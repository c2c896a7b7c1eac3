"""The authority over HTTP, against a real server process: submit, claim, run, read."""

from __future__ import annotations

import threading

import httpx
from support.server import WORK_CAPABILITY, Server, submission

from feltdb import Subject
from feltdb.auth.policy import APPROVE, CANCEL, CLAIM, OPERATE, READ, SUBMIT

REQUESTER = {"subject": Subject.agent("a1"), "capabilities": [SUBMIT, READ, CANCEL]}
WORKER = {"subject": Subject.worker("w1"), "capabilities": [CLAIM, WORK_CAPABILITY]}


def fence(claim: dict) -> dict:
    return {"claim_id": claim["claim_id"], "fencing_token": claim["fencing_token"]}


def test_a_workload_runs_its_whole_lifecycle_over_http(server: Server, http: httpx.Client, app):
    requester = server.headers(app, **REQUESTER)
    worker = server.headers(app, **WORKER)

    created = http.post("/v1/workloads", json=submission(), headers=requester)
    assert created.status_code == 201, created.text
    workload = created.json()
    assert workload["state"] == "READY"
    assert workload["requested_by"] == {"kind": "agent", "id": "a1"}
    assert (workload["tenant_id"], workload["application_id"]) == ("t", app)
    workload_id = workload["workload_id"]

    replay = http.post("/v1/workloads", json=submission(), headers=requester)
    assert replay.status_code == 200
    assert replay.json()["workload_id"] == workload_id

    claimed = http.post("/v1/claims", json={"lease_ms": 60_000}, headers=worker)
    assert claimed.status_code == 200, claimed.text
    claim = claimed.json()
    assert (claim["workload_id"], claim["worker_id"]) == (workload_id, "worker:w1")

    base = f"/v1/workloads/{workload_id}"
    assert http.post(f"{base}/start", json=fence(claim), headers=worker).status_code == 204
    beat = http.post(f"{base}/heartbeat", json=fence(claim), headers=worker)
    assert beat.status_code == 200 and beat.json()["claim_id"] == claim["claim_id"]
    saved = http.post(
        f"{base}/checkpoint", json={**fence(claim), "state": {"n": 1}}, headers=worker
    )
    assert saved.status_code == 200 and saved.json()["sequence"] == 1
    context = http.post(f"{base}/context", json=fence(claim), headers=worker)
    assert context.status_code == 200
    assert context.json()["input"] == submission()["input"]
    assert [c["state"] for c in context.json()["checkpoints"]] == [{"n": 1}]
    done = http.post(
        f"{base}/complete",
        json={**fence(claim), "result_id": f"result-{app}", "output": {"sent": True}},
        headers=worker,
    )
    assert done.status_code == 200 and done.json()["output"] == {"sent": True}

    read = http.get(base, headers=requester)
    assert read.status_code == 200
    assert read.json()["state"] == "SUCCEEDED"
    assert read.json()["result"]["result_id"] == f"result-{app}"


def test_identity_comes_from_the_token_never_from_the_body(server: Server, http: httpx.Client, app):
    requester = server.headers(app, **REQUESTER)
    for field, value in [
        ("requested_by", {"kind": "human", "id": "boss"}),
        ("tenant_id", "other"),
        ("application_id", "other"),
        ("authorization_snapshot", {}),
        ("created_at", 1),
    ]:
        answer = http.post("/v1/workloads", json=submission(**{field: value}), headers=requester)
        assert answer.status_code == 422, field
        assert answer.json()["error"]["details"] == {"fields": [field]}


def test_claims_answer_204_when_there_is_no_work(server: Server, http: httpx.Client, app):
    answer = http.post("/v1/claims", headers=server.headers(app, **WORKER))
    assert answer.status_code == 204
    assert answer.content == b""


def test_a_long_poll_answers_with_work_submitted_while_it_waits(
    server: Server, http: httpx.Client, app
):
    worker = server.headers(app, **WORKER)
    answers: list[httpx.Response] = []

    def wait_for_work() -> None:
        with httpx.Client(base_url=server.url, timeout=15.0) as own:
            answers.append(own.post("/v1/claims", json={"wait_ms": 5000}, headers=worker))

    waiter = threading.Thread(target=wait_for_work)
    waiter.start()
    try:
        created = http.post(
            "/v1/workloads", json=submission(), headers=server.headers(app, **REQUESTER)
        )
        assert created.status_code == 201
    finally:
        waiter.join(timeout=15.0)
    assert not waiter.is_alive()
    assert [a.status_code for a in answers] == [200]
    assert answers[0].json()["workload_id"] == created.json()["workload_id"]


def test_a_long_poll_with_no_work_ends_with_204(server: Server, http: httpx.Client, app):
    answer = http.post("/v1/claims", json={"wait_ms": 300}, headers=server.headers(app, **WORKER))
    assert answer.status_code == 204


def test_a_worker_cannot_claim_work_needing_capabilities_it_was_not_granted(
    server: Server, http: httpx.Client, app
):
    http.post("/v1/workloads", json=submission(), headers=server.headers(app, **REQUESTER))
    unable = server.headers(app, subject=Subject.worker("w2"), capabilities=[CLAIM])
    assert http.post("/v1/claims", headers=unable).status_code == 204


def test_a_worker_cannot_act_on_another_workers_claim(server: Server, http: httpx.Client, app):
    created = http.post(
        "/v1/workloads", json=submission(), headers=server.headers(app, **REQUESTER)
    )
    claim = http.post("/v1/claims", headers=server.headers(app, **WORKER)).json()
    impostor = server.headers(app, subject=Subject.worker("w2"), capabilities=[CLAIM])
    path = f"/v1/workloads/{created.json()['workload_id']}/start"
    answer = http.post(path, json=fence(claim), headers=impostor)
    assert answer.status_code == 409
    assert answer.json()["error"]["code"] == "WORKLOAD_STALE_FENCE"


def test_cancelling_ready_work_cancels_it(server: Server, http: httpx.Client, app):
    requester = server.headers(app, **REQUESTER)
    workload_id = http.post("/v1/workloads", json=submission(), headers=requester).json()[
        "workload_id"
    ]
    answer = http.post(f"/v1/workloads/{workload_id}/cancel", headers=requester)
    assert answer.status_code == 200
    assert answer.json() == {"workload_id": workload_id, "state": "CANCELLED"}


def test_an_operator_retries_dead_lettered_work(server: Server, http: httpx.Client, app):
    requester = server.headers(app, **REQUESTER)
    worker = server.headers(app, **WORKER)
    workload_id = http.post(
        "/v1/workloads",
        json=submission(retry_policy={"max_attempts": 3, "retry_on": []}),
        headers=requester,
    ).json()["workload_id"]
    claim = http.post("/v1/claims", headers=worker).json()
    base = f"/v1/workloads/{workload_id}"
    http.post(f"{base}/start", json=fence(claim), headers=worker)
    failed = http.post(
        f"{base}/fail",
        json={**fence(claim), "kind": "permanent", "error": "bounced"},
        headers=worker,
    )
    assert failed.json()["state"] == "DEAD_LETTER"  # not retryable: no automatic retry

    operator = server.headers(app, subject=Subject.human("op"), capabilities=[OPERATE])
    retried = http.post(f"{base}/retry", json={"reason": "mailbox fixed"}, headers=operator)
    assert retried.status_code == 200, retried.text
    assert retried.json()["state"] == "READY"
    assert http.post("/v1/claims", headers=worker).json()["workload_id"] == workload_id


def test_approval_is_decided_by_the_tokens_subject(server: Server, http: httpx.Client, app):
    requester = server.headers(app, **REQUESTER)
    workload = http.post(
        "/v1/workloads", json=submission(approval={"approver_kinds": ["human"]}), headers=requester
    ).json()
    assert workload["state"] == "AWAITING_APPROVAL"
    base = f"/v1/workloads/{workload['workload_id']}"
    decision = {"outcome": "approved", "input_hash": workload["input_hash"]}

    agent = server.headers(app, subject=Subject.agent("a2"), capabilities=[APPROVE])
    refused = http.post(f"{base}/decision", json=decision, headers=agent)
    assert refused.status_code == 403
    assert refused.json()["error"]["code"] == "WORKLOAD_APPROVER_NOT_PERMITTED"

    approver = server.headers(app, subject=Subject.human("ada"), capabilities=[APPROVE])
    decided = http.post(f"{base}/decision", json=decision, headers=approver)
    assert decided.status_code == 200, decided.text
    assert decided.json()["replayed"] is False
    assert decided.json()["decision"]["decided_by"] == {"kind": "human", "id": "ada"}
    again = http.post(f"{base}/decision", json=decision, headers=approver)
    assert again.json()["replayed"] is True
    # The history and the audit name the decider and the requester with their kinds.
    decided_event = http.get(base, headers=requester).json()["execution_history"][-1]
    assert decided_event["actor"] == "human:ada"
    audit = http.get("/v1/audit", headers=server.headers(app)).json()["items"]
    records = [e["audit"] for e in audit if e["audit"].get("work_id") == workload["workload_id"]]
    assert [r["actor"] for r in records][-1] == "human:ada"
    assert {r["subject"] for r in records} == {str(REQUESTER["subject"])}
    claim = http.post("/v1/claims", headers=server.headers(app, **WORKER))
    assert claim.json()["workload_id"] == workload["workload_id"]


def test_health_and_readiness_need_no_token(http: httpx.Client):
    assert http.get("/healthz").json() == {"status": "ok"}
    ready = http.get("/readyz")
    assert ready.status_code == 200 and ready.json()["status"] == "ready"
