"""The maintenance loop: one pass is the store's deadlines and recoveries at ``now``; what
it commits reaches the store's commit observers (the server's metrics and wake-ups)."""

from __future__ import annotations

import logging
import threading

import pytest
from support.factories import CAPABILITIES, make_request

from feltdb import WorkloadStore
from feltdb.server.maintenance import Maintenance
from feltdb.storage.base import storage_failure
from feltdb.work.changes import Operation, WorkloadChange


@pytest.fixture
def store(new_target):
    with WorkloadStore.open(new_target()) as opened:
        yield opened


def run_until(maintenance: Maintenance, done: threading.Event) -> None:
    """Run the timer every 10 ms until ``done`` is set (10 s at most), then stop it."""
    maintenance.start(interval_s=0.01)
    try:
        assert done.wait(timeout=10)
    finally:
        maintenance.stop()


def test_a_pass_recovers_expired_leases_and_times_out_late_work(store):
    held = store.create(make_request(idempotency_key="held"))
    store.claim(held.workload_id, "w1", CAPABILITIES, now=100, lease_ms=1000)
    late = store.create(make_request(idempotency_key="late", timeouts={"queue_ms": 1000}))
    changes: list[WorkloadChange] = []
    store.observe(changes.append)
    maintenance = Maintenance(store, clock=lambda: 0)

    assert maintenance.run_once(10) == ([], [])
    assert changes == []
    timed_out, recovered = maintenance.run_once(200)
    assert (timed_out, recovered) == ([late.workload_id], [held.workload_id])
    assert store.get(late.workload_id).state in {"TIMED_OUT", "DEAD_LETTER"}  # by its policy
    assert store.get(held.workload_id).state == "READY"
    # The observers were told of each commit, as committed.
    assert [(c.operation, c.workload.workload_id) for c in changes] == [
        (Operation.DEADLINE, late.workload_id),
        (Operation.RECOVER, held.workload_id),
    ]
    assert changes[1].workload.state == "READY" and changes[1].previous == "CLAIMED"
    assert maintenance.run_once(200) == ([], [])  # nothing is acted on twice
    assert len(changes) == 2


def test_the_timer_runs_passes_until_stopped(store):
    held = store.create(make_request(idempotency_key="held"))
    store.claim(held.workload_id, "w1", CAPABILITIES, now=100, lease_ms=1000)
    recovered = threading.Event()
    store.observe(lambda change: recovered.set())
    maintenance = Maintenance(store, clock=lambda: 10_000)
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
    run_until(maintenance, calls)


def test_an_unreachable_store_is_logged_once_without_a_traceback_and_its_return_once(store, caplog):
    passes = 0
    back = threading.Event()

    def clock() -> int:
        # Six passes in an outage, as the store reports one, then the store answers.
        nonlocal passes
        passes += 1
        if passes <= 6:
            raise storage_failure("PostgreSQL store x is unreachable: connection refused")
        if passes >= 9:
            back.set()
        return 10

    maintenance = Maintenance(store, clock=clock)
    with caplog.at_level(logging.DEBUG, logger="feltdb.server.maintenance"):
        run_until(maintenance, back)
    said = [(r.levelname, r.getMessage(), r.exc_info) for r in caplog.records]
    assert said == [
        (
            "WARNING",
            "maintenance paused: WORKLOAD_STORAGE_FAILURE: PostgreSQL store x is unreachable: "
            "connection refused; retrying every interval",
            None,
        ),
        ("WARNING", "maintenance resumed: the store answers again", None),
    ]


def test_a_closed_store_pauses_maintenance_with_one_warning(store, caplog):
    store.close()  # every call now fails with WORKLOAD_STORAGE_FAILURE
    calls = threading.Event()
    count = 0

    def clock() -> int:
        nonlocal count
        count += 1
        if count >= 4:
            calls.set()
        return 10

    maintenance = Maintenance(store, clock=clock)
    with caplog.at_level(logging.DEBUG, logger="feltdb.server.maintenance"):
        run_until(maintenance, calls)
    assert [(r.levelname, r.exc_info) for r in caplog.records] == [("WARNING", None)]
    assert "WORKLOAD_STORAGE_FAILURE" in caplog.records[0].getMessage()
