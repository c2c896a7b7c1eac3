"""``/metrics``: Prometheus counters that move with the work, one registry per app."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from prometheus_client.parser import text_string_to_metric_families
from support.factories import CAPABILITIES, make_request
from support.server import WORK_CAPABILITY, Server, submission

from feltdb import Subject, WorkloadStore
from feltdb.auth.policy import CLAIM, READ, SUBMIT
from feltdb.auth.tokens import Keyring
from feltdb.server.app import create_app
from feltdb.server.metrics import STATE_COUNT_TTL_S
from feltdb.storage.targets import open_database
from feltdb.work.states import WorkloadState

REQUESTER = {"subject": Subject.agent("a1"), "capabilities": [SUBMIT, READ]}
WAIT_S = 20.0

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def parse(text: str) -> Samples:
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def scrape(http: httpx.Client) -> Samples:
    answer = http.get("/metrics")  # no token needed
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"].startswith("text/plain")
    return parse(answer.text)


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


def wait_for(check: Callable[[], bool], what: str) -> None:
    """Poll ``check`` until it holds; fail after WAIT_S seconds."""
    deadline = time.monotonic() + WAIT_S
    pause = threading.Event()
    while not check():
        if time.monotonic() > deadline:
            pytest.fail(f"{what} did not happen within {WAIT_S}s")
        pause.wait(0.05)


def fence(claim: dict) -> dict:
    return {"claim_id": claim["claim_id"], "fencing_token": claim["fencing_token"]}


def test_the_counters_move_with_a_lifecycle_on_the_real_server(
    server: Server, http: httpx.Client, app
):
    requester = server.headers(app, **REQUESTER)
    worker = server.headers(
        app, subject=Subject.worker("w1"), capabilities=[CLAIM, WORK_CAPABILITY]
    )
    other_worker = server.headers(
        app, subject=Subject.worker("w2"), capabilities=[CLAIM, WORK_CAPABILITY]
    )
    before = scrape(http)

    # Admitted (the replay is not an admission), claimed, completed.
    first = http.post("/v1/workloads", json=submission("a"), headers=requester).json()
    assert http.post("/v1/workloads", json=submission("a"), headers=requester).status_code == 200
    claim = http.post("/v1/claims", headers=worker).json()
    assert claim["workload_id"] == first["workload_id"]
    base = f"/v1/workloads/{first['workload_id']}"
    assert http.post(f"{base}/start", json=fence(claim), headers=worker).status_code == 204
    done = http.post(
        f"{base}/complete",
        json={**fence(claim), "result_id": f"r-{app}", "output": {}},
        headers=worker,
    )
    assert done.status_code == 200, done.text

    # A failure that is not retryable: dead-lettered.
    second = http.post(
        "/v1/workloads",
        json=submission("b", retry_policy={"max_attempts": 3, "retry_on": []}),
        headers=requester,
    ).json()
    claim = http.post(f"/v1/workloads/{second['workload_id']}/claim", headers=worker).json()
    failed = http.post(
        f"/v1/workloads/{second['workload_id']}/fail",
        json={**fence(claim), "kind": "permanent", "error": "bounced"},
        headers=worker,
    )
    assert failed.json()["state"] == "DEAD_LETTER"

    # A lost worker: the maintenance loop recovers the lease, which wakes a long-poll.
    third = http.post("/v1/workloads", json=submission("c"), headers=requester).json()
    lost = http.post("/v1/claims", json={"lease_ms": 1000}, headers=worker).json()
    assert lost["workload_id"] == third["workload_id"]
    again = http.post("/v1/claims", json={"wait_ms": 15_000}, headers=other_worker, timeout=30)
    assert again.status_code == 200, "the expired lease was not recovered within 15 s"
    assert again.json()["workload_id"] == third["workload_id"]

    # Work past its queue deadline (in an application no worker claims from): timed out.
    late_app = f"{app}-late"
    late = http.post(
        "/v1/workloads",
        json=submission("d", timeouts={"queue_ms": 1000}),
        headers=server.headers(late_app, **REQUESTER),
    ).json()
    late_url = f"/v1/workloads/{late['workload_id']}"
    wait_for(
        lambda: (
            http.get(late_url, headers=server.headers(late_app, **REQUESTER)).json()["state"]
            != "READY"
        ),
        "the queue deadline",
    )

    after = scrape(http)

    def moved(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    # Request-driven counters move exactly (the tests sharing the server run one at a time).
    assert moved("feltdb_admissions_total") == 4
    assert moved("feltdb_claims_total") == 4
    assert moved("feltdb_completions_total") == 1
    assert moved("feltdb_failures_total", kind="permanent") == 1
    # The maintenance loop may also act on other tests' leftovers meanwhile.
    assert moved("feltdb_dead_letters_total") >= 1
    assert moved("feltdb_recoveries_total") >= 1
    assert moved("feltdb_timeouts_total") >= 1
    # Latency by route template, never by raw path.
    assert (
        moved("feltdb_request_seconds_count", method="POST", route="/v1/workloads", status="201")
        == 4
    )
    assert (
        moved("feltdb_request_seconds_count", method="POST", route="/v1/workloads", status="200")
        == 1
    )
    complete_route = "/v1/workloads/{workload_id}/complete"
    assert (
        moved("feltdb_request_seconds_count", method="POST", route=complete_route, status="200")
        == 1
    )
    assert not any(
        f"/{first['workload_id']}" in dict(labels).get("route", "") for _, labels in after
    )


def test_unmatched_paths_share_one_label(http: httpx.Client):
    before = scrape(http)
    for n in range(3):
        assert http.get(f"/nowhere/{n}").status_code == 404
    after = scrape(http)
    key = (
        "feltdb_request_seconds_count",
        frozenset({"method": "GET", "route": "unmatched", "status": "404"}.items()),
    )
    assert after[key] - before.get(key, 0.0) == 3


@pytest.fixture
def store(tmp_path):
    with WorkloadStore.open(tmp_path / "work.db") as opened:
        yield opened


def test_each_app_has_its_own_registry_and_counts_its_maintenance(store):
    keyring = Keyring.generate()
    one = create_app(store, keyring, clock=lambda: 100, maintenance_interval_s=None)
    two = create_app(store, keyring, clock=lambda: 100, maintenance_interval_s=None)
    held = store.create(make_request(idempotency_key="held"))
    store.claim(held.workload_id, "w1", CAPABILITIES, now=100, lease_ms=1000)
    store.create(make_request(idempotency_key="late", timeouts={"queue_ms": 1000}))
    exhausted = store.create(
        make_request(idempotency_key="spent", retry_policy={"max_attempts": 1})
    )
    store.claim(exhausted.workload_id, "w1", CAPABILITIES, now=100, lease_ms=1000)

    assert len(one.state.maintenance.run_once(200)[1]) == 2

    # The app's /metrics answers this rendering (scraped over HTTP in the test above).
    counted = parse(one.state.metrics.render()[0].decode())
    untouched = parse(two.state.metrics.render()[0].decode())
    assert value(counted, "feltdb_recoveries_total") == 2
    assert value(counted, "feltdb_timeouts_total") == 1
    # The spent budget's recovery dead-letters it; the late one by its policy may too.
    assert value(counted, "feltdb_dead_letters_total") >= 1
    for name in ("feltdb_recoveries_total", "feltdb_timeouts_total", "feltdb_dead_letters_total"):
        assert value(untouched, name) == 0


# --- work by state -------------------------------------------------------------------------


class CountingDatabase:
    """A database that counts the state-count queries it answers."""

    def __init__(self, db: Any) -> None:
        self.db = db
        self.state_counts = 0

    def count_by_state(self, collection: str) -> dict[str, int]:
        self.state_counts += 1
        return self.db.count_by_state(collection)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.db, name)


def scrape_app(app: FastAPI) -> Samples:
    """``GET /metrics`` of an in-process app, through its route (no lifespan: no loop)."""

    async def get() -> httpx.Response:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://app") as client:
            return await client.get("/metrics")

    answer = asyncio.run(get())
    assert answer.status_code == 200, answer.text
    return parse(answer.text)


def workloads(samples: Samples) -> dict[str, float]:
    return {
        dict(labels)["state"]: number
        for (name, labels), number in samples.items()
        if name == "feltdb_workloads"
    }


def test_work_by_state_is_counted_by_the_store_at_most_once_per_period(
    new_target: Callable[..., str],
):
    counting = CountingDatabase(open_database(new_target("metrics")))
    store = WorkloadStore(counting)  # type: ignore[arg-type]
    try:
        one = create_app(store, Keyring.generate(), clock=lambda: 100, maintenance_interval_s=None)
        assert counting.state_counts == 0  # building the app and its registry counts nothing
        clock = [1000.0]
        one.state.metrics.workloads.clock = lambda: clock[0]
        held = store.create(make_request(idempotency_key="held"))
        store.create(make_request(idempotency_key="waiting"))
        store.create(make_request("a2", idempotency_key="other"))
        store.claim(held.workload_id, "w1", CAPABILITIES, now=100, lease_ms=1000)

        first = workloads(scrape_app(one))
        # Every state is answered, 0 when none (the contract test counts across tenants).
        assert set(first) == {state.value for state in WorkloadState}
        assert first["READY"] == 2 and first["CLAIMED"] == 1
        assert sum(first.values()) == 3
        assert counting.state_counts == 1

        # Frequent scrapes within the period reuse the count: one query, a stale answer.
        store.create(make_request(idempotency_key="later"))
        clock[0] += STATE_COUNT_TTL_S - 0.1
        for _ in range(5):
            assert workloads(scrape_app(one)) == first
        assert counting.state_counts == 1

        # Once the period has passed, the next scrape counts again.
        clock[0] += 0.1
        assert workloads(scrape_app(one))["READY"] == 3
        assert counting.state_counts == 2

        # Another app over the same store keeps its own cache.
        two = create_app(store, Keyring.generate(), maintenance_interval_s=None)
        assert workloads(parse(two.state.metrics.render()[0].decode()))["READY"] == 3
        assert counting.state_counts == 3
    finally:
        store.close()


def test_a_failed_state_count_leaves_the_gauge_empty_and_metrics_answering(store):
    one = create_app(store, Keyring.generate(), maintenance_interval_s=None)
    clock = [0.0]
    one.state.metrics.workloads.clock = lambda: clock[0]
    store.create(make_request(idempotency_key="a"))
    assert workloads(parse(one.state.metrics.render()[0].decode()))["READY"] == 1
    store.db.close()
    clock[0] += STATE_COUNT_TTL_S
    samples = scrape_app(one)
    assert workloads(samples) == {}
    assert "feltdb_admissions_total" in {name for name, _ in samples}


def test_the_real_server_answers_work_by_state(server: Server, http: httpx.Client, app):
    http.post(
        "/v1/workloads", json=submission("by-state"), headers=server.headers(app, **REQUESTER)
    ).raise_for_status()
    counted = workloads(scrape(http))
    assert set(counted) == {state.value for state in WorkloadState}
    assert all(number >= 0 for number in counted.values())


def test_ready_work_no_worker_serves_shows_per_definition(server: Server, http, app):
    headers = server.headers(app)
    for key, definition in (("a", "nobody-serves-this"), ("b", "nobody-serves-this")):
        body = submission(key, definition_id=definition)
        assert http.post("/v1/workloads", json=body, headers=headers).status_code == 201
    deadline = time.monotonic() + 15  # the gauges are cached for up to 5 s
    while True:
        text = http.get("/metrics").text
        line = next(
            (
                row
                for row in text.splitlines()
                if row.startswith('feltdb_ready_workloads{definition="nobody-serves-this"}')
            ),
            None,
        )
        if line is not None and float(line.split()[-1]) >= 2:
            break
        assert time.monotonic() < deadline, text[-2000:]
        time.sleep(0.5)
    assert 'feltdb_oldest_ready_age_seconds{definition="nobody-serves-this"}' in text
