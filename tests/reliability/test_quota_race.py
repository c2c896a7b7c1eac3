"""Three processes flood one tenant with admissions (single ones and batches) under a quota
of at most 4 unfinished workloads, while a fourth finishes the work they admit, on a SQLite
file shared by all and on one PostgreSQL database: the tenant's unfinished work never
passes the cap, every workload is admitted once, and the flood was refused
``WORKLOAD_QUOTA_EXCEEDED`` meanwhile (a real flood, not a trickle under the cap).

"Never" is checked twice. A sampler in the parent counts, as often as it can while the
children run, the tenant's unfinished work (one statement: one snapshot of the committed
store). And on SQLite, whose commits are serial and logged in order, the log is replayed:
after each commit, the workloads whose last logged state is not a terminal one are at
most 4. (PostgreSQL numbers its commits by transaction id, which is not the order they
commit in, so its log is not replayed: its samples and its final state are checked.)
"""

from __future__ import annotations

import multiprocessing
import threading
from collections import Counter
from collections.abc import Callable

from support import quota_children

from feltdb import WorkloadState, WorkloadStore
from feltdb.records.workload import DURABLE_WORK_COLLECTION as WORK
from feltdb.work.quotas import UNFINISHED_STATES

CTX = multiprocessing.get_context("spawn")
CAP = 4
FLOODERS = 3
KEYS = 40
TIMEOUT_S = 180


def test_three_flooding_processes_never_pass_the_cap_of_unfinished_work(
    new_target: Callable[..., str],
) -> None:
    target = new_target()
    with WorkloadStore.open(target) as store:
        store.limits.set_quota("t", max_unfinished=CAP, actor="human:ops", now=0)
    barrier, answers, finished = CTX.Barrier(FLOODERS + 2), CTX.Queue(), CTX.Queue()
    stop = CTX.Event()
    flooders = [
        CTX.Process(target=quota_children.flood, args=(target, f"f{n}", KEYS, barrier, answers))
        for n in range(FLOODERS)
    ]
    worker = CTX.Process(target=quota_children.finish, args=(target, barrier, stop, finished))
    for child in [*flooders, worker]:
        child.start()
    peaks: list[int] = []
    with WorkloadStore.open(target) as store:
        sampling = threading.Event()
        sampler = threading.Thread(target=_sample, args=(store, sampling, peaks))
        barrier.wait(TIMEOUT_S)
        sampler.start()
        floods = [answers.get(timeout=TIMEOUT_S) for _ in flooders]
        stop.set()
        done, refused = finished.get(timeout=TIMEOUT_S)
        sampling.set()
        sampler.join(30)
        for child in [*flooders, worker]:
            child.join(TIMEOUT_S)
            assert child.exitcode == 0
        assert all(complete for _, _, complete in floods), floods
        admitted = Counter(workload_id for ids, _, _ in floods for workload_id in ids)
        assert set(admitted.values()) == {1} and len(admitted) == FLOODERS * KEYS
        codes: Counter[str] = Counter()
        for _, counted, _ in floods:
            codes.update(counted)
        assert set(codes) <= {"WORKLOAD_QUOTA_EXCEEDED"} and codes["WORKLOAD_QUOTA_EXCEEDED"] > 0
        assert not refused and sorted(done) == sorted(admitted)
        assert max(peaks) <= CAP and len(peaks) > 10, peaks
        if not target.startswith("postgresql"):
            assert _logged_peak(store) == CAP  # reached, and never passed, at any commit
        assert all(w.state is WorkloadState.SUCCEEDED for w in store.list("t", "app"))
        (quota,) = store.limits.quotas("t").quotas
        assert quota.unfinished == 0


def _sample(store: WorkloadStore, stop: threading.Event, peaks: list[int]) -> None:
    """Count the tenant's unfinished work, one snapshot a read, until ``stop``."""
    while not stop.is_set():
        peaks.append(store.db.count_in_states(WORK, "t", UNFINISHED_STATES, 1000))


def _logged_peak(store: WorkloadStore) -> int:
    """The most unfinished work after any commit, replaying the log in order."""
    unfinished: set[str] = set()
    peak = 0
    for entry in store.db.committed_transactions_after(0):
        audit = entry.audit or {}
        work_id, state = audit.get("work_id"), audit.get("state")
        if work_id is None or state is None:
            continue
        (unfinished.add if state in UNFINISHED_STATES else unfinished.discard)(work_id)
        peak = max(peak, len(unfinished))
    return peak
