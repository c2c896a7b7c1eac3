"""The workloads a unit of work committed last: recalled unread, bounded, never trusted
without the commit's guard.
"""

from __future__ import annotations

import pytest
from support.factories import CAPABILITIES, make_request

from feltdb import ApprovalPolicy, Subject, WorkloadStore
from feltdb.records.codec import stored_document
from feltdb.work.admission import new_workload
from feltdb.work.recent import MAX_BYTES, MAX_ENTRIES, MAX_ENTRY_BYTES, RecentCommits


def workload(n: int):
    return new_workload(make_request(idempotency_key=f"k{n}"), f"wl-{n}")


def text_of(w, pad: int = 0) -> str:
    """``w``'s stored text, padded with spaces to ``pad`` characters (JSON all the same)."""
    return stored_document(w)[1].ljust(pad)


def test_a_remembered_workload_is_recalled_at_the_version_its_commit_wrote():
    recent = RecentCommits()
    w = workload(1)
    recent.remember("wl-1", text_of(w), 3)
    hit = recent.recall("wl-1")
    assert hit is not None and hit.workload == w and hit.version == 3
    assert hit.state is w.state and hit.sequence == w.execution_history[-1].sequence
    again = recent.recall("wl-1")
    assert again is not None and again.workload.input is not hit.workload.input, "decoded anew"
    assert recent.recall("wl-2") is None
    assert recent.recall(["not", "a", "key"]) is None  # any value asked: never an error


def test_the_least_recently_used_leave_first_when_there_are_too_many():
    recent = RecentCommits(max_entries=3)
    for n in range(3):
        recent.remember(f"wl-{n}", text_of(workload(n), 2000), 1)
    assert recent.recall("wl-0") is not None  # used: now the most recent
    recent.remember("wl-3", text_of(workload(3), 2000), 1)
    assert [recent.recall(f"wl-{n}") is not None for n in range(4)] == [True, False, True, True]
    assert len(recent) == 3 and recent.bytes == 6000


def test_the_stored_text_remembered_is_bounded_and_a_long_one_is_not_kept():
    recent = RecentCommits(max_bytes=5000, max_entry_bytes=2500)
    for n in range(3):
        recent.remember(f"wl-{n}", text_of(workload(n), 2000), 1)  # 6000 > 5000
    assert recent.recall("wl-0") is None and recent.bytes == 4000
    recent.remember("wl-1", text_of(workload(1), 2501), 2)  # too long: forgotten, not kept
    assert recent.recall("wl-1") is None and recent.bytes == 2000
    recent.forget(["wl-2", "wl-9"])
    assert len(recent) == 0 and recent.bytes == 0


def test_the_bounds_are_the_ones_the_architecture_documents():
    from pathlib import Path

    documented = Path(__file__).parents[3].joinpath("docs", "architecture.md").read_text()
    stated = f"at most {MAX_ENTRIES:,}, {MAX_BYTES // 2**20} MiB in all, none over"
    assert stated in " ".join(documented.split())
    assert f"none over {MAX_ENTRY_BYTES // 2**10} KiB" in " ".join(documented.split())


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
    assert mine.get(w.workload_id) == w, "nothing claimed"


def test_a_claim_s_heartbeat_and_completion_decide_on_what_it_committed_unread(tmp_path):
    from feltdb.storage.sqlite import SQLiteDatabase

    reads: list[str] = []

    class CountedReads(SQLiteDatabase):
        def get_row(self, collection: str, key: str):  # type: ignore[no-untyped-def]
            reads.append(key)
            return super().get_row(collection, key)

    store = WorkloadStore(CountedReads(tmp_path / "w.db"))
    try:
        w, _ = store.admit(make_request())
        reads.clear()  # the admission asked whether its id was taken
        claim = store.claim(w.workload_id, "worker:w", CAPABILITIES, now=11, lease_ms=60_000)
        fence = (claim.claim_id, "worker:w", claim.fencing_token)
        store.start(w.workload_id, *fence, now=12)
        store.heartbeat(w.workload_id, *fence, now=13, extend_ms=60_000)
        store.checkpoint(w.workload_id, *fence, {"n": 1}, now=14)
        store.complete(w.workload_id, *fence, "r1", {"ok": True}, now=15)
        assert reads == [], "no workload read again after its admission"
        assert store.get(w.workload_id).state.value == "SUCCEEDED"
        assert store.unit.recent.recall(w.workload_id) is None, "finished: not kept"
    finally:
        store.close()


def test_what_a_caller_holds_of_committed_work_never_reaches_a_later_commit(tmp_path):
    # A handler may change its input, or checkpoint one dict twice, changing it between:
    # what was committed stays as it was committed.
    with WorkloadStore.open(tmp_path / "w.db") as store:
        w, _ = store.admit(make_request(input={"id": 1}))
        w.input["id"] = 999  # the caller's own copy
        [work] = store.claim_work("t", "app", "worker:w", CAPABILITIES, 1, now=11, start=True)
        work.workload.input["id"] = 998
        work.workload.execution_history.clear()
        fence = (work.claim.claim_id, "worker:w", work.claim.fencing_token)
        progress = {"done": 1}
        store.checkpoint(w.workload_id, *fence, progress, now=12)
        progress["done"] = 2
        store.checkpoint(w.workload_id, *fence, progress, now=13)
        committed = store.get(w.workload_id)
    assert committed.input == {"id": 1}
    assert [c.state for c in committed.checkpoints] == [{"done": 1}, {"done": 2}]
    assert [e.to.value for e in committed.execution_history] == [
        "READY", "CLAIMED", "RUNNING", "CHECKPOINTED"
    ]  # fmt: skip
