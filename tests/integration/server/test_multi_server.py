"""Several servers on one PostgreSQL database, every one running the maintenance loop.

Two real ``feltdb serve`` processes share a database and a keyring, each sweeping leases and
deadlines every 0.2 s. A worker claims through one server with a short lease and is never
heard from again; the lease must be recovered exactly once (whichever server gets there
first; the other's sweep finds it already recovered) and the work completed by another
worker through the other server.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from support.server import WORK_CAPABILITY, Server, serve_several, submission

from feltdb import Subject, WorkloadStore
from feltdb.auth.policy import CLAIM, READ, SUBMIT
from feltdb.work.states import WorkloadState

pytestmark = [pytest.mark.postgres, pytest.mark.multiprocess]

MAINTENANCE_INTERVAL_S = "0.2"
LEASE_MS = 1000
RECOVERY_WAIT_S = 20.0
"""How long the other worker keeps asking for the lost work before the test fails."""
POLL_MS = 2000
APP = "multi"
RECOVERIES = "feltdb_recoveries_total"
HINTS = "feltdb_wakeup_hints_total"


@pytest.fixture
def servers(new_pg_url: Callable[..., str], tmp_path: Path) -> Iterator[list[Server]]:
    """Two servers on one new PostgreSQL database, sharing one keyring."""
    url = new_pg_url("multi")
    interval = ("--maintenance-interval", MAINTENANCE_INTERVAL_S)
    yield from serve_several(tmp_path, url, "postgres", ("one", "two"), *interval)


def counted(http: httpx.Client, name: str) -> float:
    """The server's counter ``name`` (``feltdb_…_total``), from ``/metrics``."""
    answer = http.get("/metrics")
    assert answer.status_code == 200, answer.text
    return sum(
        sample.value
        for family in text_string_to_metric_families(answer.text)
        for sample in family.samples
        if sample.name == name
    )


def test_a_lost_lease_is_recovered_once_and_completed_through_the_other_server(
    servers: list[Server], new_pg_url: Callable[..., str]
) -> None:
    one, two = servers
    requester = one.headers(APP, subject=Subject.agent("a1"), capabilities=[SUBMIT, READ])
    workers = [CLAIM, WORK_CAPABILITY]
    lost_worker = one.headers(APP, subject=Subject.worker("w1"), capabilities=workers)
    worker = two.headers(APP, subject=Subject.worker("w2"), capabilities=workers)
    with (
        httpx.Client(base_url=one.url, timeout=15.0) as via_one,
        httpx.Client(base_url=two.url, timeout=15.0) as via_two,
    ):
        created = via_one.post("/v1/workloads", json=submission("lost"), headers=requester)
        assert created.status_code == 201, created.text
        workload_id = created.json()["workload_id"]

        # Claimed through server one with a short lease, then never heartbeated.
        lost = via_one.post("/v1/claims", json={"lease_ms": LEASE_MS}, headers=lost_worker)
        assert lost.status_code == 200, lost.text
        assert lost.json()["workload_id"] == workload_id

        # Another worker asks server two until a maintenance loop has recovered the lease.
        deadline = time.monotonic() + RECOVERY_WAIT_S
        claim: dict | None = None
        while claim is None:
            if time.monotonic() > deadline:
                pytest.fail(f"the lost lease was not recovered within {RECOVERY_WAIT_S}s")
            answer = via_two.post("/v1/claims", json={"wait_ms": POLL_MS}, headers=worker)
            assert answer.status_code in (200, 204), answer.text
            if answer.status_code == 200:
                claim = answer.json()
        assert claim["workload_id"] == workload_id
        assert claim["worker_id"] == "worker:w2"
        assert claim["fencing_token"] > lost.json()["fencing_token"]

        fence = {"claim_id": claim["claim_id"], "fencing_token": claim["fencing_token"]}
        base = f"/v1/workloads/{workload_id}"
        assert via_two.post(f"{base}/start", json=fence, headers=worker).status_code == 204
        done = via_two.post(
            f"{base}/complete",
            json={**fence, "result_id": "r-multi", "output": {"sent": True}},
            headers=worker,
        )
        assert done.status_code == 200, done.text

        # The lost worker's fence is stale now, through either server.
        stale = {"claim_id": lost.json()["claim_id"], "fencing_token": lost.json()["fencing_token"]}
        late = via_one.post(f"{base}/heartbeat", json=stale, headers=lost_worker)
        assert late.status_code == 409, late.text

        # Exactly one recovery between the two servers (each counts its own).
        assert counted(via_one, RECOVERIES) + counted(via_two, RECOVERIES) == 1

    with WorkloadStore.open(new_pg_url("multi")) as store:
        workload = store.get(workload_id)
    assert workload.state == WorkloadState.SUCCEEDED
    recovering = [e for e in workload.execution_history if e.to == WorkloadState.RECOVERING]
    assert len(recovering) == 1, workload.execution_history
    assert recovering[0].evidence["worker_id"] == "worker:w1"
    claims = [e for e in workload.execution_history if e.to == WorkloadState.CLAIMED]
    assert len(claims) == 2


def test_work_submitted_through_one_server_wakes_a_long_poll_waiting_on_the_other(
    servers: list[Server],
) -> None:
    one, two = servers
    requester = one.headers(APP, subject=Subject.agent("a1"), capabilities=[SUBMIT, READ])
    worker = two.headers(APP, subject=Subject.worker("w2"), capabilities=[CLAIM, WORK_CAPABILITY])
    with (
        httpx.Client(base_url=one.url, timeout=60.0) as via_one,
        httpx.Client(base_url=two.url, timeout=60.0) as via_two,
    ):
        hints_before = counted(via_two, HINTS)
        answers: list[httpx.Response] = []
        waiting = threading.Thread(
            target=lambda: answers.append(
                via_two.post("/v1/claims", json={"wait_ms": 30_000}, headers=worker)
            )
        )
        waiting.start()
        time.sleep(0.5)  # let the claim start waiting (if it has not, it finds the work)
        created = via_one.post("/v1/workloads", json=submission("hinted"), headers=requester)
        assert created.status_code == 201, created.text
        waiting.join(timeout=60)
        [claimed] = answers
        assert claimed.status_code == 200, claimed.text
        assert claimed.json()["workload_id"] == created.json()["workload_id"]
        # Server two heard of the admission from server one through the database (its own
        # commits are not counted as hints); how soon is the benchmark's business.
        deadline = time.monotonic() + RECOVERY_WAIT_S
        while counted(via_two, HINTS) <= hints_before:
            assert time.monotonic() < deadline, "server two received no wake-up hint"
            time.sleep(0.05)
