"""Typed views of the committed history (feltdb.work.events): what a failure report and a
deadline's timeout said, asked for as values, on work the store really moved."""

from __future__ import annotations

import msgspec
import pytest
from support.factories import CAPABILITIES, make_request

from feltdb import ApprovalPolicy, WorkloadState, WorkloadStore
from feltdb.work import events
from feltdb.work.events import AttemptFailed, DeadlinePassed


@pytest.fixture
def store(tmp_path):
    with WorkloadStore.open(tmp_path / "work.db") as opened:
        yield opened


def claimed(store, key="k", started=True, **overrides):
    workload = store.create(make_request(idempotency_key=key, created_at=10, **overrides))
    claim = store.claim(workload.workload_id, "w", CAPABILITIES, now=11, lease_ms=60_000)
    if started:
        store.start(workload.workload_id, claim.claim_id, "w", claim.fencing_token, now=11)
    return workload.workload_id, claim


def test_a_failure_report_reads_back_as_what_the_worker_said(store):
    workload_id, claim = claimed(store)
    store.fail(workload_id, claim.claim_id, "w", claim.fencing_token, "timeout", "slow", 12, "none")
    workload = store.get(workload_id)
    [failed] = list(events.failures(workload))
    attempt_id = workload.attempts[-1].attempt_id
    assert failed == AttemptFailed(failed.sequence, 12, attempt_id, "timeout", "none")
    assert events.last_effect(workload) == "none"
    assert list(events.deadlines_passed(workload)) == []


def test_the_last_effect_is_the_last_attempts_word_or_unknown_once_it_started(store):
    workload_id, claim = claimed(store, retry_policy={"max_attempts": 3, "initial_delay_ms": 0})
    store.fail(workload_id, claim.claim_id, "w", claim.fencing_token, "timeout", "x", 12, "none")
    again = store.claim(workload_id, "w", CAPABILITIES, now=13, lease_ms=1_000)
    assert events.last_effect(store.get(workload_id)) == "none"  # claimed, never started
    store.start(workload_id, again.claim_id, "w", again.fencing_token, now=13)
    assert store.recover_expired(now=20) == [workload_id]  # lost mid-attempt: it said nothing
    assert events.last_effect(store.get(workload_id)) == "unknown"
    fresh = store.create(make_request(idempotency_key="never", created_at=10))
    assert events.last_effect(fresh) is None


def test_a_deadline_reads_back_as_which_one_fell_when_and_whose_claim_it_ended(store):
    workload_id, claim = claimed(store, timeouts={"execution_ms": 2_000})
    assert store.enforce_deadlines(now=14) == [workload_id]
    [passed] = list(events.deadlines_passed(store.get(workload_id)))
    assert (passed.deadline, passed.deadline_at, passed.at) == ("execution", 13, 14)
    assert (passed.claim_id, passed.worker_id) == (claim.claim_id, "w")
    assert events.approval_expired(store.get(workload_id)) is None


def test_an_expired_approval_is_a_domain_query(store):
    request = make_request(idempotency_key="gated", created_at=10)
    request.approval = ApprovalPolicy()
    request.timeouts = msgspec.structs.replace(request.timeouts, approval_ms=2_000)
    workload = store.create(request)
    assert events.approval_expired(workload) is None
    assert store.enforce_deadlines(now=12) == [workload.workload_id]
    expired = events.approval_expired(store.get(workload.workload_id))
    assert isinstance(expired, DeadlinePassed)
    assert (expired.deadline, expired.deadline_at, expired.claim_id) == ("approval", 12, None)
    assert store.get(workload.workload_id).state is WorkloadState.DEAD_LETTER


def test_evidence_an_older_writer_left_malformed_is_no_event(store):
    workload_id, _ = claimed(store, timeouts={"execution_ms": 2_000})
    store.enforce_deadlines(now=14)
    workload = store.get(workload_id)
    timed_out = next(e for e in workload.execution_history if e.to is WorkloadState.TIMED_OUT)
    altered = msgspec.structs.replace(timed_out, evidence={"deadline": "execution"})
    assert events.deadline_passed(altered) is None
    garbled = msgspec.structs.replace(
        timed_out, evidence={"deadline": "execution", "deadline_at": "soon"}
    )
    assert events.deadline_passed(garbled) is None
    assert events.attempt_failed(timed_out) is None
