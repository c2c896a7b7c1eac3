"""The routes' authorization rules, as pure functions of a grant and a workload
(feltdb.auth.policy): who may read work, and what a worker's claim_next may pick."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import msgspec
import pytest
from support.factories import make_request

from feltdb import Grant, GrantConstraints, ResourceScope, ResourceScopeKind, Subject
from feltdb.auth.policy import (
    APPROVE,
    AUDIT,
    CLAIM,
    READ,
    REVOKE,
    authorize_audit,
    authorize_read,
    authorize_revoke,
    claim_filter,
    may_read,
)
from feltdb.errors import WorkloadError
from feltdb.records.workload import Workload, WorkloadClaim
from feltdb.work.admission import new_workload

WORKER = Subject.worker("w1")


def grant(
    capabilities: Iterable[str], *, tenant: str = "t", subject: Subject = WORKER, **limits: Any
) -> Grant:
    return Grant(
        id="g1",
        issuer=Subject.human("h"),
        subject=subject,
        tenant_id=tenant,
        application_id="app",
        capabilities=frozenset(capabilities),
        resources=[ResourceScope(kind=ResourceScopeKind.WORKLOAD, uri="flow://app/workloads/*")],
        issued_at=1,
        expires_at=9999,
        constraints=GrantConstraints(**limits),
    )


def workload(**overrides: Any) -> Workload:
    return new_workload(make_request(**overrides), "wl-1")


def held_by(w: Workload, worker: str) -> Workload:
    held = WorkloadClaim(
        claim_id="c1", workload_id=w.workload_id, worker_id=worker, lease_id="l1",
        fencing_token=1, capability_snapshot=frozenset(), claimed_at=1, expires_at=100,
        last_heartbeat=1,
    )  # fmt: skip
    return msgspec.structs.replace(w, current_claim=held)


def test_read_is_the_capability_or_the_claim_or_the_approval():
    plain = workload()
    assert may_read(grant([READ]), plain)
    assert not may_read(grant([CLAIM, APPROVE]), plain)
    assert may_read(grant([CLAIM]), held_by(workload(), "worker:w1"))
    assert not may_read(grant([CLAIM]), held_by(workload(), "worker:w2"))
    assert not may_read(grant([APPROVE]), held_by(workload(), "worker:w1"))
    assert may_read(grant([APPROVE]), workload(approval={}))


def test_no_rule_reaches_outside_the_grants_scope():
    assert not may_read(grant([READ], tenant="other"), workload())
    assert not may_read(grant([READ], environments={"staging"}), workload())
    assert not may_read(grant([CLAIM], definitions={"other"}), held_by(workload(), "worker:w1"))


def test_a_grant_without_read_is_refused_the_capability_found_or_not():
    for found in (None, workload()):
        with pytest.raises(WorkloadError) as refused:
            authorize_read(grant([CLAIM]), "wl-1", found)
        assert refused.value.code == "WORKLOAD_UNAUTHORIZED"
        assert refused.value.details == {"missing": "capability"}
    authorize_read(grant([READ]), "wl-1", None)  # its "not found" is the caller's to answer
    authorize_read(grant([CLAIM]), "wl-1", held_by(workload(), "worker:w1"))


def test_a_constrained_grant_may_neither_read_the_audit_nor_revoke():
    for check, capability in ((authorize_audit, AUDIT), (authorize_revoke, REVOKE)):
        check(grant([capability]))
        with pytest.raises(WorkloadError) as refused:
            check(grant([capability], environments={"production"}))
        assert refused.value.details == {"missing": "unconstrained grant"}


def test_a_workers_claim_filter_narrows_its_grant_and_never_widens_it():
    narrowed = grant([CLAIM, "email:send"], definitions={"send", "bill"}, environments={"p"})
    eligible = claim_filter(narrowed, ["email:send", "sms:send"], ["send", "other"])
    assert eligible.capabilities == {"email:send"}
    assert eligible.definitions == {"send"}
    assert eligible.environments == {"p"}
    unconstrained = claim_filter(grant([CLAIM]))
    assert unconstrained.capabilities == {CLAIM}
    assert unconstrained.definitions is None and unconstrained.environments is None
    with pytest.raises(WorkloadError):
        claim_filter(grant([READ]))
