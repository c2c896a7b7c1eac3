"""Fairness: a claim that finds several keys' ready work serves them in turn, so one key's
backlog never starves another's; within a key, priority then age still order its work.
"""

from __future__ import annotations

from collections import Counter

from support.factories import CAPABILITIES, make_request

from feltdb import WorkloadStore
from feltdb.records.workload import WorkloadDependency
from feltdb.storage.selection import Selection
from feltdb.work import claiming
from feltdb.work.concurrency import Saturation
from feltdb.work.fairness import Rotation
from feltdb.work.states import WorkloadState

NOW = 1_000


def submit(store: WorkloadStore, key: str | None, n: int, **fields: object) -> list[str]:
    tag = "-".join(f"{name}={value}" for name, value in sorted(fields.items()))
    return [
        store.create(
            make_request(idempotency_key=f"{key}-{tag}-{i}", fairness_key=key, **fields)
        ).workload_id
        for i in range(n)
    ]


def keys_claimed(store: WorkloadStore, count: int) -> list[str | None]:
    taken = []
    for _ in range(count):
        claim = store.claim_next("t", "app", "w", CAPABILITIES, now=NOW)
        assert claim is not None
        taken.append(store.get(claim.workload_id).fairness_key)
    return taken


def test_a_small_keys_work_is_served_in_turn_with_a_large_backlog(store):
    submit(store, "big", 300, created_at=1)  # older: claim order alone would take it all
    small = submit(store, "small", 5, created_at=50)

    taken = keys_claimed(store, 10)

    assert taken.count("small") == 5  # every other claim, until it has none left
    assert all(taken[n] != taken[n + 1] for n in range(9))
    assert all(store.get(workload_id).current_claim is not None for workload_id in small)


def test_claim_many_takes_one_of_each_key_in_turn(store):
    for key in ("a", "b", "c"):
        submit(store, key, 10)
    submit(store, None, 10)  # work naming no key takes a turn of its own

    claims = store.claim_many("t", "app", "w", CAPABILITIES, 8, NOW)

    keys = Counter(store.get(claim.workload_id).fairness_key for claim in claims)
    assert keys == {"a": 2, "b": 2, "c": 2, None: 2}


def test_within_a_key_priority_then_age_order_its_work(store):
    low = submit(store, "a", 2, priority=0, created_at=1)
    high = submit(store, "a", 2, priority=9, created_at=5)
    other = submit(store, "b", 1, priority=0)

    order = [
        claim.workload_id
        for claim in (store.claim_next("t", "app", "w", CAPABILITIES, now=NOW) for _ in range(5))
        if claim is not None
    ]

    mine = [workload_id for workload_id in order if workload_id not in other]
    assert set(mine[:2]) == set(high) and set(mine[2:]) == set(low)
    assert order.index(other[0]) <= 1  # b's turn came first or second, not after a's four


def test_a_key_held_back_by_its_limit_gives_its_turn_to_the_next(store):
    submit(store, "a", 5, concurrency_key="a", concurrency_limit=1)
    submit(store, "b", 5)

    taken = keys_claimed(store, 6)

    assert taken.count("a") == 1 and taken.count("b") == 5


def test_one_key_alone_claims_as_without_fairness(store):
    ids = submit(store, "only", 4, created_at=1)
    claims = store.claim_many("t", "app", "w", CAPABILITIES, 4, NOW)
    assert {claim.workload_id for claim in claims} == set(ids)


def test_rows_set_aside_in_turns_never_make_a_claim_skip_claimable_work(store, monkeypatch):
    # Key a's oldest work waits on a dependency (set aside as it is read), key b's on its
    # rate limit: a whole page of turns is taken by them. The claim reads on past them
    # and must still find a's claimable work, wherever a turn's rows stand in claim order.
    monkeypatch.setattr(claiming, "ROTATION", Rotation())  # a's turn first
    monkeypatch.setattr(claiming, "RATE_HELD", Saturation())
    store.limits.set_rate_limit("t", "app", "fair-aside", (1, 3600), actor="ops", now=NOW)
    [blocker] = submit(store, "a", 1, not_before=10**6)
    wait = [WorkloadDependency(workload_id=blocker, required_state=WorkloadState.SUCCEEDED)]
    for n in range(20):
        submit(store, "a", 1, created_at=50 + n, dependencies=wait)
    claimable = submit(store, "a", 3, created_at=100)
    rated = submit(store, "b", 20, created_at=500, rate_limit="fair-aside")
    store.claim(rated[0], "w", CAPABILITIES, now=NOW)  # the window's one start

    claim = store.claim_next("t", "app", "w", CAPABILITIES, now=NOW)

    assert claim is not None and claim.workload_id in claimable


def test_a_key_with_nothing_eligible_yet_costs_a_claim_one_more_key_not_all(store, monkeypatch):
    # The walk finds a key whose work is all delayed (its group has rows, none eligible
    # now): its turn gives nothing, and the next key's fills it; the other keys' ranges
    # are neither read nor, on PostgreSQL, locked by a claim of one.
    monkeypatch.setattr(claiming, "ROTATION", Rotation())  # the delayed key's turn first
    submit(store, "a-delayed", 2, not_before=10**6)
    for n in range(30):
        submit(store, f"k{n:02}", 1)
    reads = []
    original = Selection.in_groups

    def counted(self, groups, *args, **kwargs):
        reads.append(len(groups))
        return original(self, groups, *args, **kwargs)

    monkeypatch.setattr(Selection, "in_groups", counted)

    claim = store.claim_next("t", "app", "w", CAPABILITIES, now=NOW)

    assert claim is not None and store.get(claim.workload_id).fairness_key == "k00"
    assert len(reads) <= 3, reads
