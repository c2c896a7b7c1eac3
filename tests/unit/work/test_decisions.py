"""Decisions are values: each answers a new workload and leaves the one it was given as it
was, so a refused command, a batch's earlier item and a caller's copy are never touched.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec
import pytest
from support.factories import CAPABILITIES, make_request

from feltdb import ApprovalPolicy, Subject, WorkloadError, WorkloadState
from feltdb.records.workload import Workload
from feltdb.work import lifecycle, operators, recovery
from feltdb.work.admission import new_workload
from feltdb.work.outcome import Outcome
from feltdb.work.states import ApprovalOutcome

S = WorkloadState
W = "w1"


def ready() -> Workload:
    return new_workload(make_request(), "wl-1")


def claimed(start: bool = False) -> tuple[Workload, Any]:
    outcome = lifecycle.claim(ready(), W, CAPABILITIES, 11, 60_000)
    claim = outcome.answer
    workload = outcome.workload
    if start:
        workload = lifecycle.start(workload, claim.claim_id, W, claim.fencing_token, 12)
    return workload, claim


def fence(claim: Any) -> tuple[str, str, int]:
    return claim.claim_id, W, claim.fencing_token


def awaiting() -> Workload:
    return new_workload(make_request(approval=ApprovalPolicy()), "wl-2")


Decision = Callable[[], tuple[Workload, Callable[[Workload], Outcome[Any] | Workload]]]


def _running_then(decide: Callable[[Workload, Any], Outcome[Any] | Workload]) -> Decision:
    def made() -> tuple[Workload, Callable[[Workload], Outcome[Any] | Workload]]:
        workload, claim = claimed(start=True)
        return workload, lambda w: decide(w, claim)

    return made


DECISIONS: dict[str, Decision] = {
    "claim": lambda: (ready(), lambda w: lifecycle.claim(w, W, CAPABILITIES, 11, 60_000)),
    "start": lambda: (
        (c := claimed())[0],
        lambda w: lifecycle.start(w, *fence(c[1]), 12),
    ),
    "heartbeat": _running_then(lambda w, c: lifecycle.heartbeat(w, *fence(c), 13, 60_000)),
    "checkpoint": _running_then(lambda w, c: lifecycle.checkpoint(w, *fence(c), {"n": 1}, 13)),
    "complete": _running_then(
        lambda w, c: lifecycle.complete(w, *fence(c), "r1", {"ok": True}, [], 1, 13)
    ),
    "fail": _running_then(
        lambda w, c: lifecycle.fail(w, *fence(c), "transient_connection", "x", None, 13)
    ),
    "cancel ready": lambda: (ready(), lambda w: operators.cancel(w, "op", 13)),
    "cancel held": _running_then(lambda w, c: operators.cancel(w, "op", 13)),
    "operator timeout": _running_then(lambda w, c: operators.operator_timeout(w, "op", 13)),
    "deadline": _running_then(lambda w, c: recovery.time_out_past_deadline(w, "execution", 12, 13)),
    "recover": _running_then(lambda w, c: recovery.recover(w, 10**6)),
    "decide": lambda: (
        (a := awaiting()),
        lambda w: operators.decide(
            w, Subject.human("h"), ApprovalOutcome.APPROVED, None, "g", a.input_hash, 13
        ),
    ),
}


@pytest.mark.parametrize("name", sorted(DECISIONS))
def test_a_decision_answers_a_new_workload_and_leaves_the_given_one_as_it_was(name):
    given, decide = DECISIONS[name]()
    before = given.to_json()

    decided = decide(given)

    after = decided.workload if isinstance(decided, Outcome) else decided
    assert given.to_json() == before
    assert after is not given
    assert after.to_json() != before
    # The history is only ever added to: the given one is the new one's beginning.
    assert after.execution_history[: len(given.execution_history)] == given.execution_history


def test_a_refused_decision_leaves_the_given_workload_as_it_was():
    workload, claim = claimed(start=True)
    done = lifecycle.complete(workload, *fence(claim), "r1", {"ok": True}, [], 1, 13).workload
    before = done.to_json()
    with pytest.raises(WorkloadError) as refused:
        lifecycle.fail(done, *fence(claim), "transient_connection", "x", None, 14)
    assert refused.value.code in ("WORKLOAD_CLAIM_INVALID", "WORKLOAD_TRANSITION_DENIED")
    assert done.to_json() == before


def test_a_failure_retried_by_policy_ends_ready_with_the_attempt_recorded():
    workload, claim = claimed(start=True)
    failed = lifecycle.fail(workload, *fence(claim), "transient_connection", "x", None, 13)
    assert [e.to for e in failed.execution_history[-2:]] == [S.FAILED, S.READY]
    assert failed.attempts[-1].status.value == "FAILED"
    assert workload.attempts[-1].status.value == "RUNNING"
    assert workload.current_claim is not None and failed.current_claim is None


@pytest.mark.parametrize(
    ("record", "field"),
    [
        (lambda: ready(), "state"),
        (lambda: claimed()[0].attempts[-1], "status"),
        (lambda: claimed()[1], "expires_at"),
        (lambda: ready().retry_policy, "max_attempts"),
        (lambda: ready().timeouts, "queue_ms"),
        (lambda: awaiting().approval, "decision"),
    ],
)
def test_the_records_a_decision_shares_cannot_be_edited(record, field):
    with pytest.raises(AttributeError):
        setattr(record(), field, None)


def test_a_replaced_record_shares_what_it_did_not_change():
    workload, claim = claimed(start=True)
    beat = lifecycle.heartbeat(workload, *fence(claim), 13, 60_000).workload
    assert beat.input is workload.input
    assert beat.execution_history is workload.execution_history
    assert beat.current_claim is not workload.current_claim
    assert msgspec.structs.replace(beat, current_claim=workload.current_claim) == workload
