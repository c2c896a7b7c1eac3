"""Who did what is recorded as ``KIND:ID`` (issue 24, point 11): a human and a service may
share an id, so a bare id in the audit could not tell ``human:ada`` from ``service:ada``.
The reference's bare-id fields stay as it wrote them; a session id, which only the
requester vouches for, is marked unverified.
"""

from __future__ import annotations

import msgspec
from support.factories import SIGNER, make_request

from feltdb import ApprovalOutcome, ApprovalPolicy, Subject


def _audits(store):
    return [t.audit for t in store.db.committed_transactions_after(0) if t.audit]


def _as(subject: Subject, key: str):
    """The fixture request, made by ``subject`` under a grant of its own."""
    grant = make_request().authorization_snapshot.grant
    signed = SIGNER.sign(msgspec.structs.replace(grant, subject=subject))
    return make_request(idempotency_key=key, requested_by=subject, authorization_snapshot=signed)


def test_the_audit_names_each_subject_with_its_kind(store):
    human = store.create(_as(Subject.human("ada"), "h"))
    service = store.create(_as(Subject.service("ada"), "s"))
    by_work = {a["work_id"]: a for a in _audits(store)}
    assert by_work[human.workload_id]["subject"] == "human:ada"
    assert by_work[service.workload_id]["subject"] == "service:ada"
    assert by_work[service.workload_id]["principal_id"] == "service:ada"
    record = by_work[human.workload_id]
    assert (record["delegator"], record["delegator_id"]) == ("human:h", "h")
    assert record["agent_id"] is None
    assert (record["session_id"], record["session_verified"]) == ("session-1", False)
    # The filter a reader of the audit uses tells them apart.
    mine, _ = store.audit.before("t", "app", subject="service:ada")
    assert [t.audit["work_id"] for t in mine] == [service.workload_id]


def test_an_agents_record_keeps_the_references_agent_id(store):
    w = store.create(make_request(session_id=None))
    [record] = _audits(store)
    assert record["work_id"] == w.workload_id
    assert (record["subject"], record["agent_id"]) == ("agent:a1", "a1")
    assert (record["session_id"], record["session_verified"]) == (None, None)


def test_a_decision_names_its_decider_with_its_kind(store):
    w = store.create(make_request(approval=ApprovalPolicy()))
    store.decide(
        w.workload_id, Subject.human("ada"), ApprovalOutcome.APPROVED, None, "g",
        w.input_hash, now=11,
    )  # fmt: skip
    event = store.get(w.workload_id).execution_history[-1]
    assert event.actor == "human:ada"
    assert event.evidence["decided_by"] == "human:ada"
    assert event.evidence["decider_kind"] == "human"
    assert _audits(store)[-1]["actor"] == "human:ada"
