"""Work whose dependency ended otherwise does not wait forever.

A dependency that rests (succeeded, cancelled, rejected or dead-lettered) in a state other
than the one its dependent awaits will not reach it unless an operator re-arms it. The
dependent is then dead-lettered, by the claim that finds it (by id or by the scheduler),
with evidence naming the dependency, the state it ended in and the one awaited; until
then it waits, as READY work whose summary says what for.
"""

from __future__ import annotations

import pytest
from support.factories import CAPABILITIES, make_request

from feltdb import (
    ApprovalOutcome,
    ApprovalPolicy,
    Subject,
    WorkloadDependency,
    WorkloadError,
    WorkloadRetryPolicy,
    WorkloadState,
)
from feltdb.auth.scope import Scope
from feltdb.work.explanations import ended_because

LEASE = 10_000


def _after(store, key, *dependencies, required=WorkloadState.SUCCEEDED, **fields):
    waits = [
        WorkloadDependency(workload_id=d.workload_id, required_state=required) for d in dependencies
    ]
    return store.create(make_request(idempotency_key=key, dependencies=waits, **fields))


def _dead_letter(store, workload, now):
    """Run ``workload`` once and fail it for good (its policy allows one attempt)."""
    held = store.claim(workload.workload_id, "w", CAPABILITIES, now=now, lease_ms=LEASE)
    store.start(workload.workload_id, held.claim_id, "w", held.fencing_token, now=now)
    state = store.fail(
        workload.workload_id, held.claim_id, "w", held.fencing_token, "permanent", "no", now=now
    )
    assert state is WorkloadState.DEAD_LETTER


def _once():
    return WorkloadRetryPolicy(max_attempts=1)


def test_the_scheduler_dead_letters_work_whose_dependency_was_dead_lettered(store):
    charge = store.create(make_request(idempotency_key="charge", retry_policy=_once()))
    receipt = _after(store, "receipt", charge)
    _dead_letter(store, charge, now=10)

    assert store.claim_next("t", "app", "w", CAPABILITIES, now=11) is None
    ended = store.get(receipt.workload_id)
    assert ended.state is WorkloadState.DEAD_LETTER
    last = ended.execution_history[-1]
    assert last.evidence == {
        "decision": "dependency_unmet",
        "dependency": charge.workload_id,
        "dependency_state": "DEAD_LETTER",
        "awaited_state": "SUCCEEDED",
    }
    assert ended_because(ended) == (
        f"not run: its dependency {charge.workload_id} ended DEAD_LETTER, not SUCCEEDED"
        " (at 1970-01-01 00:00:11 UTC)"
    )


def test_work_set_aside_on_a_running_dependency_is_ended_when_that_dependency_fails(store):
    charge = store.create(make_request(idempotency_key="charge", retry_policy=_once()))
    receipt = _after(store, "receipt", charge, priority=9)
    held = store.claim(charge.workload_id, "w", CAPABILITIES, now=10, lease_ms=LEASE)
    store.start(charge.workload_id, held.claim_id, "w", held.fencing_token, now=10)
    # The scheduler finds the receipt waiting on a running charge: it sets it aside.
    assert store.claim_next("t", "app", "w", CAPABILITIES, now=11) is None
    assert store.get(receipt.workload_id).state is WorkloadState.READY
    store.fail(
        charge.workload_id, held.claim_id, "w", held.fencing_token, "permanent", "no", now=12
    )
    # The charge's dead-lettering released it: the next search reads it again, and ends it.
    assert store.claim_next("t", "app", "w", CAPABILITIES, now=13) is None
    assert store.get(receipt.workload_id).state is WorkloadState.DEAD_LETTER


