"""The approval gate (the reference's PR 3 tests).

Work admitted with an approval policy waits in ``AWAITING_APPROVAL`` and is never claimable
until an authorized, non-requesting decider's approval of its exact input commits.
"""

from __future__ import annotations

import threading

import msgspec
import pytest
from support.factories import CAPABILITIES, make_request

from feltdb import (
    DURABLE_WORK_COLLECTION,
    ApprovalOutcome,
    ApprovalPolicy,
    Subject,
    WorkloadError,
    WorkloadState,
)


def version_of(store, id):
    """The committed document version of workload ``id``."""
    return store.db.get_row(DURABLE_WORK_COLLECTION, id).version


def human(id):
    return Subject.human(id)


@pytest.fixture
def gated(new_target, open_store):
    """The reference's ``gated(name, policy)``: a store of its own holding the fixture
    request admitted under ``policy``. Returns ``(store, id, input_hash)``.
    """

    def make(name, policy):
        store = open_store(new_target(name))
        w = store.create(make_request(approval=policy))
        return store, w.workload_id, w.input_hash

    return make


def test_work_requiring_approval_is_never_claimable_before_an_authorized_decision_commits(
    gated, new_target, open_store
):
    store, id, input_hash = gated("approval-gate", ApprovalPolicy())
    assert store.get(id).state == WorkloadState.AWAITING_APPROVAL
    with pytest.raises(WorkloadError) as refused:
        store.claim(id, "w", CAPABILITIES, now=11, lease_ms=10_000)
    assert refused.value.code == "WORKLOAD_APPROVAL_PENDING"
    # Who may not decide: an agent (model output), a worker, a service under a human-only
    # policy, and the requester itself.
    for decider in [
        Subject.agent("model"),
        Subject.worker("w"),
        Subject.service("svc"),
        Subject.agent("a1"),
    ]:
        with pytest.raises(WorkloadError) as refused:
            store.decide(id, decider, ApprovalOutcome.APPROVED, None, "g", input_hash, now=11)
        assert refused.value.code == "WORKLOAD_APPROVER_NOT_PERMITTED", repr(decider)
    # A decision about other input (a stale review, or another workload's) is refused.
    with pytest.raises(WorkloadError) as stale:
        store.decide(id, human("ada"), ApprovalOutcome.APPROVED, None, "g", "sha256:other", now=11)
    assert stale.value.code == "WORKLOAD_APPROVAL_STALE"
    assert stale.value.details is not None
    assert stale.value.details["input_hash"] == input_hash
    assert store.get(id).state == WorkloadState.AWAITING_APPROVAL, "refusals change nothing"

    decision, replayed = store.decide(
        id, human("ada"), ApprovalOutcome.APPROVED, "reviewed", "g", input_hash, now=12
    )
    assert not replayed
    assert decision.decided_by == human("ada")
    assert store.get(id).state == WorkloadState.READY
    # The same decision again: a replay that commits nothing.
    version = version_of(store, id)
    again, replayed = store.decide(
        id, human("bob"), ApprovalOutcome.APPROVED, None, "g2", input_hash, now=13
    )
    assert replayed
    assert again == decision, "the committed decision is what is returned"
    assert version_of(store, id) == version
    # The opposite decision cannot overwrite it.
    with pytest.raises(WorkloadError) as conflict:
        store.decide(id, human("bob"), ApprovalOutcome.REJECTED, "no", "g2", input_hash, now=13)
    assert conflict.value.code == "WORKLOAD_APPROVAL_DECIDED"
    assert conflict.value.details is not None
    assert conflict.value.details["outcome"] == "approved"
    # Now it runs.
    store.claim(id, "w", CAPABILITIES, now=14, lease_ms=10_000)
    # After a restart the decision and the state are what was committed.
    store.close()
    reopened = open_store(new_target("approval-gate"))
    w = reopened.get(id)
    assert w.state == WorkloadState.CLAIMED
    assert w.approval is not None
    assert w.approval.decision == decision
    order = [e.to for e in w.execution_history]
    assert order == [
        WorkloadState.AWAITING_APPROVAL,
        WorkloadState.READY,
        WorkloadState.CLAIMED,
    ]


def test_rejected_work_never_runs_and_a_rejection_is_final(gated):
    store, id, input_hash = gated("approval-reject", ApprovalPolicy())
    with pytest.raises(WorkloadError) as refused:
        store.decide(id, human("ada"), ApprovalOutcome.REJECTED, None, "g", input_hash, now=11)
    assert refused.value.code == "WORKLOAD_INVALID", "a rejection needs a reason"
    store.decide(
        id, human("ada"), ApprovalOutcome.REJECTED, "wrong vendor", "g", input_hash, now=11
    )
    w = store.get(id)
    assert w.state == WorkloadState.REJECTED
    assert w.execution_history[-1].evidence["reason"] == "wrong vendor"
    with pytest.raises(WorkloadError) as refused:
        store.claim(id, "w", CAPABILITIES, now=12, lease_ms=10_000)
    assert refused.value.code == "WORKLOAD_REJECTED"
    with pytest.raises(WorkloadError) as refused:
        store.retry(id, "op", now=12, reason="again")
    assert refused.value.code == "WORKLOAD_TRANSITION_DENIED"
    with pytest.raises(WorkloadError) as refused:
        store.cancel(id, "op", now=12)
    assert refused.value.code == "WORKLOAD_TRANSITION_DENIED"
    with pytest.raises(WorkloadError) as refused:
        store.decide(id, human("bob"), ApprovalOutcome.APPROVED, None, "g", input_hash, now=12)
    assert refused.value.code == "WORKLOAD_APPROVAL_DECIDED"
    assert not store.get(id).attempts, "nothing ever ran"


