"""Rate limits: work naming a rate limit starts at most N times a period per key, whichever
way it is claimed; a claim at the limit takes other work and says when the next start is
allowed.
"""

from __future__ import annotations

import pytest
from support.factories import CAPABILITIES, SIGNER, make_grant, make_request

from feltdb import ResourceScope, ResourceScopeKind, WorkloadError, WorkloadStore
from feltdb.records.workload import WorkloadClaim
from feltdb.work.rate_limits import WINDOWS_COLLECTION

NOW = 1_000


def rated(store: WorkloadStore, key: str, *, rate_key: str | None = None, **fields: object) -> str:
    request = make_request(idempotency_key=key, rate_limit="smtp", rate_key=rate_key, **fields)
    return store.create(request).workload_id


def plain(store: WorkloadStore, key: str, **fields: object) -> str:
    return store.create(make_request(idempotency_key=key, **fields)).workload_id


def claim_next(store: WorkloadStore, now: int = NOW) -> WorkloadClaim | None:
    return store.claim_next("t", "app", "w", CAPABILITIES, now=now)


def set_smtp(store: WorkloadStore, starts: int, period_s: int) -> None:
    store.limits.set_rate_limit("t", "app", "smtp", (starts, period_s), actor="ops", now=NOW)


def test_starts_within_a_period_never_pass_the_limit_and_claims_take_other_work(store):
    set_smtp(store, 2, 10)
    limited = [rated(store, f"r{n}", priority=10) for n in range(5)]
    other = plain(store, "other", priority=0)

    taken = [claim_next(store) for _ in range(3)]
    ids = [claim.workload_id for claim in taken if claim is not None]
    assert set(ids[:2]) <= set(limited) and ids[2] == other  # two starts, then other work

    found = store.claim_work("t", "app", "w", CAPABILITIES, 1, NOW + 3)
    assert list(found) == [] and found.next_start_s == 7  # the window opens at 1,010
    assert claim_next(store, NOW + 9) is None
    # A claim counts as a start, whatever its attempt becomes: finishing frees nothing.
    first = taken[0]
    assert first is not None
    store.start(first.workload_id, first.claim_id, "w", first.fencing_token, now=NOW)
    store.complete(first.workload_id, first.claim_id, "w", first.fencing_token, "r", {}, now=NOW)
    assert claim_next(store, NOW + 9) is None
    later = store.claim_many("t", "app", "w", CAPABILITIES, 10, NOW + 10)
    assert len(later) == 2 and {claim.workload_id for claim in later} <= set(limited) - set(ids)


def test_each_key_has_a_window_of_its_own(store):
    set_smtp(store, 1, 60)
    ids = {key: [rated(store, f"{key}{n}", rate_key=key) for n in range(2)] for key in "ab"}
    unkeyed = rated(store, "none")

    claims = store.claim_many("t", "app", "w", CAPABILITIES, 10, NOW)

    claimed = {claim.workload_id for claim in claims}
    assert len(claims) == 3 and unkeyed in claimed
    assert all(len(claimed & set(ids[key])) == 1 for key in "ab")


def test_claim_many_takes_the_limit_across_transactions(store):
    set_smtp(store, 3, 5)
    limited = [rated(store, f"r{n}") for n in range(6)]

    claims = store.claim_many("t", "app", "w", CAPABILITIES, 6, NOW)

    # One start of a window per transaction: the claim goes on in the next until the
    # limit, then stops (nothing else is claimable).
    assert len(claims) == 3 and {claim.workload_id for claim in claims} <= set(limited)
    window = store.db.list_rows(WINDOWS_COLLECTION, tenant_id="t", application_id="app")
    assert [row.document["starts"] for row in window] == [[[NOW, 3]]]


def test_a_claim_by_id_at_the_limit_is_refused_with_the_instant_it_may_start(store):
    set_smtp(store, 1, 30)
    first, second = rated(store, "r1"), rated(store, "r2")
    store.claim(first, "w", CAPABILITIES, now=NOW)

    with pytest.raises(WorkloadError) as refused:
        store.claim(second, "w", CAPABILITIES, now=NOW + 5)

    assert refused.value.code == "WORKLOAD_NOT_YET_ELIGIBLE"
    assert "rate limit 'smtp'" in refused.value.message
    assert refused.value.details == {"eligible_at": NOW + 30, "rate_limit": "smtp"}
    assert store.get(second).current_claim is None  # the refusal changed nothing
    assert store.claim(second, "w", CAPABILITIES, now=NOW + 30).workload_id == second


