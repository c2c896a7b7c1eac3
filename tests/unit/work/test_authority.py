"""The authority as one caller may use it (feltdb.work.authority): every capability rule,
the scope and the actor composed once, for the API, the dashboard and the local client."""

from __future__ import annotations

import msgspec
import pytest
from support.factories import CAPABILITIES, make_request

from feltdb import Subject, WorkloadError, WorkloadState, WorkloadStore
from feltdb.auth.grants import GrantConstraints, new_grant_id
from feltdb.auth.policy import (
    ALL_CAPABILITIES,
    APPROVE,
    AUDIT,
    CANCEL,
    CLAIM,
    OPERATE,
    READ,
    REVOKE,
    SUBMIT,
    application_grant,
    worker_name,
)
from feltdb.auth.scope import Scope
from feltdb.work.authority import Authority

NOW = 100
MINTED = new_grant_id()


@pytest.fixture
def store(tmp_path):
    with WorkloadStore.open(tmp_path / "work.db") as opened:
        yield opened


def grant_of(subject, capabilities, application="app", **constraints):
    grant = application_grant(
        subject, "t", application, capabilities, issued_at=1, expires_at=10_000
    )
    if constraints:
        grant = msgspec.structs.replace(grant, constraints=GrantConstraints(**constraints))
    return grant


def admitted(store, key="k", **overrides):
    workload, _ = store.admit(make_request(idempotency_key=key, created_at=10, **overrides))
    return workload


def refusal(call) -> WorkloadError:
    with pytest.raises(WorkloadError) as raised:
        call()
    return raised.value


def test_a_grant_without_the_capability_is_refused_and_nothing_is_committed(store):
    workload = admitted(store)
    reader = Authority.of_grant(store, grant_of(Subject.human("ada"), {READ}))
    before = store.db.current_revision()
    assert refusal(lambda: reader.cancel(workload.workload_id, NOW)).code == "WORKLOAD_UNAUTHORIZED"
    assert refusal(lambda: reader.retry(workload.workload_id, "r", NOW)).code == (
        "WORKLOAD_UNAUTHORIZED"
    )
    assert store.db.current_revision() == before
    assert store.get(workload.workload_id).state is WorkloadState.READY


def test_an_operator_acts_under_its_own_subject_and_only_within_its_scope(store):
    workload = admitted(store)
    operator = Authority.of_grant(store, grant_of(Subject.human("ops"), ALL_CAPABILITIES))
    assert operator.cancel(workload.workload_id, NOW) is WorkloadState.CANCELLED
    assert store.get(workload.workload_id).execution_history[-1].actor == "human:ops"
    elsewhere = Authority.of_grant(
        store, grant_of(Subject.human("ops"), ALL_CAPABILITIES, application="other")
    )
    other = admitted(store, key="k2")
    assert refusal(lambda: elsewhere.cancel(other.workload_id, NOW)).code == ("WORKLOAD_NOT_FOUND")


def test_a_grant_that_may_not_read_is_never_told_that_work_is_missing(store):
    blind = Authority.of_grant(store, grant_of(Subject.human("ada"), {OPERATE}))
    assert refusal(lambda: blind.read("workload_missing")).code == "WORKLOAD_UNAUTHORIZED"
    reader = Authority.of_grant(store, grant_of(Subject.human("ada"), {READ}))
    assert refusal(lambda: reader.read("workload_missing")).code == "WORKLOAD_NOT_FOUND"


def test_a_worker_is_recorded_by_the_worker_name_of_its_subject(store):
    workload = admitted(store)
    bot = Subject.worker("w1")
    worker = Authority.of_grant(store, grant_of(bot, {CLAIM, *CAPABILITIES}))
    claim = worker.claim(workload.workload_id, CAPABILITIES, NOW, 60_000)
    assert claim.worker_id == worker_name(bot)
    worker.start(workload.workload_id, claim.claim_id, claim.fencing_token, NOW)
    result = worker.complete(
        workload.workload_id, claim.claim_id, claim.fencing_token, ("r1", {"ok": 1}, (), 1), NOW
    )
    assert result.produced_by == worker_name(bot)
    approver = Authority.of_grant(store, grant_of(Subject.human("ada"), {APPROVE}))
    assert refusal(
        lambda: approver.claim(admitted(store, key="k3").workload_id, CAPABILITIES, NOW)
    ).code == ("WORKLOAD_UNAUTHORIZED")


def test_the_whole_application_is_refused_to_a_narrowed_caller_of_either_kind(store):
    narrowed = grant_of(Subject.human("ada"), ALL_CAPABILITIES, environments=["production"])
    for caller in (
        Authority.of_grant(store, narrowed),
        Authority.holding(store, Subject.human("ada"), Scope.of_grant(narrowed)),
    ):
        for call in (caller.audit_reader, lambda c=caller: c.revoke(MINTED, NOW)):
            refused = refusal(call)
            assert refused.code == "WORKLOAD_UNAUTHORIZED"
            assert refused.details == {"missing": "unconstrained grant"}
    whole = Authority.holding(store, Subject.human("ada"), Scope("t", "app"))
    whole.audit_reader()
    assert whole.revoke(MINTED, NOW) is True


