"""The maintenance loop: one pass is the store's deadlines and recoveries at ``now``."""

from __future__ import annotations

import threading

import pytest
from support.factories import CAPABILITIES, make_request

from feltdb import WorkloadStore
from feltdb.server.maintenance import Maintenance


@pytest.fixture
def store(new_target):
    with WorkloadStore.open(new_target()) as opened:
        yield opened


def test_a_pass_recovers_expired_leases_and_times_out_late_work(store):
    held = store.create(make_request(idempotency_key="held"))
    store.claim(held.workload_id, "w1", CAPABILITIES, now=100, lease_ms=1000)
    late = store.create(make_request(idempotency_key="late", timeouts={"queue_ms": 1000}))
    changes: list[str] = []
    maintenance = Maintenance(store, clock=lambda: 0, on_change=lambda: changes.append("x"))

    assert maintenance.run_once(10) == ([], [])
    assert changes == []
    timed_out, recovered = maintenance.run_once(200)
    assert (timed_out, recovered) == ([late.workload_id], [held.workload_id])
    assert store.get(late.workload_id).state in {"TIMED_OUT", "DEAD_LETTER"}  # by its policy
    assert store.get(held.workload_id).state == "READY"
    assert changes == ["x"]
    assert maintenance.run_once(200) == ([], [])  # nothing is acted on twice


def test_the_timer_runs_passes_until_stopped(store):
    held = store.create(make_request(idempotency_key="held"))
    store.claim(held.workload_id, "w1", CAPABILITIES, now=100, lease_ms=1000)
    recovered = threading.Event()
    maintenance = Maintenance(store, clock=lambda: 10_000, on_change=recovered.set)
    maintenance.start(interval_s=0.01)
    try:
        assert recovered.wait(timeout=10)
    finally:
        maintenance.stop()
    assert store.get(held.workload_id).state == "READY"
    assert maintenance._thread is None
    assert all(t.name != "feltdb-maintenance" for t in threading.enumerate())


def test_a_failing_pass_does_not_stop_the_timer(store):
    calls = threading.Event()
    count = 0

    def clock() -> int:
        nonlocal count
        count += 1
        if count >= 3:
            calls.set()
        return -1  # refused by the store: WORKLOAD_INVALID on every pass

    maintenance = Maintenance(store, clock=clock)
    maintenance.start(interval_s=0.01)
    try:
        assert calls.wait(timeout=10)
    finally:
        maintenance.stop()
