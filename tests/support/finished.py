"""Finished work made fast: admitted, claimed and completed by the batch paths.

For retention's tests and benchmark, which need many finished workloads and nothing else of
them (:func:`finish_many`).
"""

from __future__ import annotations

from feltdb import Completion, WorkloadStore
from support.factories import CAPABILITIES, make_request

BATCH = 500
"""Workloads admitted, claimed or completed per transaction."""


def finish_one(store: WorkloadStore, key: str, at: int, **fields: object) -> str:
    """Admit work under idempotency key ``key`` (the fixture request, with ``fields``) and
    run it to success at ``at`` (result id ``r-{key}``); its id.
    """
    workload = store.create(make_request(idempotency_key=key, **fields))
    claim = store.claim(workload.workload_id, "w", CAPABILITIES, now=at)
    store.start(workload.workload_id, claim.claim_id, "w", claim.fencing_token, now=at)
    store.complete(
        workload.workload_id, claim.claim_id, "w", claim.fencing_token, f"r-{key}", {}, now=at
    )
    return workload.workload_id


def finish_many(store: WorkloadStore, count: int, now: int, *, prefix: str = "done") -> list[str]:
    """Admit ``count`` workloads (idempotency keys ``{prefix}-{n}``), then claim, start and
    complete them all at ``now``, :data:`BATCH` a transaction; their ids, in admission order.
    """
    ids: list[str] = []
    for first in range(0, count, BATCH):
        keys = range(first, min(count, first + BATCH))
        admitted = store.admit_many([make_request(idempotency_key=f"{prefix}-{n}") for n in keys])
        for answer in admitted:
            assert not isinstance(answer, Exception), answer
            ids.append(answer[0].workload_id)
        claims = store.claim_many(
            "t", "app", "w", CAPABILITIES, len(keys), now, 600_000, start=True
        )
        assert len(claims) == len(keys)
        completed = store.complete_many(
            [
                Completion(
                    c.workload_id, c.claim_id, "w", c.fencing_token, f"r-{c.workload_id}", {}
                )
                for c in claims
            ],
            now=now,
        )
        assert not any(isinstance(answer, Exception) for answer in completed)
    return ids