def test_a_policy_narrows_approvers_and_excludes_the_requester(gated, new_target, open_store):
    policy = ApprovalPolicy(
        approver_kinds={"service", "human"},
        approvers={Subject.service("finance-bot"), human("ada")},
    )
    store, id, input_hash = gated("approval-policy", policy)
    for decider, code in [
        (human("eve"), "WORKLOAD_APPROVER_NOT_PERMITTED"),
        (Subject.service("other-bot"), "WORKLOAD_APPROVER_NOT_PERMITTED"),
    ]:
        with pytest.raises(WorkloadError) as refused:
            store.decide(id, decider, ApprovalOutcome.APPROVED, None, "g", input_hash, now=11)
        assert refused.value.code == code
    store.decide(
        id,
        Subject.service("finance-bot"),
        ApprovalOutcome.APPROVED,
        None,
        "g",
        input_hash,
        now=11,
    )

    # The requester never decides its own work, even when its kind may.
    store = open_store(new_target("approval-requester"))
    request = make_request("svc")
    request.requested_by = Subject.service("svc")
    snapshot = request.authorization_snapshot
    request.authorization_snapshot = msgspec.structs.replace(
        snapshot,
        grant=msgspec.structs.replace(snapshot.grant, **{"subject": request.requested_by}),
    )
    # A re-signed snapshot is not needed for the store's own checks.
    request.approval = ApprovalPolicy(approver_kinds={"service"}, approvers=set())
    w = store.create(request)
    with pytest.raises(WorkloadError) as refused:
        store.decide(
            w.workload_id,
            Subject.service("svc"),
            ApprovalOutcome.APPROVED,
            None,
            "g",
            w.input_hash,
            now=11,
        )
    assert refused.value.code == "WORKLOAD_APPROVER_NOT_PERMITTED"


def test_an_approval_policy_is_validated_compared_on_replay_and_required_for_a_decision(store):
    for policy in [
        ApprovalPolicy(approver_kinds={"agent"}, approvers=set()),
        ApprovalPolicy(approver_kinds=set(), approvers=set()),
        ApprovalPolicy(approver_kinds={"human"}, approvers={Subject.service("s")}),
    ]:
        request = make_request()
        request.approval = policy
        with pytest.raises(WorkloadError) as refused:
            store.create(request)
        assert refused.value.code == "WORKLOAD_INVALID", repr(policy)
    request = make_request()
    request.timeouts = msgspec.structs.replace(request.timeouts, approval_ms=1_000)
    with pytest.raises(WorkloadError) as refused:
        store.create(request)
    assert refused.value.code == "WORKLOAD_INVALID", "approval_ms needs a policy"
    # Work without a policy behaves exactly as before.
    plain = store.create(make_request())
    assert plain.state == WorkloadState.READY
    assert plain.approval is None
    with pytest.raises(WorkloadError) as refused:
        store.decide(
            plain.workload_id,
            human("ada"),
            ApprovalOutcome.APPROVED,
            None,
            "g",
            plain.input_hash,
            now=11,
        )
    assert refused.value.code == "WORKLOAD_APPROVAL_NOT_REQUIRED"
    # Requiring approval is execution-affecting: the same key cannot add it.
    gated = make_request()
    gated.approval = ApprovalPolicy()
    with pytest.raises(WorkloadError) as refused:
        store.admit(gated)
    assert refused.value.code == "IDEMPOTENCY_KEY_REUSED"
    assert refused.value.details is not None
    assert refused.value.details["fields"] == ["approval"]


