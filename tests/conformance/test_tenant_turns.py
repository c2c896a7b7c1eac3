"""Claims across tenants (``store.tenants.claim_many``): each application in weighted
turn, so one tenant's backlog never starves another's work.
"""

from __future__ import annotations

from collections import Counter

import pytest
from support.factories import CAPABILITIES, SIGNER, make_grant, make_request

from feltdb import WorkloadError, WorkloadStore

NOW = 1_000


def submit(store: WorkloadStore, tenant: str, n: int, **fields: object) -> list[str]:
    grant = make_grant(tenant_id=tenant)
    return [
        store.create(
            make_request(
                idempotency_key=f"{tenant}-{i}", tenant_id=tenant,
                authorization_snapshot=SIGNER.sign(grant), **fields,
            )
        ).workload_id
        for i in range(n)
    ]  # fmt: skip


def tenants_of(store: WorkloadStore, claims) -> list[str]:
    return [work.workload.tenant_id for work in claims]


def test_a_small_tenant_is_served_in_turn_beside_a_large_backlog(store):
    submit(store, "big", 200, created_at=1)
    submit(store, "small", 3, created_at=500)
    scopes = [("big", "app"), ("small", "app")]

    first = [tenants_of(store, store.tenants.claim_many(scopes, "w", CAPABILITIES, 1, NOW))[0]
             for _ in range(6)]  # fmt: skip

    assert first.count("small") == 3 and first.count("big") == 3
    rest = store.tenants.claim_many(scopes, "w", CAPABILITIES, 10, NOW)
    assert tenants_of(store, rest) == ["big"] * 10  # small has none left: passed over


def test_weights_share_the_claims_in_proportion_spread_out(store):
    for tenant in ("a", "b", "c"):
        submit(store, tenant, 40)
    scopes = [("a", "app"), ("b", "app"), ("c", "app")]

    claims = store.tenants.claim_many(scopes, "w", CAPABILITIES, 30, NOW, weights=[3, 2, 1])

    assert Counter(tenants_of(store, claims)) == {"a": 15, "b": 10, "c": 5}
    order = tenants_of(store, claims)
    assert all(order[n : n + 6].count("c") == 1 for n in range(0, 30, 6))  # spread out


def test_each_claim_is_a_claim_of_its_own_application(store):
    ids = submit(store, "a", 1, capability_snapshot={"gpu"})
    submit(store, "b", 1)
    claims = store.tenants.claim_many([("a", "app"), ("b", "app")], "w", ["email:send"], 5, NOW)
    assert tenants_of(store, claims) == ["b"]  # a's work needs a capability it lacks
    assert store.get(ids[0]).current_claim is None


def test_bad_scopes_and_weights_are_refused(store):
    cases = [
        ([], "scopes"),
        ("t", "scopes"),
        ([("t",)], "scopes"),
        ([("t", "app"), ("t", "app")], "scopes"),
        ([("t", " ")], "application_id"),
    ]
    for scopes, field in cases:
        with pytest.raises(WorkloadError) as refused:
            store.tenants.claim_many(scopes, "w", CAPABILITIES, 1, NOW)
        assert refused.value.code == "WORKLOAD_INVALID" and field in refused.value.message
    for weights in ([0], [1, 2], [1001]):
        with pytest.raises(WorkloadError) as refused:
            store.tenants.claim_many([("t", "app")], "w", CAPABILITIES, 1, NOW, weights=weights)
        assert "weights" in refused.value.message


def test_capabilities_and_filters_given_once_serve_every_application(store):
    # Iterables read once (a generator): each application's claim holds the same ones.
    submit(store, "a", 2)
    submit(store, "b", 2)
    scopes = [("a", "app"), ("b", "app")]

    claims = store.tenants.claim_many(
        scopes, "w", (c for c in CAPABILITIES), 4, NOW, definitions=(d for d in ["send"])
    )

    assert Counter(tenants_of(store, claims)) == {"a": 2, "b": 2}


def test_weights_not_a_list_are_refused_naming_them(store):
    for weights in (5, iter([1])):
        with pytest.raises(WorkloadError) as refused:
            store.tenants.claim_many([("t", "app")], "w", CAPABILITIES, 1, NOW, weights=weights)
        assert refused.value.code == "WORKLOAD_INVALID" and "weights" in refused.value.message
