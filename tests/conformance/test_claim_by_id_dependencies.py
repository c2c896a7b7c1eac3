"""A claim by id waits for dependencies as the scheduler does.

The reference checks dependencies only when its scheduler picks work, so a claim naming
the dependent directly could run it ahead of a dependency still held for approval: the
approval gate sidestepped through anything that depends on the gated work. feltdb refuses
such a claim with ``WORKLOAD_NOT_YET_ELIGIBLE``, after the approval and ``not_before``
checks and before the capability check.
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
    WorkloadState,
)


def _gate_and_deploy(store, **deploy_fields):
    """``gate`` held for approval, and ``deploy`` waiting for it to succeed."""
    gate = store.create(make_request(idempotency_key="gate", approval=ApprovalPolicy()))
    fields = {
        "idempotency_key": "deploy",
        "dependencies": [
            WorkloadDependency(workload_id=gate.workload_id, required_state=WorkloadState.SUCCEEDED)
        ],
        **deploy_fields,
    }
    deploy = store.create(make_request(**fields))
    return gate, deploy


def test_a_claim_by_id_refuses_work_whose_dependency_waits_for_approval(store):
    gate, deploy = _gate_and_deploy(store)
    assert store.get(gate.workload_id).state is WorkloadState.AWAITING_APPROVAL
    before = store.get(deploy.workload_id)

    with pytest.raises(WorkloadError) as refused:
        store.claim(deploy.workload_id, "w", CAPABILITIES, now=11, lease_ms=10_000)
    assert refused.value.code == "WORKLOAD_NOT_YET_ELIGIBLE"
    assert gate.workload_id in refused.value.message
    assert refused.value.details == {
        "waits_for": gate.workload_id,
        "required_state": "SUCCEEDED",
    }
    after = store.get(deploy.workload_id)
    assert after.state is WorkloadState.READY
    assert after.fencing_token == before.fencing_token, "a refusal changes nothing"
    # Neither does the scheduler offer it, alone or in a batch.
    assert store.claim_next("t", "app", "w", CAPABILITIES, now=11) is None
    assert store.claim_many("t", "app", "w", CAPABILITIES, 10, now=11, start=True) == []

    # Once the gate is approved, run and succeeded, the dependent is claimable by id.
    store.decide(
        gate.workload_id,
        Subject.human("ada"),
        ApprovalOutcome.APPROVED,
        None,
        "g",
        gate.input_hash,
        now=12,
    )
    with pytest.raises(WorkloadError) as still:
        store.claim(deploy.workload_id, "w", CAPABILITIES, now=12, lease_ms=10_000)
    assert still.value.code == "WORKLOAD_NOT_YET_ELIGIBLE", "READY is not SUCCEEDED"
    held = store.claim(gate.workload_id, "w", CAPABILITIES, now=12, lease_ms=10_000)
    store.start(gate.workload_id, held.claim_id, "w", held.fencing_token, now=12)
    store.complete(
        gate.workload_id, held.claim_id, "w", held.fencing_token, "gate-r", {}, [], 1, now=13
    )
    claim = store.claim(deploy.workload_id, "w", CAPABILITIES, now=14, lease_ms=10_000)
    assert claim.workload_id == deploy.workload_id
    assert store.get(deploy.workload_id).state is WorkloadState.CLAIMED


def test_the_dependency_is_checked_after_not_before_and_before_capabilities(store):
    gate, early = _gate_and_deploy(store, not_before=500)
    with pytest.raises(WorkloadError) as refused:
        store.claim(early.workload_id, "w", CAPABILITIES, now=11, lease_ms=10_000)
    assert refused.value.code == "WORKLOAD_NOT_YET_ELIGIBLE"
    assert refused.value.details == {"eligible_at": 500}, "not_before is named first"

    _, late = _gate_and_deploy(store, idempotency_key="deploy-2")
    with pytest.raises(WorkloadError) as lacking:
        store.claim(late.workload_id, "w", frozenset({"other"}), now=11, lease_ms=10_000)
    assert lacking.value.code == "WORKLOAD_NOT_YET_ELIGIBLE", "dependencies come first"
    assert lacking.value.details == {
        "waits_for": gate.workload_id,
        "required_state": "SUCCEEDED",
    }


def test_a_dependency_changed_after_it_was_read_refuses_the_claim(store):
    # "cleanup" runs once "job" is dead-lettered. The claim reads job DEAD_LETTER; before
    # the claim commits, an operator retries job (READY again). The claim must not commit
    # on what it read: it is decided again, and refused.
    job = store.create(make_request(idempotency_key="job", retry_policy={"max_attempts": 1}))
    claim = store.claim(job.workload_id, "w", CAPABILITIES, now=11, lease_ms=10_000)
    store.start(job.workload_id, claim.claim_id, "w", claim.fencing_token, now=12)
    store.fail(job.workload_id, claim.claim_id, "w", claim.fencing_token, "permanent", "x", now=13)
    ended = store.get(job.workload_id).state
    assert ended is WorkloadState.DEAD_LETTER
    cleanup = store.create(
        make_request(
            idempotency_key="cleanup",
            dependencies=[WorkloadDependency(workload_id=job.workload_id, required_state=ended)],
        )
    )
    read_dependencies = store.unit.dependencies
    raced: list[str] = []

    def retried_meanwhile(workload):
        read = read_dependencies(workload)
        if not raced:
            raced.append("retried")
            store.retry(job.workload_id, "human:ops", now=14, reason="try again")
        return read

    store.unit.dependencies = retried_meanwhile
    with pytest.raises(WorkloadError) as refused:
        store.claim(cleanup.workload_id, "w", CAPABILITIES, now=15, lease_ms=10_000)
    assert raced == ["retried"]
    assert refused.value.code == "WORKLOAD_NOT_YET_ELIGIBLE"
    assert refused.value.details == {"waits_for": job.workload_id, "required_state": ended.value}
    assert store.get(cleanup.workload_id).state is WorkloadState.READY
    assert store.get(job.workload_id).state is WorkloadState.READY