def test_an_id_feltdb_never_minted_is_revoked_only_with_force(store):
    whole = Authority.holding(store, Subject.human("ada"), Scope("t", "app"))
    for typo in ("grant_x", MINTED[:-1], MINTED[:-1] + ("0" if MINTED[-1] != "0" else "1")):
        refused = refusal(lambda typo=typo: whole.revoke(typo, NOW))
        assert (refused.code, refused.details) == ("WORKLOAD_NOT_FOUND", {"grant_id": typo})
        assert "was minted by feltdb" in refused.message
    assert whole.revocations() == []  # nothing was written
    assert whole.revoke("grant_x", NOW, force=True) is True
    assert [entry["grant_id"] for entry in whole.revocations()] == ["grant_x"]


def test_the_holder_checks_no_capability_but_keeps_no_decision_without_a_grant(store):
    workload = admitted(store, approval={"approver_kinds": ["human"]})
    holder = Authority.holding(store, Subject.human("ada"), Scope("t", "app"))
    refused = refusal(
        lambda: holder.decide(workload.workload_id, "approved", None, workload.input_hash, NOW)
    )
    assert refused.code == "WORKLOAD_UNAUTHORIZED"
    assert refused.details == {"missing": "grant"}
    evidence = grant_of(Subject.human("ada"), set())  # holds no capability at all
    keeping = Authority.holding(store, Subject.human("ada"), Scope("t", "app"), evidence)
    decision, replayed = keeping.decide(
        workload.workload_id, "approved", None, workload.input_hash, NOW
    )
    assert (decision.grant_id, replayed) == (evidence.id, False)
    assert store.get(workload.workload_id).state is WorkloadState.READY


RULES = {
    "cancel": (CANCEL, lambda a, w: a.cancel(w.workload_id, NOW)),
    "retry": (OPERATE, lambda a, w: a.retry(w.workload_id, "why", NOW)),
    "decide": (APPROVE, lambda a, w: a.decide(w.workload_id, "approved", None, w.input_hash, NOW)),
    "approvals": (APPROVE, lambda a, w: a.approvals(None, 10)),
    "dead_letters": (OPERATE, lambda a, w: a.dead_letters(None, 10)),
    "workloads": (READ, lambda a, w: a.workloads(None, None, None, 10)),
    "read": (READ, lambda a, w: a.read(w.workload_id)),
    "revocations": (REVOKE, lambda a, w: a.revocations()),
    "revoke": (REVOKE, lambda a, w: a.revoke(MINTED, NOW)),
    "audit_after": (AUDIT, lambda a, w: a.audit_after(0, 10)),
    "as_requester": (SUBMIT, lambda a, w: a.as_requester()),
    "as_worker": (CLAIM, lambda a, w: a.as_worker()),
    "claim": (CLAIM, lambda a, w: a.claim(w.workload_id, CAPABILITIES, NOW)),
}


@pytest.mark.parametrize("operation", sorted(RULES))
def test_each_operation_needs_its_capability_and_refuses_before_it_commits(store, operation):
    capability, call = RULES[operation]
    # Work held for approval, which an approver may read: but for the read's rule itself.
    gated = {} if operation == "read" else {"approval": {"approver_kinds": ["human"]}}
    workload = admitted(store, **gated)
    eve = Subject.human("eve")  # not the requester, whom reading its own work is allowed
    everything = ALL_CAPABILITIES | CAPABILITIES
    lacking = Authority.of_grant(store, grant_of(eve, everything - {capability}))
    before = store.db.current_revision()
    refused = refusal(lambda: call(lacking, workload))
    assert refused.code == "WORKLOAD_UNAUTHORIZED", refused
    assert store.db.current_revision() == before
    allowed = Authority.of_grant(store, grant_of(eve, everything))
    try:
        call(allowed, workload)
    except WorkloadError as other:  # refused for what the work is, never for who asks
        assert other.code != "WORKLOAD_UNAUTHORIZED", other


def test_a_worker_holds_at_most_what_its_grant_holds_whatever_it_says(store):
    workload = admitted(store)  # needs CAPABILITIES
    claimer = Authority.of_grant(store, grant_of(Subject.worker("w1"), {CLAIM}))
    refused = refusal(lambda: claimer.claim(workload.workload_id, CAPABILITIES, NOW))
    assert refused.code == "WORKLOAD_CAPABILITY_DENIED"
    assert refused.details == {"missing": sorted(CAPABILITIES)}
    assert store.get(workload.workload_id).state is WorkloadState.READY


def test_a_checked_authority_without_a_grant_cannot_be_made(store):
    with pytest.raises(ValueError, match="grant"):
        Authority(store, Subject.human("ada"), Scope("t", "app"))
