"""Numbers the authority derives stay storable, though records are not validated again on
assignment: ``now`` is bounded where it enters, and a counter at its bound is refused at
the commit, with nothing written. Both backends.
"""

from __future__ import annotations

import msgspec
import pytest
from support.factories import CAPABILITIES, make_request
from support.pinned import commit_unchecked

from feltdb import WorkloadError, WorkloadState, WorkloadStore
from feltdb.fields import MAX_NOW, MAX_SAFE_INTEGER


@pytest.fixture
def store(new_target):
    with WorkloadStore.open(new_target(), max_lease_ms=MAX_SAFE_INTEGER) as opened:
        yield opened


def test_a_now_past_its_bound_is_refused_naming_it(store):
    created = store.create(make_request())
    revision = store.db.current_revision()
    with pytest.raises(WorkloadError) as refused:
        store.claim_next("t", "app", "w", CAPABILITIES, now=MAX_NOW + 1)
    assert refused.value.code == "WORKLOAD_INVALID"
    assert "now" in refused.value.message
    assert store.db.current_revision() == revision
    assert store.get(created.workload_id).state is WorkloadState.READY


def test_the_longest_lease_at_the_latest_now_is_stored_and_read_back(store):
    created = store.create(make_request())
    claim = store.claim(created.workload_id, "w", CAPABILITIES, now=MAX_NOW - 70, lease_ms=10**7)
    fence = (created.workload_id, claim.claim_id, "w", claim.fencing_token)
    store.start(*fence, now=MAX_NOW - 60)
    store.heartbeat(*fence, now=MAX_NOW, extend_ms=MAX_SAFE_INTEGER)
    held = store.get(created.workload_id).current_claim
    assert held is not None and held.expires_at == MAX_NOW + MAX_SAFE_INTEGER // 1000
    assert held.expires_at <= MAX_SAFE_INTEGER


def test_a_fencing_token_at_its_bound_is_refused_at_the_commit(store):
    created = store.create(make_request())
    spent = msgspec.structs.replace(store.get(created.workload_id), fencing_token=MAX_SAFE_INTEGER)
    commit_unchecked(store, spent)
    revision = store.db.current_revision()
    with pytest.raises(WorkloadError) as refused:
        store.claim(created.workload_id, "w", CAPABILITIES, now=11)
    assert refused.value.code == "WORKLOAD_INVALID"
    assert refused.value.details["fields"] == ["fencing_token"]
    assert store.db.current_revision() == revision
    assert store.get(created.workload_id).fencing_token == MAX_SAFE_INTEGER
