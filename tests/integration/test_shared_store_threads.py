"""docs/api.md: "One WorkloadStore may be used from several threads at once"."""

from __future__ import annotations

import threading

from support.factories import CAPABILITIES, make_request

from feltdb import AttemptStatus, WorkloadError, WorkloadState, WorkloadStore

WORKLOADS = 200
THREADS = 8


def test_one_store_shared_by_many_threads_runs_every_workload_exactly_once(new_target):
    with WorkloadStore.open(new_target("shared")) as store:
        ids = {
            store.create(make_request(idempotency_key=f"k{n}", priority=n % 5)).workload_id
            for n in range(WORKLOADS)
        }
        completed: list[list[str]] = [[] for _ in range(THREADS)]
        failures: list[BaseException] = []
        start = threading.Barrier(THREADS)

        def drain(me: int) -> None:
            worker = f"worker-{me}"
            try:
                start.wait(timeout=30)
                while True:
                    claim = store.claim_next("t", "app", worker, CAPABILITIES, now=100)
                    if claim is None:
                        return
                    fence = (claim.workload_id, claim.claim_id, worker, claim.fencing_token)
                    store.start(*fence, now=101)
                    store.complete(*fence, f"result-{claim.workload_id}", {"by": me}, now=102)
                    completed[me].append(claim.workload_id)
            except (WorkloadError, threading.BrokenBarrierError) as error:
                failures.append(error)

        threads = [threading.Thread(target=drain, args=(n,)) for n in range(THREADS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=120)
        assert not any(thread.is_alive() for thread in threads), "a thread hung"
        assert failures == []
        done = [workload_id for mine in completed for workload_id in mine]
        assert sorted(done) == sorted(ids), "every workload completed once, by one thread"
        for workload in store.list("t", "app"):
            assert workload.state is WorkloadState.SUCCEEDED
            assert [a.status for a in workload.attempts] == [AttemptStatus.SUCCEEDED]
