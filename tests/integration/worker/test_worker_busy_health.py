"""A worker whose every handler slot is busy is still judged (feltdb.worker.health): its
heartbeats failing to reach the authority make it unhealthy, and so do handlers that keep
their slots after being told to stop. Real workers on an embedded SQLite store; the bound
is short (1 s) and every wait is for a verdict, with a deadline.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from support.factories import make_request

from feltdb.client import LocalClient
from feltdb.errors import ErrorCode, WorkloadError
from feltdb.records.workload import WorkloadRetryPolicy
from feltdb.work.store import WorkloadStore
from feltdb.worker import Context, Worker

BOUND_S = 1.0
"""Past the busy loop's pass (every half second) and the heartbeats' interval (1 s)."""
WAIT_S = 15.0
"""The longest a verdict is waited for (a bound on failure, not a measured time)."""


@pytest.fixture
def store(tmp_path: Path) -> Iterator[WorkloadStore]:
    with WorkloadStore.open(tmp_path / "busy.db") as opened:
        yield opened


def admit(store: WorkloadStore, key: str) -> str:
    request = make_request(
        idempotency_key=key, created_at=int(time.time()),
        retry_policy=WorkloadRetryPolicy(max_attempts=1),
    )  # fmt: skip
    workload, created = store.admit(request)
    assert created
    return workload.workload_id


def busy_worker(store: WorkloadStore, release: threading.Event) -> tuple[Worker, threading.Event]:
    """A worker of one slot, whose handler runs until ``release`` (told to stop or not)."""
    worker = Worker(
        store=store, tenant="t", application="app", capabilities={"email:send"}, name="w1",
        lease_ms=3000,
    )  # fmt: skip
    running = threading.Event()

    @worker.handler("send")
    def send(ctx: Context) -> Any:
        running.set()
        release.wait(WAIT_S * 2)
        return {"sent": True}

    return worker, running


def until_said(verdict: Callable[[], str | None], start: str) -> str:
    deadline = time.monotonic() + WAIT_S
    while not (said := verdict() or "").startswith(start):
        assert time.monotonic() < deadline, said
        time.sleep(0.05)
    return said


def drained(worker: Worker) -> threading.Thread:
    thread = threading.Thread(target=worker.drain, name="test-worker", daemon=True)
    thread.start()
    return thread


def test_heartbeats_failing_to_reach_the_authority_make_a_busy_worker_unhealthy(
    store: WorkloadStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    admit(store, "k1")
    release = threading.Event()
    worker, running = busy_worker(store, release)
    renew = LocalClient.renew_leases
    cut_off = threading.Event()

    def renew_leases(self: LocalClient, items: Any) -> Any:
        if cut_off.is_set():
            raise WorkloadError(ErrorCode.WORKLOAD_STORAGE_FAILURE, "no route to the authority")
        return renew(self, items)

    monkeypatch.setattr(LocalClient, "renew_leases", renew_leases)
    thread = drained(worker)
    try:
        assert running.wait(WAIT_S)
        verdict = lambda: worker.pulse.verdict(BOUND_S)  # noqa: E731
        cut_off.set()  # every slot is busy: no claim is made, only heartbeats
        said = until_said(verdict, "the authority has not been reached")
        assert said.endswith("(no route to the authority)")
        cut_off.clear()
        until_said(lambda: verdict() or "healthy", "healthy")  # a heartbeat answered
    finally:
        release.set()
        thread.join(WAIT_S)
    assert not thread.is_alive()


def test_a_slot_held_by_a_handler_whose_lease_is_lost_makes_the_worker_unhealthy(
    store: WorkloadStore,
) -> None:
    workload_id = admit(store, "k1")
    release = threading.Event()
    worker, running = busy_worker(store, release)  # its handler ignores ctx.cancelled
    thread = drained(worker)
    try:
        assert running.wait(WAIT_S)
        verdict = lambda: worker.pulse.verdict(BOUND_S)  # noqa: E731
        store.timeout(workload_id, "ops")  # the next heartbeat learns the lease is gone
        said = until_said(verdict, "no claim for ")
        assert "every handler slot is held by a handler told to stop" in said
    finally:
        release.set()
        thread.join(WAIT_S)
    assert not thread.is_alive()
