"""Concurrency limits: work naming a concurrency key holds at most its limit of live claims
at once, whichever way it is claimed, and a claim at the limit takes other work.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from support.factories import CAPABILITIES, SIGNER, make_grant, make_request

from feltdb import WorkloadError, WorkloadState, WorkloadStore
from feltdb.records.workload import DURABLE_WORK_COLLECTION as WORK
from feltdb.records.workload import WorkloadClaim
from feltdb.work.concurrency import SLOTS_COLLECTION

NOW = 1_000


def limited(store: WorkloadStore, key: str, *, limit: int = 2, **fields: object) -> str:
    request = make_request(
        idempotency_key=key, concurrency_key="customer-1", concurrency_limit=limit, **fields
    )
    return store.create(request).workload_id


def plain(store: WorkloadStore, key: str, **fields: object) -> str:
    return store.create(make_request(idempotency_key=key, **fields)).workload_id


def claim_next(store: WorkloadStore, now: int = NOW) -> WorkloadClaim | None:
    return store.claim_next("t", "app", "w", CAPABILITIES, now=now)


def test_claims_of_one_key_never_pass_its_limit_and_take_other_work(store):
    keyed = [limited(store, f"k{n}", priority=10) for n in range(4)]
    other = plain(store, "other", priority=0)

    taken = [claim_next(store) for _ in range(4)]

    ids = [claim.workload_id for claim in taken if claim is not None]
    assert set(ids[:2]) <= set(keyed) and ids[2:] == [other]  # two of the key; then others
    assert taken[3] is None
    # A slot is free once its holder no longer holds its claim.
    first = taken[0]
    assert first is not None
    done = first.workload_id
    store.start(done, first.claim_id, "w", first.fencing_token, now=NOW)
    store.complete(done, first.claim_id, "w", first.fencing_token, "r0", {}, now=NOW)
    again = claim_next(store)
    assert again is not None and again.workload_id in set(keyed) - set(ids)
    assert claim_next(store) is None


def test_claim_many_takes_at_most_the_limit_in_one_transaction(store):
    keyed = [limited(store, f"k{n}", priority=5) for n in range(5)]
    others = [plain(store, f"o{n}") for n in range(3)]

    claims = store.claim_many("t", "app", "w", CAPABILITIES, 10, NOW)

    ids = {claim.workload_id for claim in claims}
    assert len(ids & set(keyed)) == 2 and set(others) <= ids and len(ids) == 5
    slots = store.db.list_rows(SLOTS_COLLECTION)
    assert len(slots) == 1 and set(slots[0].document["holders"]) == ids & set(keyed)


def test_a_claim_by_id_at_the_limit_is_refused_and_changes_nothing(store):
    first = limited(store, "a", limit=1)
    second = limited(store, "b", limit=1)
    store.claim(first, "w", CAPABILITIES, now=NOW)
    before = store.db.get_row(WORK, second)

    with pytest.raises(WorkloadError) as refused:
        store.claim(second, "w", CAPABILITIES, now=NOW)

    assert refused.value.code == "WORKLOAD_NOT_READY"
    assert "concurrency key 'customer-1'" in refused.value.message
    assert store.db.get_row(WORK, second) == before


def test_an_expired_lease_holds_its_slot_until_recovery_releases_it(store):
    first = limited(store, "a", limit=1)
    second = limited(store, "b", limit=1)
    store.claim(first, "w", CAPABILITIES, now=NOW, lease_ms=1_000)
    later = NOW + 5

    assert claim_next(store, later) is None  # expired, not yet recovered: still held
    assert store.recover_expired(now=later) == [first]
    claimed = claim_next(store, later)
    assert claimed is not None and claimed.workload_id in (first, second)


def test_keys_are_counted_per_tenant_application(store):
    mine = limited(store, "mine", limit=1)
    grant = SIGNER.sign(make_grant(tenant_id="t2"))
    theirs = limited(store, "theirs", limit=1, tenant_id="t2", authorization_snapshot=grant)
    store.claim(mine, "w", CAPABILITIES, now=NOW)

    claimed = store.claim_next("t2", "app", "w", CAPABILITIES, now=NOW)

    assert claimed is not None and claimed.workload_id == theirs


def test_a_key_at_its_limit_does_not_hide_the_work_behind_its_backlog(store):
    keyed = [limited(store, f"k{n}", limit=1, priority=9) for n in range(300)]
    behind = plain(store, "behind", priority=0)
    first = claim_next(store)
    assert first is not None and first.workload_id in keyed

    claimed = claim_next(store)
    assert claimed is not None and claimed.workload_id == behind
    # Asked again, the key's backlog is passed over by its group, not read row by row.
    assert claim_next(store) is None


@pytest.mark.parametrize(
    ("fields", "named"),
    [
        ({"concurrency_key": "c"}, "concurrency_limit"),
        ({"concurrency_limit": 3}, "concurrency_key"),
        ({"concurrency_key": " ", "concurrency_limit": 3}, "concurrency_key"),
    ],
)
def test_a_key_without_a_limit_or_a_limit_without_a_key_is_refused(store, fields, named):
    with pytest.raises(WorkloadError) as refused:
        store.create(make_request(idempotency_key="x", **fields))
    assert refused.value.code == "WORKLOAD_INVALID" and refused.value.details["fields"] == [named]
    assert store.list("t", "app") == []


@pytest.mark.parametrize("limit", [0, -1, 1001, True, "2"])
def test_a_limit_out_of_bounds_is_refused(limit: object):
    with pytest.raises(WorkloadError) as refused:
        make_request(idempotency_key="x", concurrency_key="c", concurrency_limit=limit)
    assert refused.value.code == "WORKLOAD_INVALID"


def test_the_same_key_with_another_limit_is_not_a_replay(store):
    limited(store, "same", limit=2)
    with pytest.raises(WorkloadError) as refused:
        limited(store, "same", limit=3)
    assert refused.value.code == "IDEMPOTENCY_KEY_REUSED"
    assert refused.value.details["fields"] == ["concurrency_limit"]


def test_unlimited_work_keeps_the_claim_group_it_had(store):
    # Work without a key is grouped as before limits existed (the digest of its environment
    # and capabilities, computed here as that release did): no index is rewritten. Work
    # under a key is grouped apart, and labelled so.
    import hashlib

    import orjson

    from feltdb.storage.index_columns import INDEX_NAMES

    unlimited, keyed = store.get(plain(store, "p")), store.get(limited(store, "k"))
    named = [unlimited.environment, sorted(unlimited.capability_snapshot)]
    before = "c1:" + hashlib.sha256(orjson.dumps(named)).hexdigest()[:32]
    place = INDEX_NAMES.index("claim_group")
    groups = {row.key: row.index[place] for row in store.db.rows_indexed_after("", "", 100)}
    assert groups[unlimited.workload_id] == before
    assert groups[keyed.workload_id].startswith("c1l:") and groups[keyed.workload_id] != before


def test_two_writers_claiming_one_key_at_once_hold_at_most_its_limit(
    store, open_store: Callable[..., WorkloadStore]
):
    import threading

    keyed = {limited(store, f"k{n}", limit=3) for n in range(20)}
    writers = [open_store() for _ in range(4)]
    got: list[str] = []
    barrier = threading.Barrier(len(writers))

    def run(writer: WorkloadStore) -> None:
        barrier.wait(timeout=30)
        for _ in range(10):
            for claim in writer.claim_many("t", "app", "w", CAPABILITIES, 2, NOW):
                got.append(claim.workload_id)

    threads = [threading.Thread(target=run, args=(writer,)) for writer in writers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert len(got) == 3 and set(got) <= keyed
    held = [w for w in store.list("t", "app") if w.state is WorkloadState.CLAIMED]
    assert len(held) == 3


def test_a_definitions_default_limit_is_given_to_its_new_work(store):
    before = plain(store, "before")  # admitted before the default: keeps no limit
    store.limits.set_definition_limit("t", "app", "send", 2, actor="human:ops", now=NOW)
    after = [plain(store, f"a{n}") for n in range(3)]
    own = limited(store, "own", limit=5)  # names its own key: keeps it

    assert store.limits.keys("t", "app").definitions == {"send": 2}
    work = store.get(after[0])
    assert (work.concurrency_key, work.concurrency_limit) == ("definition:send", 2)
    assert store.get(before).concurrency_key is None
    assert store.get(own).concurrency_key == "customer-1"
    # The same request again is a replay: the default is not part of what was asked.
    assert store.admit(make_request(idempotency_key="a0"))[1] is False

    claimed = {
        claim.workload_id for claim in store.claim_many("t", "app", "w", CAPABILITIES, 9, NOW)
    }
    assert claimed & set(after) and len(claimed & set(after)) == 2
    assert {before, own} <= claimed

    store.limits.set_definition_limit("t", "app", "send", None, actor="human:ops", now=NOW)
    assert store.limits.keys("t", "app").definitions == {}
    with pytest.raises(WorkloadError) as refused:
        store.limits.set_definition_limit("t", "app", "send", 0, actor="human:ops")
    assert refused.value.details["fields"] == ["limit"]
    assert store.get(plain(store, "later")).concurrency_key is None


def test_work_asked_to_cancel_holds_its_slot_until_its_worker_confirms(store):
    first = limited(store, "a", limit=1)
    second = limited(store, "b", limit=1)
    claim = store.claim(first, "w", CAPABILITIES, now=NOW)
    store.start(first, claim.claim_id, "w", claim.fencing_token, now=NOW)
    store.cancel(first, "ops", now=NOW)
    assert store.get(first).state is WorkloadState.CANCELLATION_REQUESTED

    assert claim_next(store) is None  # its worker still holds the claim
    store.confirm_cancel(first, claim.claim_id, "w", claim.fencing_token, now=NOW)
    claimed = claim_next(store)
    assert claimed is not None and claimed.workload_id == second


def test_a_definitions_key_is_not_a_requesters_to_name(store):
    with pytest.raises(WorkloadError) as refused:
        store.create(
            make_request(
                idempotency_key="x", concurrency_key="definition:send", concurrency_limit=1
            )
        )
    assert refused.value.details["fields"] == ["concurrency_key"]


def test_a_request_without_a_key_is_no_replay_of_work_that_named_one(store):
    limited(store, "same", limit=2)
    with pytest.raises(WorkloadError) as refused:
        plain(store, "same")
    assert refused.value.code == "IDEMPOTENCY_KEY_REUSED"