def test_a_claim_by_id_of_work_whose_dependency_was_rejected_ends_it_and_says_why(store):
    gate = store.create(make_request(idempotency_key="gate", approval=ApprovalPolicy()))
    deploy = _after(store, "deploy", gate)
    store.decide(
        gate.workload_id,
        Subject.human("ada"),
        ApprovalOutcome.REJECTED,
        "not today",
        "g",
        gate.input_hash,
        now=12,
    )
    with pytest.raises(WorkloadError) as refused:
        store.claim(deploy.workload_id, "w", CAPABILITIES, now=13, lease_ms=LEASE)
    assert refused.value.code == "WORKLOAD_NOT_READY"
    assert f"its dependency {gate.workload_id} ended REJECTED, not SUCCEEDED" in (
        refused.value.message
    )
    assert refused.value.details == {"dependency": gate.workload_id, "state": "REJECTED"}
    assert store.get(deploy.workload_id).state is WorkloadState.DEAD_LETTER
    # The refusal was committed: asking again is refused by state, not decided again.
    with pytest.raises(WorkloadError) as again:
        store.claim(deploy.workload_id, "w", CAPABILITIES, now=14, lease_ms=LEASE)
    assert again.value.code == "WORKLOAD_NOT_READY"
    assert len(store.get(deploy.workload_id).execution_history) == 2


def test_work_awaiting_a_cancellation_ends_when_its_dependency_succeeds(store):
    job = store.create(make_request(idempotency_key="job"))
    cleanup = _after(store, "cleanup", job, required=WorkloadState.CANCELLED, priority=-1)
    held = store.claim(job.workload_id, "w", CAPABILITIES, now=10, lease_ms=LEASE)
    store.start(job.workload_id, held.claim_id, "w", held.fencing_token, now=10)
    store.complete(job.workload_id, held.claim_id, "w", held.fencing_token, "r", {}, [], 1, now=11)
    assert store.claim_next("t", "app", "w", CAPABILITIES, now=12) is None
    ended = store.get(cleanup.workload_id)
    assert ended.state is WorkloadState.DEAD_LETTER
    assert ended.execution_history[-1].evidence["dependency_state"] == "SUCCEEDED"


def test_an_ending_travels_down_a_chain_one_search_at_a_time(store):
    first = store.create(make_request(idempotency_key="first", retry_policy=_once()))
    second = _after(store, "second", first)
    third = _after(store, "third", second)
    store.cancel(first.workload_id, "human:ada", now=10)

    assert store.claim_many("t", "app", "w", CAPABILITIES, 10, now=11) == []
    states = {
        w.idempotency_key: w.state
        for w in (store.get(x.workload_id) for x in (first, second, third))
    }
    # The second ended; the third, read before it in the same search, waits on it, and
    # the second's ending released it for the next search.
    assert states["first"] is WorkloadState.CANCELLED
    assert states["second"] is WorkloadState.DEAD_LETTER
    assert store.claim_many("t", "app", "w", CAPABILITIES, 10, now=12) == []
    assert store.get(third.workload_id).state is WorkloadState.DEAD_LETTER
    assert store.get(third.workload_id).execution_history[-1].evidence["dependency"] == (
        second.workload_id
    )


def test_a_dependency_met_and_one_ended_end_the_work(store):
    done = store.create(make_request(idempotency_key="done"))
    gone = store.create(make_request(idempotency_key="gone"))
    held = store.claim(done.workload_id, "w", CAPABILITIES, now=10, lease_ms=LEASE)
    store.start(done.workload_id, held.claim_id, "w", held.fencing_token, now=10)
    store.complete(done.workload_id, held.claim_id, "w", held.fencing_token, "r", {}, [], 1, now=10)
    store.cancel(gone.workload_id, "human:ada", now=10)
    both = _after(store, "both", done, gone)
    assert store.claim_next("t", "app", "w", CAPABILITIES, now=11) is None
    ended = store.get(both.workload_id)
    assert ended.state is WorkloadState.DEAD_LETTER
    assert ended.execution_history[-1].evidence["dependency"] == gone.workload_id


