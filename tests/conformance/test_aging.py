"""Aging: with a period set, low-priority work that has waited long enough is claimed
ahead of newer higher-priority work; without one, claims follow priority alone.
"""

from __future__ import annotations

import pytest
from support.factories import CAPABILITIES, make_request

from feltdb import WorkloadError, WorkloadStore


def submit(store: WorkloadStore, name: str, priority: int, created_at: int) -> str:
    request = make_request(idempotency_key=name, priority=priority, created_at=created_at)
    return store.create(request).workload_id


def first_claimed(store: WorkloadStore, now: int) -> str:
    claim = store.claim_next("t", "app", "w", CAPABILITIES, now=now)
    assert claim is not None
    return claim.workload_id


def test_old_low_priority_work_goes_first_once_it_has_waited_enough(store):
    old = submit(store, "old", priority=0, created_at=100)
    urgent = [submit(store, f"u{n}", priority=3, created_at=1_000) for n in range(3)]
    store.limits.set_aging("t", "app", 60, actor="ops")

    # At 250 the old work counts 0 + 150 // 60 = 2: below 3, priority decides.
    assert first_claimed(store, 250) in urgent
    # At 400 it counts 5 (300 s waited): it goes ahead of the newer urgent work.
    assert first_claimed(store, 400) == old
    assert first_claimed(store, 400) in urgent


def test_without_a_period_claims_follow_priority_alone(store):
    submit(store, "old", priority=0, created_at=1)
    urgent = submit(store, "urgent", priority=3, created_at=1_000)
    assert store.limits.aging("t", "app") is None
    assert first_claimed(store, 10**6) == urgent


def test_the_oldest_of_the_most_aged_level_goes_first_and_levels_above_follow(store):
    store.limits.set_aging("t", "app", 10, actor="ops")
    middle = submit(store, "middle", priority=5, created_at=900)  # 5 + 10 = 15 at 1,000
    oldest = submit(store, "oldest", priority=1, created_at=800)  # 1 + 20 = 21
    newer = submit(store, "newer", priority=1, created_at=850)  # 1 + 15 = 16
    top = submit(store, "top", priority=9, created_at=1_000)  # 9

    claims = store.claim_many("t", "app", "w", CAPABILITIES, 4, 1_000)

    # The first read starts at the aged level; the claim then reads again from the top.
    assert claims[0].workload_id == oldest
    assert {claim.workload_id for claim in claims} == {middle, oldest, newer, top}


def test_an_aged_level_it_cannot_take_leaves_the_rest_claimable(store):
    store.limits.set_aging("t", "app", 1, actor="ops")
    held = [
        store.create(
            make_request(
                idempotency_key=f"held{n}", priority=0, created_at=1,
                concurrency_key="k", concurrency_limit=1,
            )
        ).workload_id
        for n in range(2)
    ]  # fmt: skip
    urgent = submit(store, "urgent", priority=3, created_at=1_000)
    assert first_claimed(store, 2_000) in held  # aged far past the urgent work
    # The other aged workload waits for its key's slot: the claim reads again from the
    # top and takes the urgent work, rather than answering none.
    assert first_claimed(store, 2_000) == urgent


def test_the_period_is_set_removed_and_bounded(store):
    store.limits.set_aging("t", "app", 3600, actor="ops")
    assert store.limits.aging("t", "app") == 3600
    assert store.limits.aging("t", "other") is None
    for bad in (0, 86_400 * 30 + 1, "60"):
        with pytest.raises(WorkloadError) as refused:
            store.limits.set_aging("t", "app", bad, actor="ops")  # type: ignore[arg-type]
        assert refused.value.code == "WORKLOAD_INVALID" and "aging_s" in refused.value.message
    assert store.limits.aging("t", "app") == 3600
    store.limits.set_aging("t", "app", None, actor="ops")
    assert store.limits.aging("t", "app") is None


def test_an_aged_level_it_cannot_take_never_makes_claim_many_answer_none(store):
    # A claim of two reads two rows at first; the aged read finds one, held by its rate
    # limit: the claim must still read from the top, not take the short read as the end.
    store.limits.set_aging("t", "app", 1, actor="ops")
    store.limits.set_rate_limit("t", "app", "aged-smtp", (1, 3600), actor="ops", now=2_000)
    rated = [
        store.create(
            make_request(idempotency_key=f"rated{n}", priority=0, created_at=1 + n,
                         rate_limit="aged-smtp")
        ).workload_id
        for n in range(2)
    ]  # fmt: skip
    urgent = [submit(store, f"u{n}", priority=3, created_at=1_000) for n in range(3)]
    store.claim(rated[0], "w", CAPABILITIES, now=2_000)  # the window's one start

    claims = store.claim_many("t", "app", "w", CAPABILITIES, 2, 2_000)

    assert len(claims) == 2 and {claim.workload_id for claim in claims} <= set(urgent)
