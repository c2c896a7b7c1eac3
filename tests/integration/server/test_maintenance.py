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


def run_passes(store: WorkloadStore, passes: int, *, now: int) -> None:
    """Run the timer over ``store`` until its clock, answering ``now``, has been read for
    ``passes`` passes."""
    done = threading.Event()
    count = 0

    def clock() -> int:
        nonlocal count
        count += 1
        if count >= passes:
            done.set()
        return now

    run_until(Maintenance(store, clock=clock), done)


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
    run_passes(store, 3, now=-1)  # refused by the store: WORKLOAD_INVALID on every pass


def said(caplog: pytest.LogCaptureFixture) -> list[tuple[str, str, bool]]:
    """What the maintenance loop logged: (level, message, with a traceback) each."""
    return [(r.levelname, r.getMessage(), r.exc_info is not None) for r in caplog.records]


def test_an_outage_is_said_when_it_starts_and_its_cause_changes_and_once_when_it_ends(
    store, caplog
):
    passes = 0
    back = threading.Event()
    refused = "PostgreSQL store x is unreachable: connection refused"
    full = "PostgreSQL store x is unreachable: too many clients"

    def clock() -> int:
        # Passes 1-6 fail as the store reports an outage (its cause changes at 4), then
        # the store answers.
        nonlocal passes
        passes += 1
        if passes <= 6:
            raise storage_failure(refused if passes <= 3 else full)
        if passes >= 9:
            back.set()
        return 10

    maintenance = Maintenance(store, clock=clock)
    with caplog.at_level(logging.DEBUG, logger="feltdb.server.maintenance"):
        run_until(maintenance, back)
    logged = said(caplog)
    above_debug = [entry for entry in logged if entry[0] != "DEBUG"]
    assert above_debug == [
        (
            "WARNING",
            f"maintenance paused: WORKLOAD_STORAGE_FAILURE: {refused}; retrying every interval",
            False,
        ),
        (
            "WARNING",
            f"maintenance paused: WORKLOAD_STORAGE_FAILURE: {full}; retrying every interval",
            False,
        ),
        ("INFO", "maintenance resumed: the store answers again", False),
    ]
    # Each failed pass keeps its traceback, for whoever runs at DEBUG.
    assert [entry for entry in logged if entry[0] == "DEBUG"] == [
        ("DEBUG", "maintenance pass failed", True)
    ] * 6


def test_a_closed_store_pauses_maintenance_with_one_warning(store, caplog):
    store.close()  # every call now fails with WORKLOAD_STORAGE_FAILURE
    with caplog.at_level(logging.INFO, logger="feltdb.server.maintenance"):
        run_passes(store, 4, now=10)
    [(level, message, traceback)] = said(caplog)
    assert (level, traceback) == ("WARNING", False)
    assert "WORKLOAD_STORAGE_FAILURE" in message
