"""Four processes claim one store's work at once (a SQLite file shared by all, one
PostgreSQL database), a third of it under one rate limit of 4 starts a second: in every
second, at most 4 of its claims; every workload is claimed and completed once; and the
limit was reached, not merely never approached.

The instants checked are those the claims committed with (each claim's ``claimed_at``:
the instant its start was counted at in the window), gathered from every child.
"""

from __future__ import annotations

import multiprocessing
from collections import Counter
from collections.abc import Callable

import pytest
from support import limit_children
from support.factories import make_request

from feltdb import WorkloadState, WorkloadStore

pytestmark = pytest.mark.multiprocess
CTX = multiprocessing.get_context("spawn")
STARTS = 4
RATED = 20
UNLIMITED = 40
TIMEOUT_S = 180


def test_four_processes_never_start_more_than_the_rate_allows(
    new_target: Callable[..., str],
) -> None:
    target = new_target()
    with WorkloadStore.open(target) as store:
        store.limits.set_rate_limit("t", "app", "api", (STARTS, 1), actor="ops")
        rated = {
            store.create(
                make_request(idempotency_key=f"r{n}", rate_limit="api", rate_key="acme")
            ).workload_id
            for n in range(RATED)
        }
        for n in range(UNLIMITED):
            store.create(make_request(idempotency_key=f"u{n}"))
    barrier, answers = CTX.Barrier(4), CTX.Queue()
    children = [
        CTX.Process(target=limit_children.drain_rated, args=(target, f"w{n}", barrier, answers))
        for n in range(4)
    ]
    for child in children:
        child.start()
    outcomes = [answers.get(timeout=TIMEOUT_S) for _ in children]
    for child in children:
        child.join(TIMEOUT_S)
        assert child.exitcode == 0
    claims = [claim for claimed, _ in outcomes for claim in claimed]
    assert not [code for _, codes in outcomes for code in codes]
    ids = [workload_id for workload_id, _ in claims]
    assert len(ids) == len(set(ids)) == RATED + UNLIMITED  # each claimed once
    per_second = Counter(at for workload_id, at in claims if workload_id in rated)
    assert max(per_second.values()) == STARTS, per_second  # reached, never passed
    assert len(per_second) >= RATED // STARTS  # so it took at least five seconds
    with WorkloadStore.open(target) as store:
        assert all(w.state is WorkloadState.SUCCEEDED for w in store.list("t", "app"))
