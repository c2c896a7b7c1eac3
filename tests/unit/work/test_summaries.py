"""A list's summaries (issue 24, point 2): what each tells of its workload, the same as
the workload's own record, and never its input, checkpoints, result or history."""

from __future__ import annotations

import json

import msgspec
import pytest
from support.factories import CAPABILITIES, make_request

from feltdb import (
    ApprovalPolicy,
    WorkloadRetryPolicy,
    WorkloadState,
    WorkloadStore,
    WorkloadTimeouts,
)
from feltdb.records.codec import stored_workload_text
from feltdb.records.summary import INPUT_PREVIEW_CHARS, WorkloadSummary
from feltdb.work.summaries import summary_of

S = WorkloadState
WORKER = "worker:w"


@pytest.fixture
def store(tmp_path):
    with WorkloadStore.open(tmp_path / "w.db") as opened:
        yield opened


def listed(store: WorkloadStore, workload_id: str) -> WorkloadSummary:
    """The workload's summary as the store's list pages it."""
    page, _ = store.page("t", "app", limit=500)
    (found,) = [s for s in page if s.workload_id == workload_id]
    assert found == summary_of(store.get(workload_id)), "a page summarizes the committed record"
    return found


def test_work_awaiting_approval_tells_its_deadline_and_policy(store):
    policy = ApprovalPolicy(approver_kinds={"human"})
    gated = store.create(
        make_request(approval=policy, timeouts=WorkloadTimeouts(approval_ms=60_000), created_at=10)
    )
    summary = listed(store, gated.workload_id)
    assert summary.state is S.AWAITING_APPROVAL
    assert summary.approval_deadline == 70
    assert summary.approval is not None and summary.approval.policy == policy
    assert summary.input_preview == '{"id":1}' and summary.input_chars == len('{"id":1}')
    assert summary.input_hash == gated.input_hash
    assert summary.last_event == gated.execution_history[-1]
    assert summary.worker_id is None and summary.last_effect is None


def test_claimed_work_names_its_holder_and_lease(store):
    work = store.create(make_request())
    claim = store.claim(work.workload_id, WORKER, CAPABILITIES, now=20, lease_ms=30_000)
    summary = listed(store, work.workload_id)
    assert (summary.worker_id, summary.lease_expires_at) == (WORKER, claim.expires_at)
    assert summary.state is S.CLAIMED and summary.attempt_count == 1
    assert summary.approval is None and summary.approval_deadline is None


def test_a_dead_letter_tells_why_and_what_its_last_attempt_did(store):
    work = store.create(make_request(retry_policy=WorkloadRetryPolicy(max_attempts=1)))
    wid = work.workload_id
    claim = store.claim(wid, WORKER, CAPABILITIES, now=20)
    store.start(wid, claim.claim_id, WORKER, claim.fencing_token, now=21)
    store.checkpoint(wid, claim.claim_id, WORKER, claim.fencing_token, {"step": 1}, now=22)
    store.fail(wid, claim.claim_id, WORKER, claim.fencing_token, "permanent", "bad", now=23,
               effect="none")  # fmt: skip
    summary = listed(store, wid)
    committed = store.get(wid)
    assert summary.state is committed.state
    assert summary.last_failure == committed.last_failure == "permanent: bad"
    assert summary.last_effect == "none"
    assert (summary.checkpoint_count, summary.attempt_count, summary.max_attempts) == (1, 1, 1)
    assert summary.last_event == committed.execution_history[-1]
    assert summary.result_id is None


def test_a_summary_holds_the_start_of_a_large_input_and_never_more(store):
    wide = {f"key{i:05d}": "v" * 20 for i in range(5_000)}
    work = store.create(make_request(input=wide))
    summary = listed(store, work.workload_id)
    whole = json.dumps(wide, sort_keys=True, separators=(",", ":"))
    assert summary.input_chars == len(whole)
    assert summary.input_preview == whole[:INPUT_PREVIEW_CHARS]
    fields = {f.encode_name for f in msgspec.structs.fields(WorkloadSummary)}
    assert not fields & {"input", "checkpoints", "execution_history", "result", "attempts"}
    # No larger than the stored record it summarizes: a page's size bound holds for it.
    encoded = msgspec.json.encode(summary)
    assert len(encoded) < 2_000 < len(stored_workload_text(store.get(work.workload_id)))
