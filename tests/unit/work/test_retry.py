"""feltdb.work.retry: backoff, attempt budgets, and the decision after a failure, a passed
deadline or a lost worker.
"""

from __future__ import annotations

from collections.abc import Iterator

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st
from support.factories import CAPABILITIES, make_request

from feltdb import (
    BackoffPolicy,
    Workload,
    WorkloadError,
    WorkloadRetryPolicy,
    WorkloadState,
    WorkloadStore,
)
from feltdb.fields import MAX_SAFE_INTEGER
from feltdb.work.retry import (
    RETRY,
    attempt_budget,
    backoff_delay_ms,
    deadline_decision,
    failure_decision,
    operator_retries,
    operator_timeout_decision,
    recovery_decision,
)

S = WorkloadState
EXPONENTIAL = BackoffPolicy.EXPONENTIAL
FIXED = BackoffPolicy.FIXED


@pytest.fixture(scope="module")
def claimed_once(tmp_path_factory) -> Iterator[Workload]:
    """A workload claimed once through a real store: ``attempt_count == 1``."""
    store = WorkloadStore.open(tmp_path_factory.mktemp("retry") / "w.db")
    try:
        w, _ = store.admit(make_request())
        store.claim(w.workload_id, "w1", CAPABILITIES, now=11)
        yield store.get(w.workload_id)
    finally:
        store.close()


def with_policy(
    base: Workload, *, attempt_count: int, max_attempts: int = 3, retry_on: set[str] | None = None
) -> Workload:
    chosen = WorkloadRetryPolicy(
        max_attempts=max_attempts,
        retry_on=retry_on
        if retry_on is not None
        else {"timeout", "worker_failure", "transient_connection"},
    )
    return msgspec.structs.replace(base, retry_policy=chosen, attempt_count=attempt_count)


def policy(backoff=EXPONENTIAL, initial=1000, maximum=300_000) -> WorkloadRetryPolicy:
    return WorkloadRetryPolicy(backoff=backoff, initial_delay_ms=initial, max_delay_ms=maximum)


# ------------------------------------------------------------------ backoff


def test_the_default_policy_is_the_references():
    default = WorkloadRetryPolicy()
    assert default.max_attempts == 3
    assert default.initial_delay_ms == 1000
    assert default.max_delay_ms == 300_000
    assert default.backoff is EXPONENTIAL
    assert default.retry_on == {"timeout", "worker_failure", "transient_connection"}


def test_exponential_backoff_doubles_from_the_initial_delay():
    delays = [backoff_delay_ms(policy(), n) for n in range(1, 11)]
    assert delays == [1000, 2000, 4000, 8000, 16000, 32000, 64000, 128000, 256000, 300000]


def test_fixed_backoff_repeats_the_initial_delay():
    assert [backoff_delay_ms(policy(FIXED, 1500), n) for n in range(1, 6)] == [1500] * 5


@pytest.mark.parametrize("backoff", [FIXED, EXPONENTIAL])
def test_the_first_retry_is_capped_at_the_max_delay(backoff):
    assert backoff_delay_ms(policy(backoff, initial=5000, maximum=3000), 1) == 3000


def test_exponential_backoff_stops_growing_at_the_max_delay():
    capped = policy(initial=1000, maximum=10_000)
    assert [backoff_delay_ms(capped, n) for n in (4, 5, 6, 50)] == [8000, 10_000, 10_000, 10_000]


def test_retry_zero_is_treated_as_the_first_retry():
    assert backoff_delay_ms(policy(), 0) == 1000


@pytest.mark.parametrize("retry_count", [65, 1000, 10**6, 10**18, 2**63])
def test_huge_retry_counts_stay_capped(retry_count):
    # Without a bounded exponent, 2 ** (10**18) would never finish.
    assert backoff_delay_ms(policy(), retry_count) == 300_000
    largest = MAX_SAFE_INTEGER  # the largest max_delay_ms a policy may hold
    assert backoff_delay_ms(policy(initial=1, maximum=largest), retry_count) <= largest


def test_a_zero_initial_delay_never_waits():
    assert backoff_delay_ms(policy(initial=0), 10**9) == 0


policies = st.builds(
    policy,
    backoff=st.sampled_from([FIXED, EXPONENTIAL]),
    initial=st.integers(min_value=0, max_value=10**9),
    maximum=st.integers(min_value=0, max_value=10**9),
)
retry_counts = st.integers(min_value=0, max_value=10**12)


@given(policies, retry_counts)
def test_the_delay_is_never_above_the_max_delay(retry_policy, retry_count):
    delay = backoff_delay_ms(retry_policy, retry_count)
    assert 0 <= delay <= retry_policy.max_delay_ms


