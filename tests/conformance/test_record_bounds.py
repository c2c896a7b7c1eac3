"""A workload's record has a bound (issue 24, point 3): checkpoints of large state, one
after another, once grew a record to 36 MiB, each commit slower than the last, and every
read of it with them. A change that would pass the bound is refused and changes nothing.
"""

from __future__ import annotations

import pytest
from support.factories import CAPABILITIES, make_request

from feltdb import WorkloadError, WorkloadState
from feltdb.fields import MAX_CHECKPOINTS, MAX_RECORD_BYTES
from feltdb.work import lifecycle


def _running(store):
    w = store.create(make_request())
    claim = store.claim(w.workload_id, "a", CAPABILITIES, now=11, lease_ms=600_000)
    store.start(w.workload_id, claim.claim_id, "a", claim.fencing_token, now=11)
    return w.workload_id, claim


def _checkpoint(store, workload_id, claim, state):
    return store.checkpoint(workload_id, claim.claim_id, "a", claim.fencing_token, state, now=12)


def test_checkpoints_that_would_pass_the_record_bound_are_refused(store):
    assert MAX_RECORD_BYTES == 8 * 1024 * 1024
    workload_id, claim = _running(store)
    state = {"blob": "x" * (1024 * 1024 - 64)}  # just under a document's 1 MiB
    saved = 0
    with pytest.raises(WorkloadError) as refused:
        for _ in range(20):
            _checkpoint(store, workload_id, claim, state)
            saved += 1
    assert 6 <= saved <= 8, saved
    error = refused.value
    assert error.code == "WORKLOAD_INVALID"
    assert "over the limit of 8,388,608" in error.message
    assert error.details == {"fields": ["record"], "max_record_bytes": MAX_RECORD_BYTES}
    kept = store.get(workload_id)
    assert len(kept.checkpoints) == saved, "the refused checkpoint changed nothing"
    assert kept.state is WorkloadState.CHECKPOINTED
    # The work goes on: a small checkpoint and the completion still fit.
    _checkpoint(store, workload_id, claim, {"at": "elsewhere"})
    store.complete(workload_id, claim.claim_id, "a", claim.fencing_token, "r", {}, [], 1, now=13)
    assert store.get(workload_id).state is WorkloadState.SUCCEEDED


def test_a_workload_keeps_at_most_its_bound_of_checkpoints(store, monkeypatch):
    assert MAX_CHECKPOINTS == 1000
    # The rule, at a size a test can reach in a moment.
    monkeypatch.setattr(lifecycle, "MAX_CHECKPOINTS", 3)
    workload_id, claim = _running(store)
    for step in range(3):
        _checkpoint(store, workload_id, claim, {"step": step})
    with pytest.raises(WorkloadError) as refused:
        _checkpoint(store, workload_id, claim, {"step": 3})
    assert refused.value.code == "WORKLOAD_INVALID"
    assert refused.value.message == "workload has 3 checkpoints, the most one keeps"
    assert refused.value.details == {"fields": ["checkpoints"], "max_checkpoints": 3}
    assert [c.state for c in store.get(workload_id).checkpoints] == [{"step": s} for s in range(3)]


def test_a_record_its_worker_filled_is_still_recovered_and_claimed(store):
    filled, claim = _running(store)
    # Filled to within a small checkpoint of the bound: big ones, then ever smaller ones.
    for size in (1024 * 1024 - 64, 64 * 1024, 4096, 256, 1):
        with pytest.raises(WorkloadError):
            for _ in range(200):
                _checkpoint(store, filled, claim, {"blob": "x" * size})
    other = store.create(make_request(idempotency_key="other"))
    held = store.claim(other.workload_id, "b", CAPABILITIES, now=11, lease_ms=1000)
    # Both leases run out; the authority's own changes have room past the bound.
    recovered = store.recover_expired(now=700)
    assert sorted(recovered) == sorted([filled, other.workload_id])
    assert store.get(held.workload_id).state is WorkloadState.READY
    again = store.claim_many("t", "app", "c", CAPABILITIES, 5, now=800)
    assert sorted(c.workload_id for c in again) == sorted([filled, other.workload_id])
