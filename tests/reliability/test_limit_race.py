"""Four processes claim one store's work at once (a SQLite file shared by all, one
PostgreSQL database), half of it under one concurrency key of limit 3: the limit holds at
every instant, and every workload is completed once.

"Every instant" is checked twice. A sampler in the parent counts, as often as it can
while the children run, the key's work in a held state (one statement: one snapshot of
the committed store). And on SQLite, whose commits are serial and logged in order, the
log is replayed: after each commit, the key's workloads whose last logged state is a held
one are at most 3.
"""

from __future__ import annotations

import multiprocessing
import threading
from collections import Counter
from collections.abc import Callable

from support import limit_children
from support.factories import make_request

from feltdb import WorkloadState, WorkloadStore
from feltdb.records.workload import DURABLE_WORK_COLLECTION as WORK
from feltdb.work.states import HELD_STATES

CTX = multiprocessing.get_context("spawn")
LIMIT = 3
KEYED = 60
UNLIMITED = 60
HELD = {state.value for state in HELD_STATES}
TIMEOUT_S = 180


def test_four_processes_never_hold_more_than_the_limit_of_a_key(
    new_target: Callable[..., str],
) -> None:
    target = new_target()
    with WorkloadStore.open(target) as store:
        keyed = {
            store.create(
                make_request(
                    idempotency_key=f"k{n}", definition_id="limited",
                    concurrency_key="acme", concurrency_limit=LIMIT,
                )
            ).workload_id
            for n in range(KEYED)
        }  # fmt: skip
        for n in range(UNLIMITED):
            store.create(make_request(idempotency_key=f"u{n}"))
    barrier, answers = CTX.Barrier(5), CTX.Queue()
    children = [
        CTX.Process(target=limit_children.drain, args=(target, f"w{n}", barrier, answers))
        for n in range(4)
    ]
    for child in children:
        child.start()
    peaks: list[int] = []
    with WorkloadStore.open(target) as store:
        sampling = threading.Event()
        sampler = threading.Thread(target=_sample, args=(store, keyed, sampling, peaks))
        barrier.wait(TIMEOUT_S)
        sampler.start()
        outcomes = [answers.get(timeout=TIMEOUT_S) for _ in children]
        sampling.set()
        sampler.join(30)
        for child in children:
            child.join(TIMEOUT_S)
            assert child.exitcode == 0
        done = Counter(workload_id for ids, _ in outcomes for workload_id in ids)
        assert set(done.values()) == {1} and len(done) == KEYED + UNLIMITED
        assert not [code for _, codes in outcomes for code in codes]
        assert max(peaks) <= LIMIT and len(peaks) > 10, peaks
        assert max(peaks) == LIMIT  # the limit was reached, not merely never approached
        if not target.startswith("postgresql"):
            assert _logged_peak(store, keyed) == LIMIT
        assert all(w.state is WorkloadState.SUCCEEDED for w in store.list("t", "app"))


def _sample(store: WorkloadStore, keyed: set[str], stop: threading.Event, peaks: list[int]) -> None:
    """Count the key's held work, one snapshot a read, until ``stop``."""
    while not stop.is_set():
        rows = store.db.list_rows(WORK, tenant_id="t", application_id="app")
        peaks.append(sum(row.key in keyed and row.document["state"] in HELD for row in rows))


def _logged_peak(store: WorkloadStore, keyed: set[str]) -> int:
    """The most of the key's work held after any commit, replaying the log in order."""
    held: set[str] = set()
    peak = 0
    for entry in store.db.committed_transactions_after(0):
        audit = entry.audit or {}
        work_id = audit.get("work_id")
        if work_id not in keyed:
            continue
        (held.add if audit.get("state") in HELD else held.discard)(work_id)
        peak = max(peak, len(held))
    return peak
