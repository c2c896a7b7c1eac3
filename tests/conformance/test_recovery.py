"""Lease recovery, the attempt budget and operator retries: the reference's tests, ported."""

from __future__ import annotations

import threading
from collections.abc import Callable
from contextlib import ExitStack
from typing import Any

import msgspec
import pytest
from support.factories import CAPABILITIES, make_request
from support.pinned import commit_unchecked, pinned_store

from feltdb import AttemptStatus, Workload, WorkloadError, WorkloadState, WorkloadStore

JOIN_TIMEOUT_S = 60


def run_concurrently(calls: list[Callable[[], Any]]) -> list[Any]:
    """Run ``calls`` on their own threads, released together by a barrier.

    Returns each call's value; an exception in any thread is raised here, in the main
    thread, and a thread that hangs fails the test.
    """
    barrier = threading.Barrier(len(calls))
    values: list[Any] = [None] * len(calls)
    errors: list[BaseException | None] = [None] * len(calls)

    def run(index: int, call: Callable[[], Any]) -> None:
        try:
            barrier.wait(timeout=JOIN_TIMEOUT_S)
            values[index] = call()
        except BaseException as error:  # reported to the main thread
            errors[index] = error

    threads = [threading.Thread(target=run, args=(index, call)) for index, call in enumerate(calls)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=JOIN_TIMEOUT_S)
        assert not thread.is_alive(), "a writer thread hung"
    for error in errors:
        if error is not None:
            raise error
    return values


def committed_workload(target: str, workload_id: str) -> Workload:
    """The workload as committed, read by a fresh store on the same target."""
    with WorkloadStore.open(target) as fresh:
        return fresh.get(workload_id)


def recoveries(workload: Workload) -> int:
    return sum(1 for event in workload.execution_history if event.to == WorkloadState.RECOVERING)


def race_recovery(
    stack: ExitStack, target: str, now: int
) -> tuple[WorkloadStore, WorkloadStore, list[list[str]]]:
    """Two writers of one store recover the same expired workload at once."""
    first = stack.enter_context(WorkloadStore.open(target))
    second = stack.enter_context(WorkloadStore.open(target))
    recovered = run_concurrently(
        [lambda: first.recover_expired(now=now), lambda: second.recover_expired(now=now)]
    )
    return first, second, recovered


def test_lease_recovery_records_the_lost_worker_and_is_bounded_by_the_attempt_budget(store):
    workload = store.create(make_request())
    workload_id = workload.workload_id
    for attempt in range(1, 4):
        now = 100 * attempt
        claim = store.claim(workload_id, "worker-a", CAPABILITIES, now=now, lease_ms=10_000)
        assert store.recover_expired(now=claim.expires_at) == [workload_id]
        recovered = store.get(workload_id)
        lost = recovered.attempts[-1]
        assert lost.status == AttemptStatus.WORKER_LOST
        assert lost.claim_id == claim.claim_id
        recovering = next(
            event
            for event in reversed(recovered.execution_history)
            if event.to == WorkloadState.RECOVERING
        )
        assert recovering.evidence["recovery_reason"] == "lease_expired"
        assert recovering.evidence["worker_id"] == "worker-a"
        assert recovering.evidence["claim_id"] == claim.claim_id
        assert recovering.evidence["attempts_used"] == str(attempt)
        decision = recovered.execution_history[-1]
        if attempt < 3:
            assert recovered.state == WorkloadState.READY
            assert decision.evidence["decision"] == "retry"
        else:
            assert recovered.state == WorkloadState.DEAD_LETTER
            assert decision.evidence["decision"] == "attempt_budget_exhausted"
    assert store.get(workload_id).attempt_count == 3
    with pytest.raises(WorkloadError) as refused:
        store.claim(workload_id, "worker-b", CAPABILITIES, now=1_000, lease_ms=10_000)
    assert refused.value.code == "WORKLOAD_NOT_READY"


