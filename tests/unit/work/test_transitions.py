"""feltdb.work.transitions (and lifecycle.transition, which applies it)."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import msgspec
import pytest
from support.factories import CAPABILITIES, make_request

from feltdb import (
    DURABLE_WORK_COLLECTION,
    Workload,
    WorkloadError,
    WorkloadState,
    WorkloadStore,
    can_transition,
)
from feltdb.work.transitions import EVENT_NAMES, LEGAL_TRANSITIONS, transition

S = WorkloadState

# The reference's event_name(), spelled out independently of the module under test.
REFERENCE_EVENT_NAMES = {
    "CREATED": "workload.created",
    "READY": "workload.ready",
    "CLAIMED": "workload.claimed",
    "RUNNING": "workload.started",
    "CHECKPOINTED": "workload.checkpointed",
    "RECOVERING": "workload.recovered",
    "CANCELLATION_REQUESTED": "workload.cancellation_requested",
    "SUCCEEDED": "workload.completed",
    "FAILED": "workload.failed",
    "CANCELLED": "workload.cancelled",
    "TIMED_OUT": "workload.timed_out",
    "DEAD_LETTER": "workload.dead_lettered",
    "AWAITING_APPROVAL": "workload.awaiting_approval",
    "REJECTED": "workload.rejected",
}

ILLEGAL = sorted(
    set(itertools.product(WorkloadState, WorkloadState)) - LEGAL_TRANSITIONS,
    key=lambda pair: (pair[0].value, pair[1].value),
)
LEGAL = sorted(LEGAL_TRANSITIONS, key=lambda pair: (pair[0].value, pair[1].value))


@pytest.fixture(scope="module")
def ready(tmp_path_factory) -> Iterator[Workload]:
    """A workload admitted through a real store (READY, one admission event)."""
    store = WorkloadStore.open(tmp_path_factory.mktemp("transitions") / "w.db")
    try:
        yield store.admit(make_request())[0]
    finally:
        store.close()


def in_state(base: Workload, state: WorkloadState) -> Workload:
    return msgspec.structs.replace(base, state=state)


@pytest.mark.parametrize("state", list(WorkloadState))
def test_each_state_has_the_reference_event_name(state):
    assert EVENT_NAMES[state] == REFERENCE_EVENT_NAMES[state.value]


def test_event_names_cover_exactly_the_states():
    assert set(EVENT_NAMES) == set(WorkloadState)
    assert len(set(EVENT_NAMES.values())) == len(WorkloadState)


def test_can_transition_accepts_the_serialized_spellings():
    assert can_transition("READY", "CLAIMED") is True
    assert can_transition("CLAIMED", "READY") is False


def test_can_transition_refuses_an_unknown_state():
    with pytest.raises(ValueError):
        can_transition("READY", "DONE")


@pytest.mark.parametrize(("from_state", "to_state"), LEGAL)
def test_a_legal_transition_moves_the_state_and_records_one_event(ready, from_state, to_state):
    given = in_state(ready, from_state)
    before = list(given.execution_history)
    given_json = given.to_json()

    w = transition(given, to_state, "operator-1", 50, {"why": "test"})

    assert given.to_json() == given_json  # a new record: the one given is left as it was
    assert w.state is to_state
    assert w.updated_at == 50
    assert w.execution_history[:-1] == before
    event = w.execution_history[-1]
    assert event.sequence == before[-1].sequence + 1
    assert event.event_type == REFERENCE_EVENT_NAMES[to_state.value]
    assert event.from_state is from_state
    assert event.to is to_state
    assert event.actor == "operator-1"
    assert event.at == 50
    assert event.evidence == {"why": "test"}


@pytest.mark.parametrize(("from_state", "to_state"), ILLEGAL)
def test_an_illegal_transition_is_denied_and_changes_nothing(ready, from_state, to_state):
    w = in_state(ready, from_state)
    before = w.to_json()

    with pytest.raises(WorkloadError) as refused:
        transition(w, to_state, "operator-1", 50, {"why": "test"})

    assert refused.value.code == "WORKLOAD_TRANSITION_DENIED"
    assert refused.value.details == {"state": from_state.value, "to": to_state.value}
    assert from_state.value in refused.value.message
    assert to_state.value in refused.value.message
    assert w.to_json() == before


def test_the_legal_and_illegal_cases_cover_every_pair_once():
    assert len(LEGAL) + len(ILLEGAL) == len(WorkloadState) ** 2
    assert len(LEGAL) == 41  # the reference's legal() lists 41 pairs


def test_a_transition_without_evidence_records_empty_evidence(ready):
    w = transition(in_state(ready, S.READY), S.CLAIMED, "w1", 11)
    assert w.execution_history[-1].evidence == {}


def test_the_first_event_of_an_empty_history_has_sequence_one(ready):
    w = msgspec.structs.replace(in_state(ready, S.CREATED), execution_history=[])
    w = transition(w, S.READY, "feltdb", 10)
    assert [e.sequence for e in w.execution_history] == [1]
    assert w.execution_history[0].from_state is S.CREATED


def test_sequence_numbers_follow_the_last_event_not_the_history_length(ready):
    w = in_state(ready, S.READY)
    w = msgspec.structs.replace(
        w, execution_history=[msgspec.structs.replace(w.execution_history[0], sequence=7)]
    )
    w = transition(w, S.CLAIMED, "w1", 11)
    assert [e.sequence for e in w.execution_history] == [7, 8]


def test_a_real_lifecycle_numbers_its_events_one_to_n(store):
    w, _ = store.admit(make_request())
    claim = store.claim(w.workload_id, "w1", CAPABILITIES, now=11, lease_ms=60_000)
    store.start(w.workload_id, claim.claim_id, "w1", claim.fencing_token, now=12)
    store.checkpoint(w.workload_id, claim.claim_id, "w1", claim.fencing_token, {"n": 1}, now=13)
    store.checkpoint(w.workload_id, claim.claim_id, "w1", claim.fencing_token, {"n": 2}, now=14)
    store.complete(
        w.workload_id, claim.claim_id, "w1", claim.fencing_token, "r1", {"ok": True}, now=15
    )

    history = store.get(w.workload_id).execution_history

    assert [e.sequence for e in history] == [1, 2, 3, 4, 5]
    assert [e.event_type for e in history] == [
        "workload.ready",
        "workload.claimed",
        "workload.started",
        "workload.checkpointed",
        "workload.completed",
    ]
    assert [e.from_state for e in history] == [
        S.CREATED,
        S.READY,
        S.CLAIMED,
        S.RUNNING,
        S.CHECKPOINTED,
    ]
    assert [e.at for e in history] == [10, 11, 12, 13, 15]


def test_a_retry_continues_the_numbering(store):
    w, _ = store.admit(make_request())
    claim = store.claim(w.workload_id, "w1", CAPABILITIES, now=11)
    store.fail(
        w.workload_id,
        claim.claim_id,
        "w1",
        claim.fencing_token,
        "transient_connection",
        "x",
        now=12,
    )
    history = store.get(w.workload_id).execution_history
    assert [e.sequence for e in history] == [1, 2, 3, 4]
    assert [e.to for e in history] == [S.READY, S.CLAIMED, S.FAILED, S.READY]


def test_the_store_refuses_an_illegal_move_and_commits_nothing(store):
    w, _ = store.admit(make_request())
    claim = store.claim(w.workload_id, "w1", CAPABILITIES, now=11)
    store.start(w.workload_id, claim.claim_id, "w1", claim.fencing_token, now=12)
    store.complete(
        w.workload_id, claim.claim_id, "w1", claim.fencing_token, "r1", {"ok": True}, now=13
    )
    committed = store.get(w.workload_id)
    version = store.db.get_row(DURABLE_WORK_COLLECTION, w.workload_id).version
    revision = store.db.current_revision()

    with pytest.raises(WorkloadError) as refused:
        store.cancel(w.workload_id, "operator", now=14)

    assert refused.value.code == "WORKLOAD_TRANSITION_DENIED"
    assert store.get(w.workload_id) == committed
    assert store.db.get_row(DURABLE_WORK_COLLECTION, w.workload_id).version == version
    assert store.db.current_revision() == revision


def test_starting_twice_is_denied_and_leaves_history_unchanged(store):
    w, _ = store.admit(make_request())
    claim = store.claim(w.workload_id, "w1", CAPABILITIES, now=11)
    store.start(w.workload_id, claim.claim_id, "w1", claim.fencing_token, now=12)
    history = store.get(w.workload_id).execution_history

    with pytest.raises(WorkloadError) as refused:
        store.start(w.workload_id, claim.claim_id, "w1", claim.fencing_token, now=13)

    assert refused.value.code == "WORKLOAD_TRANSITION_DENIED"
    assert store.get(w.workload_id).execution_history == history
    assert store.get(w.workload_id).state is S.RUNNING
