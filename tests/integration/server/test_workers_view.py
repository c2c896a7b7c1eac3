"""``GET /v1/workers`` and ``Client.workers`` against a real server process: each worker
the application's work names, its leases, its completions, and who may read them.
"""

from __future__ import annotations

import httpx
from support.server import WORK_CAPABILITY, Server, submission

from feltdb import Subject
from feltdb.auth.policy import CLAIM, READ, SUBMIT
from feltdb.client import Client
from feltdb.records.workers import WorkersSeen


def fence(claim: dict) -> dict:
    return {"claim_id": claim["claim_id"], "fencing_token": claim["fencing_token"]}


def submit(http: httpx.Client, server: Server, app: str, key: str, **fields) -> dict:
    headers = server.headers(app, subject=Subject.agent("a1"), capabilities=[SUBMIT])
    answer = http.post("/v1/workloads", json=submission(key, **fields), headers=headers)
    assert answer.status_code == 201, answer.text
    return answer.json()


def worker_headers(server: Server, app: str, name: str) -> dict[str, str]:
    return server.headers(app, subject=Subject.worker(name), capabilities=[CLAIM, WORK_CAPABILITY])


def test_the_workers_answer_names_each_worker_s_leases_and_completions(
    server: Server, http: httpx.Client, app
):
    one, two = worker_headers(server, app, "w1"), worker_headers(server, app, "w2")
    done = submit(http, server, app, "done")["workload_id"]
    held = submit(http, server, app, "held", definition_id="bill")["workload_id"]
    claim = http.post(f"/v1/workloads/{done}/claim", headers=one).json()
    assert http.post(f"/v1/workloads/{done}/start", json=fence(claim), headers=one).is_success
    completed = http.post(
        f"/v1/workloads/{done}/complete",
        json={**fence(claim), "result_id": "r1", "output": {}},
        headers=one,
    )
    assert completed.is_success, completed.text
    assert http.post(f"/v1/workloads/{held}/claim", headers=two).is_success

    reader = server.headers(app, subject=Subject.human("ops"), capabilities=[READ])
    answer = http.get("/v1/workers", headers=reader)
    assert answer.status_code == 200, answer.text
    seen = WorkersSeen.parse(answer.json())
    assert seen.complete and seen.counted
    by_id = {worker.worker_id: worker for worker in seen.workers}
    holder, finisher = (
        by_id[claim["worker_id"]],
        by_id[next(iter(set(by_id) - {claim["worker_id"]}))],
    )
    assert finisher.lease_count == 1 and finisher.definitions == ["bill"]
    assert [lease.workload_id for lease in finisher.leases] == [held] and not finisher.stale
    assert holder.lease_count == 0 and holder.completed == 1 and holder.failed == 0
    assert seen.workers[0] is not holder  # freshest heartbeat first: one holding no lease last

    client = Client(
        server.url, server.token(app, subject=Subject.human("ops"), capabilities=[READ])
    )
    try:
        assert client.workers().workers == seen.workers
    finally:
        client.close()


def test_the_workers_need_workload_read(server: Server, http: httpx.Client, app):
    submitter = server.headers(app, subject=Subject.agent("a1"), capabilities=[SUBMIT])
    assert http.get("/v1/workers", headers=submitter).status_code == 403
    assert http.get("/v1/workers").status_code == 401
