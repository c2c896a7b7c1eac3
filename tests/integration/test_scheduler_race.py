"""Several OS processes running the scheduler over one store at once, on each backend:
every occurrence is admitted exactly once.

Each child opens its own ``WorkloadStore`` on the target (a SQLite file, or one PostgreSQL
database) and runs the same passes, started together; the committed store is then read
back in the parent.
"""

from __future__ import annotations

import multiprocessing
from collections import Counter

import mp_schedulers
import pytest
from support.factories import SIGNER, make_grant

from feltdb import Subject, WorkloadStore

pytestmark = pytest.mark.multiprocess

CTX = multiprocessing.get_context("spawn")
RESULT_TIMEOUT_S = 120
CREATOR = Subject.agent("a1")
START = 1_800_000_000
PROCESSES = 4


def test_racing_schedulers_admit_each_occurrence_exactly_once(new_target):
    target = new_target("schedules")
    grant = SIGNER.sign(make_grant(subject=CREATOR, expires_at=2_000_000_000))
    with WorkloadStore.open(target) as store:
        for n, interval in enumerate((5, 7, 60)):
            store.schedules.create(
                {"schedule_id": f"s{n}", "interval_s": interval, "catch_up": "all",
                 "template": {"definition_id": "tick", "input": {"n": n}}},
                tenant_id="t", application_id="app", requested_by=CREATOR,
                authorization_snapshot=grant, now=START,
            )  # fmt: skip
    # Every child runs the same passes, one each 3 seconds over 10 minutes: each pass
    # meets occurrences the others are admitting at the same moment.
    nows = [START + 3 * k for k in range(1, 201)]
    barrier = CTX.Barrier(PROCESSES)
    with CTX.Pool(PROCESSES, initializer=mp_schedulers.init_worker, initargs=(barrier,)) as pool:
        outcomes = pool.starmap_async(
            mp_schedulers.run_passes, [(target, nows)] * PROCESSES, chunksize=1
        ).get(timeout=RESULT_TIMEOUT_S)
        pool.close()
        pool.join()
    assert all(isinstance(outcome, list) for outcome in outcomes), outcomes
    expected = {
        (f"s{n}", START + interval * k)
        for n, interval in enumerate((5, 7, 60))
        for k in range(1, 600 // interval + 1)
    }
    seen = [(s, instant) for outcome in outcomes for (s, instant, _, _) in outcome]
    assert set(seen) == expected
    # Created once, whoever created it; any other child that met it found it admitted.
    created = Counter((s, i) for outcome in outcomes for (s, i, _, made) in outcome if made)
    assert set(created) == expected and set(created.values()) == {1}
    with WorkloadStore.open(target) as store:
        work = store.list("t", "app")
        assert len(work) == len(expected)
        assert Counter(w.idempotency_key for w in work).most_common(1)[0][1] == 1
        for n, interval in enumerate((5, 7, 60)):
            schedule = store.schedules.get("t", "app", f"s{n}", now=START + 600)
            assert schedule["admitted"] == 600 // interval
            assert schedule["last_occurrence"] == START + interval * (600 // interval)
    # More than one child did admit: the race was real.
    assert sum(1 for outcome in outcomes if any(made for *_, made in outcome)) > 1
