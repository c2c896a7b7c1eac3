"""Admission and idempotency: the reference's admission tests, ported."""

from __future__ import annotations

import threading
from collections.abc import Callable
from contextlib import ExitStack
from typing import Any

import pytest
from support.factories import CAPABILITIES, make_request
from support.pinned import pinned_store

from feltdb import CreateWorkload, Subject, WorkloadError, WorkloadState, WorkloadStore
from feltdb.work.identities import workload_id_for

JOIN_TIMEOUT_S = 60


def run_concurrently(calls: list[Callable[[], Any]]) -> list[tuple[Any, BaseException | None]]:
    """Run ``calls`` on their own threads, released together by a barrier.

    Returns each call's ``(value, exception)``; a thread that hangs fails the test.
    """
    barrier = threading.Barrier(len(calls))
    outcomes: list[tuple[Any, BaseException | None]] = [(None, None)] * len(calls)

    def run(index: int, call: Callable[[], Any]) -> None:
        try:
            barrier.wait(timeout=JOIN_TIMEOUT_S)
            outcomes[index] = (call(), None)
        except BaseException as error:  # reported to the main thread
            outcomes[index] = (None, error)

    threads = [threading.Thread(target=run, args=(index, call)) for index, call in enumerate(calls)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=JOIN_TIMEOUT_S)
        assert not thread.is_alive(), "a writer thread hung"
    return outcomes


def test_idempotency_keys_are_bound_to_their_requester_and_request(store):
    original, created = store.admit(make_request("a1"))
    assert created

    # The same requester and request: the original, not a second workload.
    replayed, created = store.admit(make_request("a1"))
    assert not created
    assert replayed.workload_id == original.workload_id

    # The same key for a different request is refused and creates nothing.
    different = make_request("a1")
    different.input = {"id": 2}
    with pytest.raises(WorkloadError) as refused:
        store.admit(different)
    assert refused.value.code == "IDEMPOTENCY_KEY_REUSED"
    other_definition = make_request("a1")
    other_definition.definition_id = "other"
    with pytest.raises(WorkloadError) as refused:
        store.admit(other_definition)
    assert refused.value.code == "IDEMPOTENCY_KEY_REUSED"

    # Another requester's identical key is its own workload: it neither
    # returns, reveals nor blocks the first requester's.
    theirs, created = store.admit(make_request("a2"))
    assert created
    assert theirs.workload_id != original.workload_id
    assert len(store.list("t", "app")) == 2

    # A snapshot that does not bind the requester is refused before any
    # replay, so a key cannot be used to fetch a workload.
    unbound = make_request("a1")
    unbound.requested_by = Subject.agent("a2")
    with pytest.raises(WorkloadError) as refused:
        store.admit(unbound)
    assert refused.value.code == "WORKLOAD_UNAUTHORIZED"


def test_competing_admissions_share_one_canonical_idempotency_identity(
    store_target: str, open_store
):
    with ExitStack() as stack:
        first = stack.enter_context(WorkloadStore.open(store_target))
        second = stack.enter_context(WorkloadStore.open(store_target))
        accepted = first.create(make_request())
        # A second writer of the same store loses the require-absent CAS and
        # converges on what was committed: a different request is refused as a
        # reused key, never answered with the original.
        competing = make_request()
        competing.input = {"id": 2}
        with pytest.raises(WorkloadError) as conflict:
            second.create(competing)
        assert conflict.value.code == "IDEMPOTENCY_KEY_REUSED"
        assert [w.workload_id for w in second.list("t", "app")] == [accepted.workload_id], (
            "only the committed workload is projected"
        )
        # The same request from a third, equally stale writer converges on it:
        # a writer that has seen nothing and does not re-read before committing.
        third = pinned_store(stack.enter_context(WorkloadStore.open(store_target)), empty=True)
        converged, created = third.admit(make_request())
        assert not created
        assert converged.workload_id == accepted.workload_id

    restarted = open_store()
    assert len(restarted.list("t", "app")) == 1
    # The idempotency identity is the workload id itself.
    assert workload_id_for("t", "app", accepted.requested_by, "one") == accepted.workload_id
    assert (
        restarted.get(workload_id_for("t", "app", accepted.requested_by, "one")).workload_id
        == accepted.workload_id
    )


def test_idempotency_scopes_cannot_be_made_to_coincide(store):
    first = make_request("x:k1")
    first.idempotency_key = "k2"
    second = make_request("x")
    second.idempotency_key = "k1:k2"
    first = store.create(first)
    second = store.create(second)
    assert first.workload_id != second.workload_id


def test_concurrent_admissions_by_competing_writers_converge_or_conflict(
    new_target: Callable[[str], str],
):
    for round_ in range(20):
        target = new_target(f"concurrent-admission-{round_}")
        with ExitStack() as stack:
            seed = stack.enter_context(WorkloadStore.open(target))
            assert seed.list("t", "app") == []

            def admit_concurrently(
                requests: list[CreateWorkload], stack: ExitStack = stack, target: str = target
            ) -> list[tuple[Any, BaseException | None]]:
                writers = [stack.enter_context(WorkloadStore.open(target)) for _ in requests]
                outcomes = run_concurrently(
                    [
                        (lambda writer=writer, request=request: writer.admit(request))
                        for writer, request in zip(writers, requests, strict=True)
                    ]
                )
                for _, error in outcomes:
                    # Only a refusal is an outcome; anything else fails the test.
                    if error is not None and not isinstance(error, WorkloadError):
                        raise error
                return outcomes

            # The same request: both writers answer with one workload, and
            # exactly one of them created it.
            same = admit_concurrently([make_request(), make_request()])
            assert same[0][1] is None, f"round {round_}: {same[0][1]!r}"
            assert same[1][1] is None, f"round {round_}: {same[1][1]!r}"
            first, first_created = same[0][0]
            second, second_created = same[1][0]
            assert first.workload_id == second.workload_id
            assert first_created ^ second_created, f"round {round_}"

            # Different requests under one key: one is admitted, the other is
            # refused as a reused key and never answered with the winner.
            left = make_request()
            left.idempotency_key = "contested"
            right = left.model_copy(deep=True)
            right.input = {"id": 2}
            contested = admit_concurrently([left, right])
            admitted = [value for value, error in contested if error is None]
            assert len(admitted) == 1, f"round {round_}: {contested!r}"
            assert any(
                error is not None and error.code == "IDEMPOTENCY_KEY_REUSED"
                for _, error in contested
            ), f"round {round_}: {contested!r}"
            winner, _ = admitted[0]
            stored = stack.enter_context(WorkloadStore.open(target))
            assert len(stored.list("t", "app")) == 2
            assert stored.get(winner.workload_id).input == winner.input


def test_idempotent_create_and_legal_lifecycle(store, open_store):
    one = store.create(make_request())
    two = store.create(make_request())
    assert one.workload_id == two.workload_id
    claim = store.claim(one.workload_id, "worker", CAPABILITIES, now=11, lease_ms=10_000)
    store.start(one.workload_id, claim.claim_id, "worker", claim.fencing_token, now=12)
    result = store.complete(
        one.workload_id,
        claim.claim_id,
        "worker",
        claim.fencing_token,
        "result-1",
        {"ok": True},
        [],
        1,
        now=13,
    )
    assert result.result_id == "result-1"
    with pytest.raises(WorkloadError):
        store.start(one.workload_id, claim.claim_id, "worker", claim.fencing_token, now=14)
    recovered = open_store()
    assert recovered.get(one.workload_id).state == WorkloadState.SUCCEEDED