@given(
    policies.map(lambda p: policy(EXPONENTIAL, p.initial_delay_ms, p.max_delay_ms)),
    retry_counts,
    st.integers(min_value=0, max_value=100),
)
def test_exponential_delay_never_shrinks_as_retries_grow(retry_policy, retry_count, more):
    assert backoff_delay_ms(retry_policy, retry_count) <= backoff_delay_ms(
        retry_policy, retry_count + more
    )


@given(policies.map(lambda p: policy(FIXED, p.initial_delay_ms, p.max_delay_ms)), retry_counts)
def test_fixed_delay_is_the_capped_initial_delay(retry_policy, retry_count):
    assert backoff_delay_ms(retry_policy, retry_count) == min(
        retry_policy.initial_delay_ms, retry_policy.max_delay_ms
    )


@given(
    policies.map(lambda p: policy(EXPONENTIAL, p.initial_delay_ms, p.max_delay_ms)),
    st.integers(min_value=1, max_value=64),
)
def test_exponential_delay_is_the_references_arithmetic(retry_policy, retry_count):
    expected = min(
        retry_policy.initial_delay_ms * 2 ** (retry_count - 1), retry_policy.max_delay_ms
    )
    assert backoff_delay_ms(retry_policy, retry_count) == expected


def test_a_retried_failure_waits_the_backoff_in_whole_seconds(store):
    # 1500 ms, then 3000 ms, then 6000 ms: eligibility moves 1 s, 3 s, 6 s (truncated, as
    # the reference's `delay / 1000`).
    request = make_request(
        retry_policy={"max_attempts": 4, "initial_delay_ms": 1500, "max_delay_ms": 60_000}
    )
    w, _ = store.admit(request)
    now = 100
    eligible = []
    for _ in range(3):
        claim = store.claim(w.workload_id, "w1", CAPABILITIES, now=now)
        state = store.fail(
            w.workload_id,
            claim.claim_id,
            "w1",
            claim.fencing_token,
            "transient_connection",
            "x",
            now=now,
        )
        assert state is S.READY
        eligible.append(store.get(w.workload_id).next_attempt_at - now)
        now += 100
    assert eligible == [1, 3, 6]
    assert store.get(w.workload_id).retry_count == 3


# ------------------------------------------------------------------ budgets


def test_the_attempt_budget_without_operator_retries_is_max_attempts(claimed_once):
    w = with_policy(claimed_once, attempt_count=1, max_attempts=5)
    assert operator_retries(w) == 0
    assert attempt_budget(w) == 5


def test_each_operator_retry_adds_one_attempt_to_the_budget(store):
    w, _ = store.admit(make_request(retry_policy={"max_attempts": 2}))
    budgets = [attempt_budget(store.get(w.workload_id))]
    for now in (20, 40):
        claim = store.claim(w.workload_id, "w1", CAPABILITIES, now=now)
        assert (
            store.fail(
                w.workload_id, claim.claim_id, "w1", claim.fencing_token, "fatal", "x", now=now
            )
            is S.DEAD_LETTER
        )
        store.retry(w.workload_id, "operator", now=now + 1, reason="try again")
        budgets.append(attempt_budget(store.get(w.workload_id)))
    assert budgets == [2, 3, 4]
    assert operator_retries(store.get(w.workload_id)) == 2

    claim = store.claim(w.workload_id, "w1", CAPABILITIES, now=60)
    store.fail(w.workload_id, claim.claim_id, "w1", claim.fencing_token, "fatal", "x", now=60)
    with pytest.raises(WorkloadError) as refused:
        store.retry(w.workload_id, "operator", now=61)
    assert refused.value.code == "WORKLOAD_RETRY_EXHAUSTED"
    assert attempt_budget(store.get(w.workload_id)) == 4


# ------------------------------------------------------------------ failure_decision


@pytest.mark.parametrize(
    ("kind", "effect", "retry_on", "attempt_count", "decision"),
    [
        ("transient_connection", None, None, 1, RETRY),
        ("transient_connection", "none", None, 1, RETRY),
        ("fatal", None, None, 1, "failure_kind_not_retryable"),
        ("fatal", "none", None, 1, "failure_kind_not_retryable"),
        # An unknown effect is decided like a lost worker, whatever the kind says.
        ("fatal", "unknown", None, 1, RETRY),
        (
            "transient_connection",
            "unknown",
            {"transient_connection"},
            1,
            "effect_unknown_not_retryable",
        ),
        ("transient_connection", None, None, 3, "attempt_budget_exhausted"),
        ("transient_connection", None, None, 4, "attempt_budget_exhausted"),
        ("fatal", "unknown", None, 3, "attempt_budget_exhausted"),
        # Not retryable is said before exhausted.
        ("fatal", None, None, 3, "failure_kind_not_retryable"),
        ("transient_connection", None, None, 2, RETRY),
    ],
)
def test_failure_decision(claimed_once, kind, effect, retry_on, attempt_count, decision):
    w = with_policy(claimed_once, attempt_count=attempt_count, retry_on=retry_on)
    decided = failure_decision(w, kind, effect)
    assert decided.reason == decision
    assert decided.retry is (decision == RETRY)


