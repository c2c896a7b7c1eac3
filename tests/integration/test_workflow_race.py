"""Several OS processes submitting the same workflow to one store at once, on each backend:
one run, each node admitted once, every other submission a replay of it."""

from __future__ import annotations

import multiprocessing
from collections import Counter

import mp_workflows
import pytest

from feltdb import WorkloadStore

pytestmark = pytest.mark.multiprocess

CTX = multiprocessing.get_context("spawn")
RESULT_TIMEOUT_S = 120
PROCESSES = 4
NODES = 30


def test_racing_submissions_of_one_workflow_make_one_run(new_target):
    target = new_target("workflows")
    WorkloadStore.open(target).close()  # the schema, before the race
    barrier = CTX.Barrier(PROCESSES)
    with CTX.Pool(PROCESSES, initializer=mp_workflows.init_worker, initargs=(barrier,)) as pool:
        outcomes = pool.starmap_async(
            mp_workflows.submit, [(target, NODES, 3)] * PROCESSES, chunksize=1
        ).get(timeout=RESULT_TIMEOUT_S)
        pool.close()
        pool.join()
    assert all(isinstance(outcome, list) for outcome in outcomes), outcomes
    answers = [answer for outcome in outcomes for answer in outcome]
    assert len({workflow_id for workflow_id, _ in answers}) == 1
    assert Counter(created for _, created in answers)[True] == 1, "made once, replayed after"
    with WorkloadStore.open(target) as store:
        work = store.list("t", "app")
        assert len(work) == NODES
        assert Counter(w.idempotency_key for w in work).most_common(1)[0][1] == 1
        run = store.workflows.get(answers[0][0])
        assert [node.name for node in run.nodes] == [f"n{n}" for n in range(NODES)]
        assert {node.workload_id for node in run.nodes} == {w.workload_id for w in work}