def test_concurrent_recovery_commits_one_transition_and_the_loser_converges(
    new_target: Callable[[str], str],
):
    for round_ in range(20):
        target = new_target(f"concurrent-recovery-{round_}")
        with ExitStack() as stack:
            store = stack.enter_context(WorkloadStore.open(target))
            workload_id = store.create(make_request()).workload_id
            claim = store.claim(workload_id, "worker-a", CAPABILITIES, now=100, lease_ms=10_000)
            # A writer that loaded the workload before either recovery. Commits land in
            # this store's window between its read and its commit: only the storage
            # guard can refuse them.
            stale = pinned_store(stack.enter_context(WorkloadStore.open(target)))

            first, second, recovered = race_recovery(stack, target, claim.expires_at)
            # Exactly one writer committed the recovery; the other reported none.
            assert sorted(recovered) == [[], [workload_id]], f"round {round_}"

            committed = committed_workload(target, workload_id)
            assert recoveries(committed) == 1, "one recovery transition"
            assert committed.state == WorkloadState.READY
            assert committed.attempt_count == 1
            assert len(committed.attempts) == 1
            assert committed.attempts[0].status == AttemptStatus.WORKER_LOST
            assert committed.current_claim is None
            recovering = next(
                event
                for event in committed.execution_history
                if event.to == WorkloadState.RECOVERING
            )
            assert recovering.evidence["claim_id"] == claim.claim_id
            assert recovering.evidence["attempts_used"] == "1"

            # The losing writer adopted the committed workload instead of keeping
            # its own, uncommitted view.
            expected = committed.to_json()
            assert first.get(workload_id).to_json() == expected
            assert second.get(workload_id).to_json() == expected
            # And neither recovers it again, or commits anything more.
            assert first.recover_expired(now=claim.expires_at + 1) == []
            assert second.recover_expired(now=claim.expires_at + 1) == []
            assert committed_workload(target, workload_id).to_json() == expected, (
                "no further commit"
            )

            # The lost claimant cannot complete, even through a store that still
            # shows its claim as current and unexpired: the guarded commit refuses
            # the stale version.
            with pytest.raises(WorkloadError) as refused:
                stale.start(
                    workload_id,
                    claim.claim_id,
                    "worker-a",
                    claim.fencing_token,
                    now=claim.expires_at - 1,
                )
            assert refused.value.code == "WORKLOAD_CONFLICT"
            assert stale.get(workload_id).state == WorkloadState.READY
            with pytest.raises(WorkloadError) as refused:
                stale.complete(
                    workload_id,
                    claim.claim_id,
                    "worker-a",
                    claim.fencing_token,
                    "late-result",
                    {"late": True},
                    [],
                    1,
                    now=claim.expires_at - 1,
                )
            assert refused.value.code == "WORKLOAD_CLAIM_INVALID"
            # Through a current store its fence no longer matches.
            with pytest.raises(WorkloadError) as refused:
                first.heartbeat(
                    workload_id,
                    claim.claim_id,
                    "worker-a",
                    claim.fencing_token,
                    now=claim.expires_at - 1,
                    extend_ms=10_000,
                )
            assert refused.value.code == "WORKLOAD_CLAIM_INVALID"
            assert committed_workload(target, workload_id).to_json() == expected


def test_concurrent_recovery_never_exceeds_the_attempt_budget(store_target: str, store):
    workload_id = store.create(make_request()).workload_id
    for attempt in range(1, 4):
        with ExitStack() as stack:
            # Each attempt is claimed by an up-to-date writer and lost.
            claimer = stack.enter_context(WorkloadStore.open(store_target))
            claim = claimer.claim(
                workload_id, "worker-a", CAPABILITIES, now=100 * attempt, lease_ms=10_000
            )
            _, _, recovered = race_recovery(stack, store_target, claim.expires_at)
            assert [id_ for ids in recovered for id_ in ids] == [workload_id], f"attempt {attempt}"
            committed = committed_workload(store_target, workload_id)
            assert recoveries(committed) == attempt
            assert committed.attempt_count == attempt
    committed = committed_workload(store_target, workload_id)
    assert committed.state == WorkloadState.DEAD_LETTER
    assert committed.execution_history[-1].evidence["decision"] == "attempt_budget_exhausted"
    assert all(attempt.status == AttemptStatus.WORKER_LOST for attempt in committed.attempts)
    with WorkloadStore.open(store_target) as writer, pytest.raises(WorkloadError) as refused:
        writer.claim(workload_id, "worker-b", CAPABILITIES, now=10_000, lease_ms=10_000)
    assert refused.value.code == "WORKLOAD_NOT_READY"
    assert committed_workload(store_target, workload_id).attempt_count == 3


