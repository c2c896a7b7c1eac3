"""feltdb.work.deadlines: when each timeout falls, and which one has passed.

Timeline of the workloads built here (the factory admits at ``created_at=10``): claimed at
20, started at 21, and so on, each step committed through a real store with an explicit
``now``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.factories import CAPABILITIES, make_request

from feltdb import (
    ApprovalPolicy,
    Subject,
    Workload,
    WorkloadState,
    WorkloadStore,
    WorkloadTimeouts,
    deadline_breach,
)
from feltdb.work.deadlines import (
    DEADLINE_ACTIVE_STATES,
    deadline_instants,
    deadline_seconds,
    next_deadline_at,
)

S = WorkloadState
APPROVER = Subject.human("boss")


# ------------------------------------------------------------------ builders


def admitted(
    store: WorkloadStore,
    key: str = "one",
    *,
    approval: bool = False,
    not_before: int | None = None,
    **timeouts: int,
) -> Workload:
    overrides: dict[str, Any] = {"idempotency_key": key, "timeouts": timeouts}
    if approval:
        overrides["approval"] = ApprovalPolicy()
    if not_before is not None:
        overrides["not_before"] = not_before
    return store.admit(make_request(**overrides))[0]


def claimed(store: WorkloadStore, key: str = "one", *, at: int = 20, **timeouts: int):
    w = admitted(store, key, **timeouts)
    claim = store.claim(w.workload_id, "w1", CAPABILITIES, now=at, lease_ms=600_000)
    return store.get(w.workload_id), claim


def running(
    store: WorkloadStore,
    key: str = "one",
    *,
    claim_at: int = 20,
    start_at: int = 21,
    **timeouts: int,
):
    w, claim = claimed(store, key, at=claim_at, **timeouts)
    store.start(w.workload_id, claim.claim_id, "w1", claim.fencing_token, now=start_at)
    return store.get(w.workload_id), claim


def copy_with(w: Workload, **timeouts: int | None) -> Workload:
    return msgspec.structs.replace(w, timeouts=WorkloadTimeouts(**timeouts))


# ------------------------------------------------------------------ deadline_seconds


@pytest.mark.parametrize(
    ("ms", "seconds"),
    [(1, 1), (999, 1), (1000, 1), (1001, 2), (1999, 2), (2000, 2), (2001, 3), (60_000, 60)],
)
def test_deadline_seconds_rounds_up_to_whole_seconds(ms, seconds):
    assert deadline_seconds(ms) == seconds


@given(st.integers(min_value=1, max_value=10**12))
def test_a_deadline_is_never_early_and_at_most_a_second_late(ms):
    assert 0 <= deadline_seconds(ms) * 1000 - ms < 1000


# ------------------------------------------------------------------ each deadline


def approval_deadline(store):
    return admitted(store, approval=True, approval_ms=5000), "approval", 15


def overall_deadline(store):
    return admitted(store, overall_ms=5000), "overall", 15


def queue_deadline(store):
    return admitted(store, queue_ms=5000), "queue", 15


def queue_deadline_after_not_before(store):
    return admitted(store, not_before=100, queue_ms=5000), "queue", 105


def claim_deadline(store):
    return claimed(store, claim_ms=5000)[0], "claim", 25


def execution_deadline(store):
    return running(store, execution_ms=5000)[0], "execution", 26


def heartbeat_deadline_from_the_claim(store):
    return claimed(store, heartbeat_ms=5000)[0], "heartbeat", 25


def heartbeat_deadline_from_the_last_heartbeat(store):
    w, claim = running(store, heartbeat_ms=5000)
    store.heartbeat(w.workload_id, claim.claim_id, "w1", claim.fencing_token, now=23)
    return store.get(w.workload_id), "heartbeat", 28


def heartbeat_deadline_rounds_up(store):
    return claimed(store, heartbeat_ms=1001)[0], "heartbeat", 22


SCENARIOS: list[Callable[[WorkloadStore], tuple[Workload, str, int]]] = [
    approval_deadline,
    overall_deadline,
    queue_deadline,
    queue_deadline_after_not_before,
    claim_deadline,
    execution_deadline,
    heartbeat_deadline_from_the_claim,
    heartbeat_deadline_from_the_last_heartbeat,
    heartbeat_deadline_rounds_up,
]


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda f: f.__name__)
def test_a_deadline_falling_exactly_now_has_passed(store, scenario):
    w, kind, at = scenario(store)
    assert deadline_breach(w, at) == (kind, at)
    assert deadline_breach(w, at + 1000) == (kind, at)


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda f: f.__name__)
def test_a_deadline_one_second_ahead_has_not_passed(store, scenario):
    w, _, at = scenario(store)
    assert deadline_breach(w, at - 1) is None


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda f: f.__name__)
def test_the_next_deadline_is_the_one_deadline_set(store, scenario):
    w, _, at = scenario(store)
    assert next_deadline_at(w) == at


def test_the_queue_deadline_restarts_when_a_retry_makes_the_work_ready_again(store):
    w, claim = claimed(store, at=11, queue_ms=5000)  # queue would have fallen at 15
    store.fail(
        w.workload_id,
        claim.claim_id,
        "w1",
        claim.fencing_token,
        "transient_connection",
        "x",
        now=12,
    )
    retried = store.get(w.workload_id)
    assert retried.state is S.READY and retried.next_attempt_at == 13  # 1000 ms backoff
    # READY again at 12, eligible at 13: the queue deadline counts from the later.
    assert deadline_breach(retried, 17) is None
    assert deadline_breach(retried, 18) == ("queue", 18)


# ------------------------------------------------------------------ only while it applies


def test_the_claim_deadline_stops_applying_once_started(store):
    w, _ = running(store, claim_ms=2000)  # would fall at 22
    assert deadline_breach(w, 10**6) is None
    assert next_deadline_at(w) is None


def test_the_queue_deadline_stops_applying_once_claimed(store):
    w, _ = claimed(store, at=11, queue_ms=2000)  # would fall at 12
    assert deadline_breach(w, 10**6) is None


def test_the_execution_deadline_does_not_apply_before_the_start(store):
    w, _ = claimed(store, execution_ms=1000)
    assert deadline_breach(w, 10**6) is None


def test_the_approval_deadline_stops_applying_once_approved(store):
    w = admitted(store, approval=True, approval_ms=5000)
    store.decide(w.workload_id, APPROVER, "approved", None, "g", w.input_hash, now=12)
    approved = store.get(w.workload_id)
    assert approved.state is S.READY
    assert deadline_breach(approved, 10**6) is None


def test_the_overall_deadline_applies_in_every_active_state(store):
    w, claim = running(store, overall_ms=60_000)
    assert deadline_breach(w, 70) == ("overall", 70)
    store.checkpoint(w.workload_id, claim.claim_id, "w1", claim.fencing_token, {"n": 1}, now=22)
    checkpointed = store.get(w.workload_id)
    assert checkpointed.state is S.CHECKPOINTED
    assert deadline_breach(checkpointed, 69) is None
    assert deadline_breach(checkpointed, 70) == ("overall", 70)


# ------------------------------------------------------------------ precedence


def test_approval_is_checked_before_an_earlier_overall_deadline(store):
    w = admitted(store, approval=True, approval_ms=5000, overall_ms=3000)  # 15 and 13
    assert deadline_breach(w, 14) == ("overall", 13)
    assert deadline_breach(w, 20) == ("approval", 15)
    assert next_deadline_at(w) == 13


def test_overall_is_checked_before_an_earlier_queue_deadline(store):
    w = admitted(store, overall_ms=5000, queue_ms=2000)  # 15 and 12
    assert deadline_breach(w, 20) == ("overall", 15)
    assert deadline_breach(w, 13) == ("queue", 12)
    assert next_deadline_at(w) == 12


def test_a_claimed_workload_checks_overall_then_claim_then_heartbeat(store):
    w, _ = claimed(store, overall_ms=60_000, claim_ms=30_000, heartbeat_ms=10_000)
    now = 10**6
    assert deadline_breach(w, now) == ("overall", 70)
    assert deadline_breach(copy_with(w, claim_ms=30_000, heartbeat_ms=10_000), now) == (
        "claim",
        50,
    )
    assert deadline_breach(copy_with(w, heartbeat_ms=10_000), now) == ("heartbeat", 30)


def test_a_running_workload_checks_overall_then_execution_then_heartbeat(store):
    w, _ = running(store, overall_ms=60_000, execution_ms=30_000, heartbeat_ms=10_000)
    now = 10**6
    assert deadline_breach(w, now) == ("overall", 70)
    assert deadline_breach(copy_with(w, execution_ms=30_000, heartbeat_ms=10_000), now) == (
        "execution",
        51,
    )
    assert deadline_breach(copy_with(w, heartbeat_ms=10_000), now) == ("heartbeat", 30)


def test_the_instants_are_listed_in_checking_order(store):
    w, _ = claimed(store, overall_ms=60_000, claim_ms=30_000, heartbeat_ms=10_000)
    assert deadline_instants(w) == [("overall", 70), ("claim", 50), ("heartbeat", 30)]


def test_only_passed_deadlines_compete(store):
    w, _ = claimed(store, overall_ms=60_000, claim_ms=30_000, heartbeat_ms=10_000)
    assert deadline_breach(w, 29) is None
    assert deadline_breach(w, 30) == ("heartbeat", 30)
    assert deadline_breach(w, 50) == ("claim", 50)
    assert deadline_breach(w, 70) == ("overall", 70)


# ------------------------------------------------------------------ never


def test_a_contract_version_1_workload_never_breaches(store):
    w, _ = claimed(store, overall_ms=60_000, claim_ms=60_000, heartbeat_ms=60_000)
    w = copy_with(w, overall_ms=1, claim_ms=1, heartbeat_ms=1, queue_ms=1)
    legacy = msgspec.structs.replace(w, contract_version=1)
    assert deadline_breach(w, 10**6) is not None
    assert deadline_breach(legacy, 10**6) is None
    assert next_deadline_at(legacy) is None
    assert deadline_instants(legacy) == []


def succeeded(store):
    w, claim = running(store, overall_ms=60_000, heartbeat_ms=60_000)
    store.complete(w.workload_id, claim.claim_id, "w1", claim.fencing_token, "r", {}, now=22)
    return store.get(w.workload_id)


def cancelled(store):
    w = admitted(store, overall_ms=5000, queue_ms=5000)
    store.cancel(w.workload_id, "operator", now=11)
    return store.get(w.workload_id)


def cancellation_requested(store):
    w, _ = claimed(store, overall_ms=60_000, heartbeat_ms=60_000)
    store.cancel(w.workload_id, "operator", now=21)
    return store.get(w.workload_id)


def dead_lettered(store):
    w, claim = claimed(store, overall_ms=60_000, queue_ms=60_000)
    store.fail(w.workload_id, claim.claim_id, "w1", claim.fencing_token, "fatal", "x", now=21)
    return store.get(w.workload_id)


def rejected(store):
    w = admitted(store, approval=True, approval_ms=5000, overall_ms=5000)
    store.decide(w.workload_id, APPROVER, "rejected", "no", "g", w.input_hash, now=11)
    return store.get(w.workload_id)


@pytest.mark.parametrize(
    ("build", "state"),
    [
        (succeeded, S.SUCCEEDED),
        (cancelled, S.CANCELLED),
        (cancellation_requested, S.CANCELLATION_REQUESTED),
        (dead_lettered, S.DEAD_LETTER),
        (rejected, S.REJECTED),
    ],
    ids=lambda value: getattr(value, "__name__", str(value)),
)
def test_committed_work_out_of_the_active_states_never_breaches(store, build, state):
    w = build(store)
    assert w.state is state
    assert deadline_breach(w, 10**9) is None
    assert next_deadline_at(w) is None


@pytest.mark.parametrize("state", sorted(set(WorkloadState) - DEADLINE_ACTIVE_STATES))
def test_no_inactive_state_breaches_even_with_every_deadline_set(store, state):
    w, _ = running(store)
    copy = copy_with(
        w, queue_ms=1, claim_ms=1, execution_ms=1, heartbeat_ms=1, overall_ms=1, approval_ms=1
    )
    copy = msgspec.structs.replace(copy, state=state)
    assert deadline_breach(copy, 10**9) is None
    assert next_deadline_at(copy) is None


def test_the_active_states_are_the_references():
    assert {
        S.READY,
        S.CLAIMED,
        S.RUNNING,
        S.CHECKPOINTED,
        S.AWAITING_APPROVAL,
    } == DEADLINE_ACTIVE_STATES


# ------------------------------------------------------------------ next_deadline_at


def test_the_next_deadline_is_the_earliest_that_applies(store):
    w, claim = running(store, overall_ms=60_000, execution_ms=10_000, heartbeat_ms=5000)
    assert next_deadline_at(w) == 25  # heartbeat: claimed at 20
    store.heartbeat(w.workload_id, claim.claim_id, "w1", claim.fencing_token, now=24)
    assert next_deadline_at(store.get(w.workload_id)) == 29
    store.heartbeat(w.workload_id, claim.claim_id, "w1", claim.fencing_token, now=28)
    assert next_deadline_at(store.get(w.workload_id)) == 31  # execution: started at 21


def test_there_is_no_next_deadline_without_timeouts(store):
    w, _ = running(store)
    assert next_deadline_at(w) is None
    assert deadline_breach(w, 10**9) is None


def test_there_is_no_next_deadline_when_none_applies_in_the_state(store):
    w = admitted(store, claim_ms=1000, execution_ms=1000, heartbeat_ms=1000)
    assert w.state is S.READY
    assert next_deadline_at(w) is None


# ------------------------------------------------------------------ property


@pytest.fixture(scope="module")
def bases(tmp_path_factory) -> Iterator[dict[str, Workload]]:
    """One committed workload per kind of state, built once through a real store."""
    store = WorkloadStore.open(tmp_path_factory.mktemp("deadlines") / "w.db")
    try:
        built: dict[str, Workload] = {}
        built["ready"] = admitted(store, "ready", not_before=12)
        built["awaiting"] = admitted(store, "awaiting", approval=True)
        built["claimed"] = claimed(store, "claimed")[0]
        built["running"] = running(store, "running")[0]
        w, claim = running(store, "checkpointed")
        store.checkpoint(w.workload_id, claim.claim_id, "w1", claim.fencing_token, {}, now=22)
        built["checkpointed"] = store.get(w.workload_id)
        w, claim = running(store, "succeeded")
        store.complete(w.workload_id, claim.claim_id, "w1", claim.fencing_token, "r", {}, now=22)
        built["succeeded"] = store.get(w.workload_id)
        w, _ = claimed(store, "cancelling")
        store.cancel(w.workload_id, "operator", now=21)
        built["cancelling"] = store.get(w.workload_id)
        yield built
    finally:
        store.close()


optional_ms = st.one_of(st.none(), st.integers(min_value=1, max_value=10**7))


@settings(max_examples=300)
@given(
    base=st.sampled_from(
        ["ready", "awaiting", "claimed", "running", "checkpointed", "succeeded", "cancelling"]
    ),
    timeouts=st.fixed_dictionaries(
        {
            name: optional_ms
            for name in (
                "queue_ms",
                "claim_ms",
                "execution_ms",
                "heartbeat_ms",
                "overall_ms",
                "approval_ms",
            )
        }
    ),
    contract_version=st.sampled_from([1, 2]),
    next_attempt_at=st.one_of(st.none(), st.integers(min_value=0, max_value=20_000)),
    heartbeat_at=st.integers(min_value=20, max_value=20_000),
    now=st.integers(min_value=0, max_value=25_000),
)
def test_a_breach_is_exactly_the_next_deadline_having_arrived(
    bases, base, timeouts, contract_version, next_attempt_at, heartbeat_at, now
):
    w = msgspec.structs.replace(
        bases[base], timeouts=WorkloadTimeouts(**timeouts), contract_version=contract_version
    )
    if w.state is S.READY:
        w = msgspec.structs.replace(w, next_attempt_at=next_attempt_at)
    if w.current_claim is not None:
        beat = msgspec.structs.replace(w.current_claim, last_heartbeat=heartbeat_at)
        w = msgspec.structs.replace(w, current_claim=beat)

    breach = deadline_breach(w, now)
    upcoming = next_deadline_at(w)

    assert (breach is not None) == (upcoming is not None and now >= upcoming)
    if breach is not None:
        kind, at = breach
        assert upcoming is not None and upcoming <= at <= now
        assert (kind, at) in deadline_instants(w)
        # The first passed deadline in checking order, not merely some passed deadline.
        passed = [item for item in deadline_instants(w) if item[1] <= now]
        assert breach == passed[0]
