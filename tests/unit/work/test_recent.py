"""The workloads a unit of work committed last: recalled unread, bounded, never trusted
without the commit's guard.
"""

from __future__ import annotations

import msgspec
import pytest
from support.factories import CAPABILITIES, make_request

from feltdb import ApprovalPolicy, Subject, WorkloadStore
from feltdb.work.admission import new_workload
from feltdb.work.recent import MAX_BYTES, MAX_ENTRIES, MAX_ENTRY_BYTES, RecentCommits


def workload(n: int):
    return new_workload(make_request(idempotency_key=f"k{n}"), f"wl-{n}")


def test_a_remembered_workload_is_recalled_at_the_version_its_commit_wrote():
    recent = RecentCommits()
    w = workload(1)
    recent.remember(w, 3, 100)
    hit = recent.recall("wl-1")
    assert hit is not None and hit.workload is w and hit.version == 3
    assert hit.state is w.state and hit.sequence == w.execution_history[-1].sequence
    assert recent.recall("wl-2") is None
    assert recent.recall(["not", "a", "key"]) is None  # any value asked: never an error


def test_the_least_recently_used_leave_first_when_there_are_too_many():
    recent = RecentCommits(max_entries=3)
    for n in range(3):
        recent.remember(workload(n), 1, 10)
    assert recent.recall("wl-0") is not None  # used: now the most recent
    recent.remember(workload(3), 1, 10)
    assert [recent.recall(f"wl-{n}") is not None for n in range(4)] == [True, False, True, True]
    assert len(recent) == 3 and recent.bytes == 30


def test_the_stored_text_remembered_is_bounded_and_a_long_one_is_not_kept():
    recent = RecentCommits(max_bytes=250, max_entry_bytes=200)
    recent.remember(workload(0), 1, 100)
    recent.remember(workload(1), 1, 100)
    recent.remember(workload(2), 1, 100)  # 300 > 250: the oldest leaves
    assert recent.recall("wl-0") is None and recent.bytes == 200
    recent.remember(workload(1), 2, 201)  # too long: forgotten, not kept stale
    assert recent.recall("wl-1") is None and recent.bytes == 100
    recent.forget(["wl-2", "wl-9"])
    assert len(recent) == 0 and recent.bytes == 0


def test_the_documented_bounds():
    assert (MAX_ENTRIES, MAX_BYTES, MAX_ENTRY_BYTES) == (4096, 64 * 1024 * 1024, 256 * 1024)


@pytest.fixture
def two_stores(tmp_path):
    path = tmp_path / "w.db"
    mine, theirs = WorkloadStore.open(path), WorkloadStore.open(path)
    try:
        yield mine, theirs
    finally:
        mine.close()
        theirs.close()


def test_a_refusal_on_a_recalled_workload_is_decided_again_on_a_fresh_read(two_stores):
    mine, theirs = two_stores
    w, _ = mine.admit(make_request(approval=ApprovalPolicy()))
    assert mine.unit.recent.recall(w.workload_id) is not None  # recalled: AWAITING_APPROVAL
    theirs.decide(w.workload_id, Subject.human("h"), "approved", None, "g", w.input_hash, now=11)
    claim = mine.claim(w.workload_id, "worker:w", CAPABILITIES, now=12)
    assert claim.fencing_token == 1, "claimed on the approval the other store committed"


def test_a_decision_on_a_recalled_workload_that_lost_its_guard_is_decided_again(two_stores):
    mine, theirs = two_stores
    w, _ = mine.admit(make_request())
    claim = mine.claim(w.workload_id, "worker:w", CAPABILITIES, now=11, lease_ms=60_000)
    theirs.cancel(w.workload_id, "human:op", now=12)  # mine still recalls it CLAIMED
    renewed = mine.heartbeat(w.workload_id, claim.claim_id, "worker:w", claim.fencing_token,
                             now=13, extend_ms=60_000)  # fmt: skip
    assert renewed.expires_at == 73
    committed = mine.get(w.workload_id)
    assert committed.state.value == "CANCELLATION_REQUESTED"
    assert committed.current_claim == renewed
    assert mine.unit.recent.recall(w.workload_id).workload == committed


def test_a_recalled_workload_out_of_the_caller_s_scope_is_not_found(two_stores):
    from feltdb.auth.scope import Scope

    mine, _ = two_stores
    w, _ = mine.admit(make_request())
    elsewhere = Scope(tenant_id="other", application_id="app")
    with pytest.raises(Exception) as refused:
        mine.claim(w.workload_id, "worker:w", CAPABILITIES, now=11, scope=elsewhere)
    assert refused.value.code == "WORKLOAD_NOT_FOUND"
    assert msgspec.structs.replace(w) == mine.get(w.workload_id)