def test_a_policy_that_does_not_retry_worker_failure_dead_letters_a_lost_attempt(store):
    request = make_request()
    request.retry_policy = msgspec.structs.replace(
        request.retry_policy, retry_on=frozenset({"timeout"})
    )
    workload_id = store.create(request).workload_id
    claim = store.claim(workload_id, "worker-a", CAPABILITIES, now=100, lease_ms=10_000)
    store.recover_expired(now=claim.expires_at)
    workload = store.get(workload_id)
    assert workload.state == WorkloadState.DEAD_LETTER
    assert workload.execution_history[-1].evidence["decision"] == "worker_failure_not_retryable"


def test_claiming_exhausted_ready_work_dead_letters_it_instead(store, open_store):
    workload_id = store.create(make_request()).workload_id
    # What unbounded recovery used to leave behind: Ready, budget spent.
    legacy = msgspec.structs.replace(store.get(workload_id), attempt_count=7)
    commit_unchecked(store, legacy)
    with pytest.raises(WorkloadError) as refused:
        store.claim(workload_id, "worker-a", CAPABILITIES, now=100, lease_ms=10_000)
    assert refused.value.code == "WORKLOAD_ATTEMPTS_EXHAUSTED"
    workload = store.get(workload_id)
    assert workload.state == WorkloadState.DEAD_LETTER
    assert workload.execution_history[-1].evidence["reason"] == "attempt_budget_exhausted"
    # Durable: a restart sees the same outcome.
    reopened = open_store()
    assert reopened.get(workload_id).state == WorkloadState.DEAD_LETTER


def test_operator_retry_grants_one_attempt_is_recorded_and_is_bounded(store):
    workload_id = store.create(make_request()).workload_id
    now = 100

    def exhaust() -> None:
        """Claim and lose leases until the workload stops being claimable."""
        nonlocal now
        while True:
            now += 100
            try:
                claim = store.claim(workload_id, "worker-a", CAPABILITIES, now=now, lease_ms=10_000)
            except WorkloadError as error:
                assert error.code in ("WORKLOAD_NOT_READY", "WORKLOAD_ATTEMPTS_EXHAUSTED"), repr(
                    error
                )
                return
            store.recover_expired(now=claim.expires_at)

    exhaust()
    assert store.get(workload_id).attempt_count == 3
    for retry in range(1, 4):
        now += 100
        store.retry(workload_id, "operator-1", now=now, reason="dependency restored")
        event = store.get(workload_id).execution_history[-1]
        assert event.actor == "operator-1"
        assert event.evidence["retry"] == "operator"
        assert event.evidence["reason"] == "dependency restored"
        assert event.evidence["operator_retry"] == str(retry)
        exhaust()
        assert store.get(workload_id).attempt_count == 3 + retry, (
            "each operator retry grants exactly one attempt"
        )
        assert store.get(workload_id).state == WorkloadState.DEAD_LETTER
    with pytest.raises(WorkloadError) as refused:
        store.retry(workload_id, "operator-1", now=now + 100)
    assert refused.value.code == "WORKLOAD_RETRY_EXHAUSTED"
    assert store.get(workload_id).state == WorkloadState.DEAD_LETTER


def test_stale_fence_and_lease_recovery(store):
    w = store.create(make_request())
    old = store.claim(w.workload_id, "a", CAPABILITIES, now=11, lease_ms=1000)
    store.start(w.workload_id, old.claim_id, "a", old.fencing_token, now=11)
    store.recover_expired(now=13)
    new = store.claim(w.workload_id, "b", CAPABILITIES, now=13, lease_ms=10_000)
    assert new.fencing_token > old.fencing_token
    with pytest.raises(WorkloadError) as refused:
        store.complete(
            w.workload_id, old.claim_id, "a", old.fencing_token, "stale", None, [], 1, now=14
        )
    assert refused.value.code == "WORKLOAD_STALE_FENCE"