def test_a_failure_the_store_dead_letters_records_why(store):
    w, _ = store.admit(make_request())
    claim = store.claim(w.workload_id, "w1", CAPABILITIES, now=11)
    store.fail(w.workload_id, claim.claim_id, "w1", claim.fencing_token, "fatal", "x", now=12)
    last = store.get(w.workload_id).execution_history[-1]
    assert last.to is S.DEAD_LETTER
    assert last.evidence == {"decision": "failure_kind_not_retryable"}


# ------------------------------------------------------------------ deadline_decision


@pytest.mark.parametrize("deadline", ["overall", "queue", "approval"])
def test_a_work_bounding_deadline_is_never_retried(claimed_once, deadline):
    w = with_policy(claimed_once, attempt_count=0, max_attempts=10)
    assert deadline_decision(w, deadline).reason == "deadline_not_retryable"


@pytest.mark.parametrize("deadline", ["claim", "execution", "heartbeat"])
def test_an_attempt_deadline_is_retried_while_attempts_remain(claimed_once, deadline):
    assert deadline_decision(with_policy(claimed_once, attempt_count=1), deadline).reason == RETRY
    assert (
        deadline_decision(with_policy(claimed_once, attempt_count=3), deadline).reason
        == "attempt_budget_exhausted"
    )
    assert (
        deadline_decision(
            with_policy(claimed_once, attempt_count=1, retry_on={"worker_failure"}), deadline
        ).reason
        == "timeout_not_retryable"
    )


# ------------------------------------------------------------------ recovery_decision


def test_recovery_retries_a_lost_worker_while_attempts_remain(claimed_once):
    assert recovery_decision(with_policy(claimed_once, attempt_count=2)).reason == RETRY


def test_recovery_gives_up_when_the_budget_is_spent(claimed_once):
    spent = recovery_decision(with_policy(claimed_once, attempt_count=3))
    assert spent.reason == "attempt_budget_exhausted"
    assert not spent.retry


def test_recovery_gives_up_when_the_policy_does_not_retry_worker_failure(claimed_once):
    assert (
        recovery_decision(with_policy(claimed_once, attempt_count=1, retry_on={"timeout"})).reason
        == "worker_failure_not_retryable"
    )


def test_recovery_through_the_store_follows_the_decision(store):
    w, _ = store.admit(make_request(retry_policy={"max_attempts": 2}))
    decisions = []
    now = 100
    for _ in range(2):
        claim = store.claim(w.workload_id, "w1", CAPABILITIES, now=now, lease_ms=5000)
        assert store.recover_expired(now=claim.expires_at) == [w.workload_id]
        decisions.append(store.get(w.workload_id).execution_history[-1].evidence["decision"])
        now = claim.expires_at + 10
    assert decisions == [RETRY, "attempt_budget_exhausted"]
    assert store.get(w.workload_id).state is S.DEAD_LETTER


# ------------------------------------------------------------------ one decision, applied once


def test_a_failure_retry_carries_the_backoff_of_the_next_retry(claimed_once):
    w = msgspec.structs.replace(with_policy(claimed_once, attempt_count=1), retry_count=2)
    decided = failure_decision(w, "transient_connection", None)
    assert decided.retry and decided.counted and decided.recorded
    assert decided.delay_ms == backoff_delay_ms(w.retry_policy, 3)
    assert decided.actor == "feltdb.retry"


def test_a_recovery_is_no_automatic_retry_and_keeps_eligibility(claimed_once):
    decided = recovery_decision(with_policy(claimed_once, attempt_count=1))
    assert decided.retry and not decided.counted
    assert decided.delay_ms is None
    assert decided.actor == "feltdb.recovery"


def test_an_operator_timeout_decision_is_not_recorded_as_evidence(claimed_once):
    retried = operator_timeout_decision(with_policy(claimed_once, attempt_count=1))
    assert retried.retry and not retried.recorded and retried.actor == "feltdb.retry"
    spent = operator_timeout_decision(with_policy(claimed_once, attempt_count=3))
    assert not spent.retry and spent.actor == "feltdb.timeout"
    assert spent.reason == "attempt_budget_exhausted"