def test_retrying_the_dependency_re_arms_what_its_ending_ended_down_the_chain(store):
    first = store.create(make_request(idempotency_key="first", retry_policy=_once()))
    second = _after(store, "second", first)
    third = _after(store, "third", second)
    unrelated = store.create(make_request(idempotency_key="other", retry_policy=_once()))
    _dead_letter(store, first, now=10)
    _dead_letter(store, unrelated, now=10)
    for now in (11, 12):  # one search ends the second, the next the third
        assert store.claim_many("t", "app", "w", CAPABILITIES, 10, now=now) == []
    assert store.get(third.workload_id).state is WorkloadState.DEAD_LETTER

    store.retry(first.workload_id, "human:ops", now=20, reason="the card was fixed")
    for dependent, through in ((second, first), (third, second)):
        again = store.get(dependent.workload_id)
        assert again.state is WorkloadState.READY
        assert again.retry_count == 0, "a re-arm spends none of its retries"
        last = again.execution_history[-1]
        assert (last.actor, last.at) == ("human:ops", 20)
        assert last.evidence == {
            "decision": "dependency_rearmed",
            "dependency": through.workload_id,
        }
    assert store.get(unrelated.workload_id).state is WorkloadState.DEAD_LETTER
    # They wait for the retried work again, and run once it succeeds.
    claimed = store.claim_many("t", "app", "w", CAPABILITIES, 10, now=21)
    assert [c.workload_id for c in claimed] == [first.workload_id]


def test_a_dependent_retried_by_hand_in_between_is_not_re_armed_again(store):
    first = store.create(make_request(idempotency_key="first", retry_policy=_once()))
    second = _after(store, "second", first)
    _dead_letter(store, first, now=10)
    assert store.claim_next("t", "app", "w", CAPABILITIES, now=11) is None
    store.cancel(second.workload_id, "human:ops", now=12)

    store.retry(first.workload_id, "human:ops", now=20, reason="again")
    assert store.get(second.workload_id).state is WorkloadState.CANCELLED


def test_an_operator_narrowed_to_one_environment_re_arms_only_work_of_it(store):
    first = store.create(make_request(idempotency_key="first", retry_policy=_once()))
    mine = _after(store, "mine", first, environment=first.environment)
    theirs = _after(store, "theirs", first, environment="staging")
    _dead_letter(store, first, now=10)
    assert store.claim_many("t", "app", "w", CAPABILITIES, 10, now=11) == []
    narrowed = Scope("t", "app", environments=frozenset({first.environment}))

    store.retry(first.workload_id, "human:ops", now=20, reason="fixed", scope=narrowed)
    assert store.get(mine.workload_id).state is WorkloadState.READY
    assert store.get(theirs.workload_id).state is WorkloadState.DEAD_LETTER


def test_cancelling_a_dead_lettered_dependency_meets_work_that_awaited_its_cancellation(store):
    job = store.create(make_request(idempotency_key="job", retry_policy=_once()))
    cleanup = _after(store, "cleanup", job, required=WorkloadState.CANCELLED)
    receipt = _after(store, "receipt", job)
    _dead_letter(store, job, now=10)
    assert store.claim_many("t", "app", "w", CAPABILITIES, 10, now=11) == []
    assert store.get(cleanup.workload_id).state is WorkloadState.DEAD_LETTER

    assert store.cancel(job.workload_id, "human:ops", now=20) is WorkloadState.CANCELLED
    # The cleanup awaited the cancel: it is ready again, and runs.
    assert store.get(cleanup.workload_id).state is WorkloadState.READY
    claimed = store.claim_many("t", "app", "w", CAPABILITIES, 10, now=21)
    assert [c.workload_id for c in claimed] == [cleanup.workload_id]
    # The receipt awaited success: re-armed, then ended again, saying what ended it now.
    again = store.get(receipt.workload_id)
    assert again.state is WorkloadState.DEAD_LETTER
    assert again.execution_history[-1].evidence["dependency_state"] == "CANCELLED"
