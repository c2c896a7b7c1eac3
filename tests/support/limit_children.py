"""Child-process body for ``tests/reliability/test_limit_race.py``: a process that claims
and finishes work until none is left.

A spawned child imports this module by name (``support.limit_children``; it starts with
its parent's ``sys.path``), so it takes plain arguments and answers plain results.
"""

from __future__ import annotations

import time
from typing import Any

from feltdb import WorkloadError, WorkloadStore
from support.factories import CAPABILITIES

BARRIER_TIMEOUT_S = 60
DEADLINE_S = 120.0
"""The longest a child works before it gives up (the parent then fails)."""


def drain(target: str, worker: str, barrier: Any, answers: Any) -> None:
    """Claim two at a time and complete each (after a short hold, so claims overlap), until
    three claims in a row find nothing; put on ``answers`` the ids this child completed and
    the refusals it met, by code.
    """
    done: list[str] = []
    refusals: list[str] = []
    with WorkloadStore.open(target) as store:
        barrier.wait(BARRIER_TIMEOUT_S)
        empty, started = 0, time.monotonic()
        while empty < 3 and time.monotonic() - started < DEADLINE_S:
            claims = store.claim_many("t", "app", worker, CAPABILITIES, 2, start=True)
            if not claims:
                empty += 1
                time.sleep(0.05)
                continue
            empty = 0
            time.sleep(0.01)  # held a while: the other children claim meanwhile
            for claim in claims:
                try:
                    store.complete(
                        claim.workload_id,
                        claim.claim_id,
                        worker,
                        claim.fencing_token,
                        f"r-{claim.workload_id}",
                        {},
                    )
                    done.append(claim.workload_id)
                except WorkloadError as error:
                    refusals.append(error.code)
    answers.put((done, refusals))


def drain_rated(target: str, worker: str, barrier: Any, answers: Any) -> None:
    """Claim two at a time and complete each until nothing is left, waiting while only
    rate-limited work is (as long as the claim says, a fifth of a second at most); put on
    ``answers`` each claim this child took (workload id, the instant it was claimed) and
    the refusals it met, by code.
    """
    claimed: list[tuple[str, int]] = []
    refusals: list[str] = []
    with WorkloadStore.open(target) as store:
        barrier.wait(BARRIER_TIMEOUT_S)
        empty, started = 0, time.monotonic()
        while empty < 3 and time.monotonic() - started < DEADLINE_S:
            found = store.claim_work("t", "app", worker, CAPABILITIES, 2)
            if not found:
                empty = 0 if found.next_start_s is not None else empty + 1
                time.sleep(0.2 if found.next_start_s is not None else 0.05)
                continue
            empty = 0
            for work in found:
                claim = work.claim
                claimed.append((claim.workload_id, claim.claimed_at))
                try:
                    store.complete(
                        claim.workload_id, claim.claim_id, worker, claim.fencing_token,
                        f"r-{claim.workload_id}", {},
                    )  # fmt: skip
                except WorkloadError as error:
                    refusals.append(error.code)
    answers.put((claimed, refusals))
