"""A claim made under a grant checks the grant where it commits.

A request's grant is verified when the request arrives; a long-poll may claim many seconds
later. So ``claim_work(..., under=grant)`` checks the grant's expiry and revocation again
before it looks and inside the transaction that claims: a grant revoked or expired
meanwhile claims nothing.
"""

from __future__ import annotations

from typing import Any

import pytest
from support.factories import CAPABILITIES, make_grant, make_request

from feltdb import Grant, Subject, WorkloadState
from feltdb.errors import WorkloadError
from feltdb.work.revocations import REVOKED_GRANTS_COLLECTION, revoked_grant_key


def _grant(expires_at: int = 9999) -> Grant:
    return make_grant(
        id="g-worker",
        subject=Subject.worker("w"),
        capabilities={"workload:claim", *CAPABILITIES},
        expires_at=expires_at,
    )


def _claim(store, grant: Grant, now: int = 11):
    return store.claim_work("t", "app", "worker:w", CAPABILITIES, 5, now, under=grant)


def test_a_grant_in_force_claims(store):
    w = store.create(make_request())
    [claimed] = _claim(store, _grant())
    assert claimed.workload.workload_id == w.workload_id


def test_an_expired_grant_claims_nothing(store):
    w = store.create(make_request())
    with pytest.raises(WorkloadError) as refused:
        _claim(store, _grant(expires_at=11), now=11)
    assert refused.value.code == "WORKLOAD_UNAUTHORIZED"
    assert refused.value.message == "grant has expired"
    assert store.get(w.workload_id).state is WorkloadState.READY


def test_a_revoked_grant_claims_nothing_even_with_no_work_to_claim(store):
    store.grants.revoke("g-worker", "human:security", 5, tenant_id="t", application_id="app")
    with pytest.raises(WorkloadError) as idle:
        _claim(store, _grant())
    assert idle.value.code == "WORKLOAD_UNAUTHORIZED"
    w = store.create(make_request())
    with pytest.raises(WorkloadError) as refused:
        _claim(store, _grant())
    assert refused.value.details == {"grant_id": "g-worker"}
    assert store.get(w.workload_id).state is WorkloadState.READY


class _RevokedJustAfterTheFirstLook:
    """The store's database, but the revocation of ``g-worker`` commits (through another
    store) just after the claim's first look at it found none: the race a long-poll runs.
    """

    def __init__(self, db: Any, other) -> None:
        self._db, self._other, self.raced = db, other, False

    def __getattr__(self, name: str) -> Any:
        return getattr(self._db, name)

    def get_row(self, collection: str, key: str):
        found = self._db.get_row(collection, key)
        if collection == REVOKED_GRANTS_COLLECTION and not self.raced:
            assert key == revoked_grant_key("t", "app", "g-worker")
            self.raced = True
            self._other.grants.revoke(
                "g-worker", "human:security", 5, tenant_id="t", application_id="app"
            )
        return found


def test_a_revocation_that_lands_after_the_first_look_is_seen_where_the_claim_commits(
    store, open_store
):
    w = store.create(make_request())
    racing = _RevokedJustAfterTheFirstLook(store.unit.db, open_store())
    store.unit.db = racing
    with pytest.raises(WorkloadError) as refused:
        _claim(store, _grant())
    assert racing.raced, "the first look read the revocations"
    assert refused.value.code == "WORKLOAD_UNAUTHORIZED"
    assert store.get(w.workload_id).state is WorkloadState.READY
    assert store.get(w.workload_id).fencing_token == 0
