"""Admission in the caller's transaction, across real processes, on both backends.

- A claimer in another process (a real ``feltdb serve``, long-polling through
  ``feltdb.Client``) never gets work whose admitting transaction is still open, and gets
  it once that transaction commits. (On SQLite the server's claim, a write, waits for the
  caller's write lock; ``tests/conformance/test_joined_admission.py`` shows a reader of
  another store not seeing the uncommitted work.)
- An application killed with SIGKILL at random moments, while it writes an order row and
  admits its work in each of its transactions (:mod:`support.joined_child`), leaves both
  or neither: afterwards the committed orders and the admitted work name the same orders,
  every order it printed as committed among them.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.app_rows import begin, commit, connect, create_orders, insert_order, orders
from support.factories import make_request
from support.server import Server, serve

from feltdb import WorkloadStore
from feltdb.client import Client
from feltdb.records.workload import WorkloadClaim

TESTS = Path(__file__).resolve().parents[1]
KILLS = 8
"""SIGKILLs per backend, each at a random moment after the child committed something."""


@pytest.fixture
def server(tmp_path: Path, store_target: str, backend: str) -> Iterator[Server]:
    yield from serve(tmp_path, store_target, backend=backend)


@pytest.fixture
def store_target(new_target) -> str:
    return new_target("work")


def test_a_claimer_in_another_process_gets_the_work_only_once_it_commits(
    server: Server, store_target: str
):
    create_orders(store_target)
    claimed: list[WorkloadClaim | None] = []
    with Client(server.url, server.token("app")) as client:
        waiter = threading.Thread(
            target=lambda: claimed.append(client.claim_next(wait_ms=20_000)), daemon=True
        )
        with WorkloadStore.open(store_target) as store:
            connection = connect(store_target)
            try:
                begin(connection)
                insert_order(connection, "order-1")
                workload, created = store.admit(
                    make_request(idempotency_key="order-1"), connection=connection
                )
                waiter.start()
                # The server's long-poll looks every 0.25 s (SQLite) or on each hint
                # (PostgreSQL): for a second it finds nothing, the work being uncommitted.
                waiter.join(1.0)
                assert waiter.is_alive() and claimed == []
                commit(connection)
            finally:
                connection.close()
        waiter.join(20)
    assert created
    [claim] = claimed
    assert claim is not None and claim.workload_id == workload.workload_id


def test_an_application_killed_mid_transaction_leaves_its_row_and_work_together(
    store_target: str, tmp_path: Path
):
    create_orders(store_target)
    rng = random.Random()
    seed = rng.randrange(2**32)
    rng.seed(seed)
    printed: set[str] = set()
    first = 0
    env = {**os.environ, "PYTHONPATH": str(TESTS)}
    for _ in range(KILLS):
        child = subprocess.Popen(
            [sys.executable, "-m", "support.joined_child", store_target, str(first)],
            stdout=subprocess.PIPE,
            env=env,
        )
        assert child.stdout is not None
        try:
            # Killed a random number of commits in, a random moment after the last one.
            for _ in range(rng.randint(1, 30)):
                line = child.stdout.readline()
                assert line, f"the child ended (seed {seed})"
                printed.add(f"order-{int(line)}")
            time.sleep(rng.uniform(0, 0.02))
        finally:
            child.send_signal(signal.SIGKILL)
            child.wait(10)
        printed.update(f"order-{int(line)}" for line in child.stdout.read().split())
        child.stdout.close()
        first += 1000  # the next child's orders: their own numbers

    committed = orders(store_target)
    with WorkloadStore.open(store_target) as store:
        admitted = {w.idempotency_key for w in store.list("t", "app")}
        assert store.audit.verify().problem is None
    assert printed <= committed, f"seed {seed}"
    assert committed == admitted, f"seed {seed}: rows without work or work without rows"