def test_work_whose_approval_wait_expired_never_runs_on_a_late_approval(store):
    policy_request = make_request()
    policy_request.approval = ApprovalPolicy()
    policy_request.timeouts = msgspec.structs.replace(policy_request.timeouts, approval_ms=2_000)
    w = store.create(policy_request)
    id, input_hash = w.workload_id, w.input_hash
    # created_at 10: the wait ends at 12.
    assert store.enforce_deadlines(11) == []
    # A late decision is refused as expired, and expires the work.
    with pytest.raises(WorkloadError) as late:
        store.decide(id, human("ada"), ApprovalOutcome.APPROVED, None, "g", input_hash, now=12)
    assert late.value.code == "WORKLOAD_TIMED_OUT"
    assert late.value.details is not None
    assert late.value.details["deadline"] == "approval"
    w = store.get(id)
    assert w.state == WorkloadState.DEAD_LETTER
    assert w.approval is not None
    assert w.approval.decision is None, "no decision was recorded"
    with pytest.raises(WorkloadError) as refused:
        store.decide(id, human("ada"), ApprovalOutcome.APPROVED, None, "g", input_hash, now=13)
    assert refused.value.code == "WORKLOAD_APPROVAL_NOT_ACTIONABLE"
    with pytest.raises(WorkloadError) as refused:
        store.claim(id, "w", CAPABILITIES, now=13, lease_ms=10_000)
    assert refused.value.code == "WORKLOAD_NOT_READY"
    # An operator re-arm does not stand in for approval: it waits again.
    store.retry(id, "op", now=14, reason="ask finance again")
    assert store.get(id).state == WorkloadState.AWAITING_APPROVAL
    with pytest.raises(WorkloadError) as refused:
        store.claim(id, "w", CAPABILITIES, now=14, lease_ms=10_000)
    assert refused.value.code == "WORKLOAD_APPROVAL_PENDING"
    store.decide(id, human("ada"), ApprovalOutcome.APPROVED, None, "g", input_hash, now=15)
    store.claim(id, "w", CAPABILITIES, now=15, lease_ms=10_000)


def test_approval_stands_across_attempts_and_cancellation_ends_the_wait(gated):
    store, id, input_hash = gated("approval-attempts", ApprovalPolicy())
    store.decide(id, human("ada"), ApprovalOutcome.APPROVED, None, "g", input_hash, now=11)
    claim = store.claim(id, "w", CAPABILITIES, now=11, lease_ms=10_000)
    assert (
        store.fail(
            id, claim.claim_id, "w", claim.fencing_token, "transient_connection", "x", now=12
        )
        == WorkloadState.READY
    )
    # The retried attempt does not need a second approval.
    next_at = store.get(id).next_attempt_at
    assert next_at is not None
    store.claim(id, "w", CAPABILITIES, now=next_at, lease_ms=10_000)

    store, id, input_hash = gated("approval-cancel", ApprovalPolicy())
    assert store.cancel(id, "requester", now=11) == WorkloadState.CANCELLED
    with pytest.raises(WorkloadError) as refused:
        store.decide(id, human("ada"), ApprovalOutcome.APPROVED, None, "g", input_hash, now=12)
    assert refused.value.code == "WORKLOAD_APPROVAL_NOT_ACTIONABLE"


def run_concurrently(*targets, timeout: float = 60.0):
    """Run each target on its own thread, all released at once by a barrier.

    An exception raised on any thread (an assertion included) is re-raised here, in the
    test's thread, so it fails the test.
    """
    barrier = threading.Barrier(len(targets), timeout=timeout)
    errors: list[BaseException] = []

    def runner(target):
        try:
            barrier.wait()
            target()
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=runner, args=(t,), daemon=True) for t in targets]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout)
        assert not thread.is_alive(), "a thread did not finish"
    if errors:
        raise errors[0]


ACCEPTABLE_CLAIM_REFUSALS = {
    "WORKLOAD_APPROVAL_PENDING",
    "WORKLOAD_NOT_READY",
    "WORKLOAD_CONFLICT",
}


def test_concurrent_approval_and_claim_never_claim_unapproved_work(new_target, open_store):
    for round in range(20):
        target = new_target(f"approval-race-{round}")
        seed = open_store(target)
        w = seed.create(make_request(approval=ApprovalPolicy()))
        id, input_hash = w.workload_id, w.input_hash
        approver = open_store(target)
        claimers = [open_store(target), open_store(target)]

        def approve(approver=approver, id=id, input_hash=input_hash):
            try:
                approver.decide(
                    id, human("ada"), ApprovalOutcome.APPROVED, None, "g", input_hash, now=11
                )
            except WorkloadError:
                pass  # the reference ignores the decision's outcome

        def claim_loop(claimer, n, id=id):
            def loop():
                for _ in range(50):
                    try:
                        claimer.claim(id, f"w{n}", CAPABILITIES, now=12, lease_ms=10_000)
                        return
                    except WorkloadError as error:
                        assert error.code in ACCEPTABLE_CLAIM_REFUSALS, error.code

            return loop

        run_concurrently(approve, *(claim_loop(c, n) for n, c in enumerate(claimers)))
        # Each round's stores are closed with it: twenty rounds of open stores would hold
        # a hundred connections, PostgreSQL's default max_connections.
        for opened in (seed, approver, *claimers):
            opened.close()

        committed = open_store(target).get(id)
        # Whatever interleaving happened: if any attempt exists, the approval was committed
        # before it, and at most one claim landed.
        assert len(committed.attempts) <= 1, f"round {round}"
        if committed.attempts:
            order = [e.to for e in committed.execution_history]
            ready = order.index(WorkloadState.READY)
            claimed = order.index(WorkloadState.CLAIMED)
            assert ready < claimed, f"round {round}: {order}"
            assert committed.approval is not None
            assert committed.approval.approved()