def test_work_naming_a_limit_not_set_runs_unlimited_and_a_removed_limit_frees_it(store):
    limited = [rated(store, f"r{n}") for n in range(3)]
    assert claim_next(store) is not None  # no limit named smtp: unlimited
    set_smtp(store, 1, 100)
    assert claim_next(store) is not None  # the window had no start: one now
    assert claim_next(store) is None
    store.limits.set_rate_limit("t", "app", "smtp", None, actor="ops", now=NOW)
    last = claim_next(store)
    assert last is not None and last.workload_id in limited


def test_a_raised_limit_applies_to_the_next_claim(store):
    set_smtp(store, 1, 100)
    limited = [rated(store, f"r{n}") for n in range(3)]
    first = claim_next(store)
    assert first is not None
    assert claim_next(store) is None  # remembered as held: checked again before reading
    set_smtp(store, 3, 100)
    rest = {c.workload_id for c in store.claim_many("t", "app", "w", CAPABILITIES, 5, NOW)}
    assert rest == set(limited) - {first.workload_id}


def test_the_limits_are_listed_and_bad_limits_refused_changing_nothing(store):
    set_smtp(store, 5, 60)
    store.limits.set_rate_limit("t", "app", "api", (100, 1), actor="ops", now=NOW)
    listed = store.limits.rate_limits("t", "app").limits
    assert [(limit.name, limit.starts, limit.period_s) for limit in listed] == [
        ("api", 100, 1),
        ("smtp", 5, 60),
    ]
    assert store.limits.rate_limits("t", "other").limits == []
    for bad, field in (((0, 1), "starts"), ((1001, 1), "starts"), ((1, 86_401), "period_s")):
        with pytest.raises(WorkloadError) as refused:
            store.limits.set_rate_limit("t", "app", "smtp", bad, actor="ops")
        assert refused.value.code == "WORKLOAD_INVALID" and field in refused.value.message
    assert store.limits.rate_limits("t", "app").limits == listed


def test_requests_name_a_limit_for_a_key_and_neither_blank(store):
    for fields, named in (
        ({"rate_key": "a"}, "rate_limit"),
        ({"rate_limit": " "}, "rate_limit"),
        ({"rate_limit": "smtp", "rate_key": ""}, "rate_key"),
    ):
        with pytest.raises(WorkloadError) as refused:
            store.create(make_request(idempotency_key="bad", **fields))
        assert refused.value.code == "WORKLOAD_INVALID" and named in refused.value.message
    workload = store.get(rated(store, "ok", rate_key="customer-1"))
    assert (workload.rate_limit, workload.rate_key) == ("smtp", "customer-1")
    # A replay naming another limit is another request.
    with pytest.raises(WorkloadError) as reused:
        store.create(make_request(idempotency_key="ok", rate_limit="api", rate_key="customer-1"))
    assert reused.value.code == "IDEMPOTENCY_KEY_REUSED" and "rate_limit" in reused.value.message


def test_windows_from_another_application_or_tenant_do_not_count(store):
    set_smtp(store, 1, 60)
    store.limits.set_rate_limit("t", "app2", "smtp", (1, 60), actor="ops", now=NOW)
    here = rated(store, "here")
    grant = make_grant(
        application_id="app2",
        resources=[ResourceScope(kind=ResourceScopeKind.WORKLOAD, uri="flow://app2/workloads/*")],
    )
    request = make_request(
        idempotency_key="there",
        application_id="app2",
        rate_limit="smtp",
        authorization_snapshot=SIGNER.sign(grant),
    )
    there = store.create(request).workload_id
    assert claim_next(store) is not None
    claimed = store.claim_next("t", "app2", "w", CAPABILITIES, now=NOW)
    assert claimed is not None and claimed.workload_id == there
    assert store.get(here).current_claim is not None
