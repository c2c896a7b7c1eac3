"""Child-process bodies for ``tests/reliability/test_quota_race.py``: processes that flood
one tenant with admissions under its quota, and one that finishes the work they admit.

A spawned child imports this module by name (``support.quota_children``; it starts with
its parent's ``sys.path``), so it takes plain arguments and answers plain results.
"""

from __future__ import annotations

import time
from typing import Any

from feltdb import WorkloadError, WorkloadStore
from support.factories import CAPABILITIES, make_request

BARRIER_TIMEOUT_S = 60
DEADLINE_S = 150.0
"""The longest a child works before it gives up (the parent then fails)."""
RETRY_S = 0.003
"""How long a flooder waits after a refusal before it asks again: a flood, not a spin."""


def flood(target: str, name: str, keys: int, barrier: Any, answers: Any) -> None:
    """Admit ``keys`` workloads (``name``-0, ``name``-1, …), alternating single admissions
    and batches of four, each refused one asked again until admitted; put on ``answers``
    the ids this child admitted, how many refusals it met by code, and whether it finished.
    """
    admitted: list[str] = []
    refusals: dict[str, int] = {}
    pending = [f"{name}-{n}" for n in range(keys)]
    with WorkloadStore.open(target) as store:
        barrier.wait(BARRIER_TIMEOUT_S)
        started, round_ = time.monotonic(), 0
        while pending and time.monotonic() - started < DEADLINE_S:
            round_ += 1
            batch = pending[:4] if round_ % 2 else pending[:1]
            now = int(time.time())
            requests = [make_request(idempotency_key=key, created_at=now) for key in batch]
            answered = store.admit_many(requests) if len(batch) > 1 else _one(store, requests[0])
            for key, answer in zip(batch, answered, strict=True):
                if isinstance(answer, WorkloadError):
                    refusals[answer.code] = refusals.get(answer.code, 0) + 1
                    continue
                pending.remove(key)
                if answer[1]:
                    admitted.append(answer[0].workload_id)
            if len(pending) == len(batch) or any(
                isinstance(answer, WorkloadError) for answer in answered
            ):
                time.sleep(RETRY_S)
    answers.put((admitted, refusals, not pending))


def _one(store: WorkloadStore, request: Any) -> list[Any]:
    try:
        return [store.admit(request)]
    except WorkloadError as refusal:
        return [refusal]


def finish(target: str, barrier: Any, stop: Any, answers: Any) -> None:
    """Claim two at a time and complete each, until ``stop`` is set and nothing is left;
    put on ``answers`` the ids this child completed and the refusals it met, by code.
    """
    done: list[str] = []
    refusals: list[str] = []
    with WorkloadStore.open(target) as store:
        barrier.wait(BARRIER_TIMEOUT_S)
        started = time.monotonic()
        while time.monotonic() - started < DEADLINE_S:
            claims = store.claim_many("t", "app", "w", CAPABILITIES, 2, start=True)
            if not claims:
                if stop.is_set():
                    break
                time.sleep(0.002)
                continue
            for claim in claims:
                try:
                    store.complete(
                        claim.workload_id, claim.claim_id, "w", claim.fencing_token,
                        f"r-{claim.workload_id}", {},
                    )  # fmt: skip
                    done.append(claim.workload_id)
                except WorkloadError as error:
                    refusals.append(error.code)
    answers.put((done, refusals))
