"""claim_next: selection from the index, and the docs/api.md deviations from the reference."""

from __future__ import annotations

import msgspec
import pytest
from support.factories import CAPABILITIES, make_request
from support.pinned import commit_unchecked

from feltdb import (
    ApprovalPolicy,
    WorkloadDependency,
    WorkloadState,
    WorkloadStore,
    WorkloadTimeouts,
)
from feltdb.work.claim_loop import CANDIDATE_BATCH


@pytest.fixture
def store(new_target):
    """claim_next runs inside one selecting transaction, so it is checked on both backends."""
    with WorkloadStore.open(new_target()) as opened:
        yield opened


def test_pages_past_more_than_a_batch_of_candidates_the_worker_cannot_run(store):
    for n in range(CANDIDATE_BATCH * 2 + 3):
        store.create(
            make_request(idempotency_key=f"sms-{n}", priority=5, capability_snapshot={"sms:send"})
        )
    runnable = store.create(make_request(idempotency_key="email", priority=0))
    claim = store.claim_next("t", "app", "w", CAPABILITIES, now=11)
    assert claim is not None
    assert claim.workload_id == runnable.workload_id


def test_returns_none_when_nothing_matches_and_commits_nothing(store):
    store.create(make_request(capability_snapshot={"sms:send"}))
    revision = store.db.current_revision()
    assert store.claim_next("t", "app", "w", CAPABILITIES, now=11) is None
    assert store.db.current_revision() == revision


def test_a_candidate_past_its_deadline_is_timed_out_and_the_next_one_claimed(store):
    # docs/api.md: claim_next never fails because of one candidate.
    late = store.create(
        make_request(idempotency_key="late", priority=9, timeouts=WorkloadTimeouts(queue_ms=1000))
    )
    fine = store.create(make_request(idempotency_key="fine", priority=1))
    claim = store.claim_next("t", "app", "w", CAPABILITIES, now=50)
    assert claim is not None and claim.workload_id == fine.workload_id
    timed_out = store.get(late.workload_id)
    assert timed_out.state is WorkloadState.DEAD_LETTER
    assert timed_out.execution_history[-1].evidence["decision"] == "deadline_not_retryable"


def test_a_candidate_out_of_attempts_is_dead_lettered_and_the_next_one_claimed(store):
    spent = store.create(make_request(idempotency_key="spent", priority=9))
    legacy = msgspec.structs.replace(store.get(spent.workload_id), attempt_count=3)
    commit_unchecked(store, legacy)
    fine = store.create(make_request(idempotency_key="fine", priority=1))
    claim = store.claim_next("t", "app", "w", CAPABILITIES, now=11)
    assert claim is not None and claim.workload_id == fine.workload_id
    assert store.get(spent.workload_id).state is WorkloadState.DEAD_LETTER


def test_unsatisfied_dependencies_hold_work_back_until_they_succeed(store):
    parent = store.create(make_request(idempotency_key="parent", priority=0))
    child = store.create(
        make_request(
            idempotency_key="child",
            priority=9,
            dependencies=[WorkloadDependency(workload_id=parent.workload_id)],
        )
    )
    first = store.claim_next("t", "app", "w", CAPABILITIES, now=11)
    assert first is not None and first.workload_id == parent.workload_id
    assert store.claim_next("t", "app", "w", CAPABILITIES, now=11) is None
    store.start(parent.workload_id, first.claim_id, "w", first.fencing_token, now=12)
    store.complete(parent.workload_id, first.claim_id, "w", first.fencing_token, "r", {}, now=13)
    second = store.claim_next("t", "app", "w", CAPABILITIES, now=14)
    assert second is not None and second.workload_id == child.workload_id


def test_claims_in_priority_then_age_order_and_never_across_tenants(store):
    old = store.create(make_request(idempotency_key="old", priority=1, created_at=10))
    new = store.create(make_request(idempotency_key="new", priority=1, created_at=20))
    urgent = store.create(make_request(idempotency_key="urgent", priority=7, created_at=30))
    order = [store.claim_next("t", "app", "w", CAPABILITIES, now=40).workload_id for _ in range(3)]
    assert order == [urgent.workload_id, old.workload_id, new.workload_id]
    store.create(make_request(idempotency_key="mine", created_at=10))
    assert store.claim_next("other", "app", "w", CAPABILITIES, now=40) is None
    assert store.claim_next("t", "other", "w", CAPABILITIES, now=40) is None


def test_an_identical_replay_of_work_admitted_into_approval_is_accepted(store):
    # docs/api.md: the admitted not_before is read from the admission event, which work admitted
    # into AWAITING_APPROVAL has (the reference refused this replay).
    request = make_request(approval=ApprovalPolicy(), not_before=500)
    first, created = store.admit(request)
    assert created and first.state is WorkloadState.AWAITING_APPROVAL
    again, created = store.admit(make_request(approval=ApprovalPolicy(), not_before=500))
    assert not created
    assert again.workload_id == first.workload_id


def test_a_worker_of_one_definition_reads_only_its_work_behind_another_s_backlog(store):
    # The served definitions are index ranges of their own: a worker serving "b" is handed
    # only "b"'s candidates, however much higher-priority "a" work is ready ahead of it.
    backlog = CANDIDATE_BATCH * 4
    for n in range(backlog):
        store.create(make_request(idempotency_key=f"a-{n}", definition_id="a", priority=9))
    wanted = store.create(make_request(idempotency_key="b", definition_id="b", priority=0))
    handed: list[list[str]] = []
    select = store.db.commit_selected_many

    def counting(*args, **kwargs):
        choose = args[5]

        def watched(rows, read):
            handed.append([row.document["definition_id"] for row in rows])
            return choose(rows, read)

        return select(*args[:5], watched, *args[6:], **kwargs)

    store.db.commit_selected_many = counting
    try:
        claim = store.claim_next("t", "app", "w", CAPABILITIES, now=11, definitions=["b"])
    finally:
        del store.db.commit_selected_many
    assert claim is not None and claim.workload_id == wanted.workload_id
    assert handed == [["b"]]  # one selection, of one candidate: no "a" row was examined
    assert store.claim_next("t", "app", "w", CAPABILITIES, now=11, definitions=["b"]) is None
    first = store.claim_next("t", "app", "w", CAPABILITIES, now=11, definitions=["a", "b"])
    assert first is not None and store.get(first.workload_id).definition_id == "a"
    assert store.claim_next("t", "app", "w", CAPABILITIES, now=11, definitions=[]) is None
