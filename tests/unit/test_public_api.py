"""The public surface is the list docs/api.md promises, and the names behave as it says."""

from __future__ import annotations

import hashlib
import importlib
import json
import types

import pytest
from support.factories import CAPABILITIES, make_request

import feltdb
import feltdb.auth
from feltdb import (
    ApprovalOutcome,
    ApprovalPolicy,
    AttemptStatus,
    BackoffPolicy,
    CreateWorkload,
    Grant,
    Subject,
    WorkloadEvent,
    WorkloadRetryPolicy,
    WorkloadState,
)
from feltdb.records.codec import stored_document

# Taken literally from docs/api.md: the store and its opener, the error, every type of the Types
# section and of its Records list, the constants and functions, and the authorization types.
API_NAMES = {
    # the store, the storage layer alone, the error
    "WorkloadStore",
    "open_database",
    "WorkloadError",
    # enumerations (Types table)
    "WorkloadState",
    "AttemptStatus",
    "BackoffPolicy",
    "ApprovalOutcome",
    # records
    "CreateWorkload",
    "Workload",
    "WorkloadRetryPolicy",
    "WorkloadTimeouts",
    "WorkloadDependency",
    "ApprovalPolicy",
    "ApprovalDecision",
    "WorkloadApproval",
    "WorkloadClaim",
    "WorkloadAttempt",
    "WorkloadCheckpoint",
    "WorkloadResult",
    "WorkloadExecutionContext",
    "WorkloadEvent",
    "CommittedTransaction",
    # typed definitions ("Typed definitions")
    "Definition",
    # batch items ("Routing, scope and batches")
    "Completion",
    "Heartbeat",
    # retention ("Retention")
    "RetentionPolicy",
    # constants and functions
    "WORKLOAD_CONTRACT_VERSION",
    "DEADLINE_CONTRACT_VERSION",
    "DURABLE_WORK_COLLECTION",
    "can_transition",
    "deadline_breach",
    # authorization
    "Subject",
    "Grant",
    "ResourceScope",
    "ResourceScopeKind",
    "GrantConstraints",
    "GrantStatus",
    "SignedGrant",
    "GrantSigner",
}

AUTH_NAMES = {
    "Subject",
    "Grant",
    "ResourceScope",
    "ResourceScopeKind",
    "GrantConstraints",
    "GrantStatus",
    "SignedGrant",
    "GrantSigner",
}


# ------------------------------------------------------------------ the list


def test_all_is_exactly_the_names_api_md_promises():
    assert set(feltdb.__all__) == API_NAMES
    assert len(feltdb.__all__) == len(set(feltdb.__all__))


@pytest.mark.parametrize("name", sorted(API_NAMES))
def test_each_promised_name_is_importable_from_feltdb(name):
    namespace: dict[str, object] = {}
    exec(f"from feltdb import {name}", namespace)
    assert namespace[name] is getattr(feltdb, name)


def test_nothing_else_public_leaks_out_of_feltdb():
    public = {
        name
        for name, value in vars(feltdb).items()
        if not name.startswith("_") and not isinstance(value, types.ModuleType)
    }
    assert public == API_NAMES


def test_the_authorization_names_are_importable_from_feltdb_auth():
    assert AUTH_NAMES <= set(feltdb.auth.__all__)
    auth = importlib.import_module("feltdb.auth")
    for name in AUTH_NAMES:
        assert getattr(auth, name) is getattr(feltdb, name)


def test_the_constants_have_the_references_values():
    assert feltdb.WORKLOAD_CONTRACT_VERSION == 1
    assert feltdb.DEADLINE_CONTRACT_VERSION == 2
    assert feltdb.DURABLE_WORK_COLLECTION == "system_durable_work"


# ------------------------------------------------------------------ enumerations


@pytest.mark.parametrize(
    ("enum", "values"),
    [
        (
            WorkloadState,
            {
                "CREATED": "CREATED",
                "READY": "READY",
                "CLAIMED": "CLAIMED",
                "RUNNING": "RUNNING",
                "CHECKPOINTED": "CHECKPOINTED",
                "RECOVERING": "RECOVERING",
                "CANCELLATION_REQUESTED": "CANCELLATION_REQUESTED",
                "SUCCEEDED": "SUCCEEDED",
                "FAILED": "FAILED",
                "CANCELLED": "CANCELLED",
                "TIMED_OUT": "TIMED_OUT",
                "DEAD_LETTER": "DEAD_LETTER",
                "AWAITING_APPROVAL": "AWAITING_APPROVAL",
                "REJECTED": "REJECTED",
            },
        ),
        (
            AttemptStatus,
            {
                "CLAIMED": "CLAIMED",
                "RUNNING": "RUNNING",
                "CHECKPOINTED": "CHECKPOINTED",
                "SUCCEEDED": "SUCCEEDED",
                "FAILED": "FAILED",
                "TIMED_OUT": "TIMED_OUT",
                "CANCELLED": "CANCELLED",
                "WORKER_LOST": "WORKER_LOST",
            },
        ),
        (BackoffPolicy, {"FIXED": "fixed", "EXPONENTIAL": "exponential"}),
        (ApprovalOutcome, {"APPROVED": "approved", "REJECTED": "rejected"}),
    ],
    ids=lambda value: getattr(value, "__name__", ""),
)
def test_enumeration_members_have_the_reference_spellings(enum, values):
    assert {member.name: member.value for member in enum} == values
    for member in enum:
        assert isinstance(member, str)
        assert member == values[member.name]
        assert json.dumps(member) == json.dumps(values[member.name])


# ------------------------------------------------------------------ WorkloadEvent


def test_a_workload_event_serializes_from_state_as_from():
    event = WorkloadEvent(
        sequence=2,
        event_type="workload.claimed",
        from_state=WorkloadState.READY,
        to=WorkloadState.CLAIMED,
        actor="w1",
        at=11,
    )
    document = event.to_json()
    assert document["from"] == "READY"
    assert "from_state" not in document
    assert json.loads(stored_document(event)[1])["from"] == "READY"


def test_a_workload_event_reads_from_as_from_state():
    event = WorkloadEvent.parse(
        {
            "sequence": 1,
            "event_type": "workload.ready",
            "from": "CREATED",
            "to": "READY",
            "actor": "feltdb",
            "at": 10,
            "evidence": {},
        }
    )
    assert event.from_state is WorkloadState.CREATED


def test_a_committed_history_serializes_every_event_with_from(store):
    w, _ = store.admit(make_request())
    document = store.db.get_row(feltdb.DURABLE_WORK_COLLECTION, w.workload_id).document
    assert [event["from"] for event in document["execution_history"]] == ["CREATED"]
    assert all("from_state" not in event for event in document["execution_history"])


# ------------------------------------------------------------------ Subject


def test_subjects_are_equal_and_hash_by_kind_and_id():
    assert Subject.human("ada") == Subject(kind="human", id="ada")
    assert hash(Subject.human("ada")) == hash(Subject(kind="human", id="ada"))
    assert Subject.human("ada") != Subject.agent("ada")
    assert len({Subject.human("ada"), Subject.human("ada"), Subject.agent("ada")}) == 2


def test_subjects_are_ordered_by_kind_then_id():
    subjects = [Subject.human("a"), Subject.agent("z"), Subject.agent("b"), Subject.worker("a")]
    assert sorted(subjects) == [
        Subject.agent("b"),
        Subject.agent("z"),
        Subject.human("a"),
        Subject.worker("a"),
    ]
    assert Subject.agent("z") < Subject.human("a")
    assert Subject.human("a") <= Subject.human("a")


@pytest.mark.parametrize(
    ("subject", "kind"),
    [
        (Subject.human("x"), "human"),
        (Subject.agent("x"), "agent"),
        (Subject.service("x"), "service"),
        (Subject.worker("x"), "worker"),
        (Subject.workload("x"), "workload"),
        (Subject.connection("x"), "connection"),
    ],
)
def test_each_subject_constructor_makes_its_kind(subject, kind):
    assert subject.kind == kind
    assert subject.id == "x"


def test_a_subject_serializes_as_kind_and_id():
    assert Subject.human("ada").to_json() == {"kind": "human", "id": "ada"}
    assert json.loads(stored_document(Subject.human("ada"))[1]) == {"kind": "human", "id": "ada"}


def test_a_subject_is_immutable():
    subject = Subject.human("ada")
    with pytest.raises(Exception):  # noqa: B017 - pydantic's frozen-instance error
        subject.id = "bob"
    assert subject.id == "ada"


# ------------------------------------------------------------------ sets


def test_a_request_accepts_any_iterable_for_its_sets():
    request = make_request(
        capability_snapshot=(c for c in ["email:send", "email:send", "crm:read"]),
        connection_scopes=["crm", "mail"],
    )
    assert request.capability_snapshot == {"email:send", "crm:read"}
    assert request.connection_scopes == frozenset({"mail", "crm"})


def test_sets_compare_as_sets_whatever_the_order():
    one = make_request(capability_snapshot=["b", "a"], connection_scopes=("y", "x"))
    two = make_request(capability_snapshot={"a", "b"}, connection_scopes=iter(["x", "y", "x"]))
    assert one == two
    assert one.to_json()["capability_snapshot"] == ["a", "b"]  # serialized sorted


def test_policy_sets_accept_any_iterable():
    retry = WorkloadRetryPolicy(retry_on=(kind for kind in ["timeout", "timeout"]))
    assert retry.retry_on == {"timeout"}
    approval = ApprovalPolicy(
        approver_kinds=["service", "human"],
        approvers=(s for s in [Subject.human("b"), Subject.human("a"), Subject.human("b")]),
    )
    assert approval.approver_kinds == {"human", "service"}
    assert approval.approvers == {Subject.human("a"), Subject.human("b")}
    assert approval.to_json()["approvers"] == [
        {"kind": "human", "id": "a"},
        {"kind": "human", "id": "b"},
    ]


def test_grant_capabilities_accept_any_iterable():
    grant = Grant(
        id="g",
        issuer=Subject.human("h"),
        subject=Subject.agent("a1"),
        tenant_id="t",
        application_id="app",
        capabilities=["workload:execute", "workload:execute"],
        issued_at=1,
        expires_at=9999,
    )
    assert grant.capabilities == {"workload:execute"}


def test_a_bare_string_is_not_a_set():
    with pytest.raises(feltdb.WorkloadError):
        make_request(connection_scopes="crm")


def test_create_workload_is_constructed_with_keywords():
    with pytest.raises(TypeError):
        CreateWorkload("t", "app")  # type: ignore[misc]


# ------------------------------------------------------------------ identities


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def canonical(value: object) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def test_the_deterministic_identities_of_api_md(store):
    request = make_request(agent="a1", idempotency_key="one", input={"id": 1, "ü": "é"})
    w, _ = store.admit(request)
    claim = store.claim(w.workload_id, "worker-1", CAPABILITIES, now=11)
    store.start(w.workload_id, claim.claim_id, "worker-1", claim.fencing_token, now=12)
    first = store.checkpoint(
        w.workload_id, claim.claim_id, "worker-1", claim.fencing_token, {"b": 2, "a": [1]}, now=13
    )
    second = store.checkpoint(
        w.workload_id, claim.claim_id, "worker-1", claim.fencing_token, {"step": 2}, now=14
    )
    committed = store.get(w.workload_id)

    scope = canonical(["t", "app", "agent", "a1", "one"])
    assert scope == '["t","app","agent","a1","one"]'
    workload_id = "workload_" + sha256(scope)[:24]
    assert w.workload_id == workload_id
    assert claim.claim_id == "claim_" + sha256(f"{workload_id}:1:worker-1")[:20]
    assert claim.lease_id == "lease_1"
    assert committed.attempts[-1].attempt_id == f"attempt_{workload_id}_1"
    assert first.checkpoint_id == f"checkpoint_{workload_id}_1"
    assert second.checkpoint_id == f"checkpoint_{workload_id}_2"
    assert w.input_hash == sha256('{"id":1,"ü":"é"}')
    assert first.state_hash == sha256('{"a":[1],"b":2}')


def test_a_second_claim_has_the_next_token_and_attempt(store):
    w, _ = store.admit(make_request())
    first = store.claim(w.workload_id, "worker-1", CAPABILITIES, now=11)
    store.fail(
        w.workload_id,
        first.claim_id,
        "worker-1",
        first.fencing_token,
        "transient_connection",
        "x",
        now=11,
    )
    second = store.claim(w.workload_id, "worker-2", CAPABILITIES, now=20)
    assert second.fencing_token == 2
    assert second.lease_id == "lease_2"
    assert second.claim_id == "claim_" + sha256(f"{w.workload_id}:2:worker-2")[:20]
    assert store.get(w.workload_id).attempts[-1].attempt_id == f"attempt_{w.workload_id}_2"


def test_the_workload_id_depends_on_the_requester(store):
    mine, _ = store.admit(make_request(agent="a1"))
    theirs, _ = store.admit(make_request(agent="a2"))
    assert mine.workload_id != theirs.workload_id
    assert (
        theirs.workload_id
        == "workload_" + sha256(canonical(["t", "app", "agent", "a2", "one"]))[:24]
    )


def test_no_choice_of_requester_id_and_key_makes_two_scopes_coincide(store):
    # Joined with ":" these two would both be "t:app:agent:a1:x:y"; as JSON arrays they differ.
    one, created_one = store.admit(make_request(agent="a1:x", idempotency_key="y"))
    two, created_two = store.admit(make_request(agent="a1", idempotency_key="x:y"))
    assert created_one and created_two
    assert one.workload_id != two.workload_id


def test_the_output_hash_is_the_canonical_hash(store):
    w, _ = store.admit(make_request())
    claim = store.claim(w.workload_id, "worker-1", CAPABILITIES, now=11)
    store.start(w.workload_id, claim.claim_id, "worker-1", claim.fencing_token, now=12)
    result = store.complete(
        w.workload_id,
        claim.claim_id,
        "worker-1",
        claim.fencing_token,
        "r1",
        {"z": 1, "a": None},
        now=13,
    )
    assert result.output_hash == sha256('{"a":null,"z":1}')


def test_every_public_name_is_exported_from_where_it_is_defined():
    import ast
    import inspect

    import feltdb

    assert sorted(feltdb._EXPORTS) == sorted(feltdb.__all__)
    for name, module in feltdb._EXPORTS.items():
        assert getattr(feltdb, name) is getattr(importlib.import_module(module), name)
    # What the type checker is shown (the TYPE_CHECKING imports) is what runs.
    shown = {
        alias.name: node.module
        for node in ast.walk(ast.parse(inspect.getsource(feltdb)))
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    }
    assert shown == feltdb._EXPORTS


def test_importing_feltdb_or_asking_its_version_loads_nothing_of_the_authority():
    import subprocess
    import sys

    probe = (
        "import sys\n"
        "sys.argv = ['feltdb', '--version']\n"
        "from feltdb.cli import main\n"
        "main()\n"
        "loaded = [m for m in ('pydantic', 'typer', 'rich', 'feltdb.work.store', 'sqlite3')"
        " if m in sys.modules]\n"
        "print(loaded)\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.splitlines() == [f"feltdb {__import__('feltdb').__version__}", "[]"]


def test_every_name_of_feltdb_auth_is_exported_from_where_it_is_defined():
    import ast
    import inspect

    import feltdb.auth

    assert sorted(feltdb.auth._EXPORTS) == sorted(feltdb.auth.__all__)
    for name, module in feltdb.auth._EXPORTS.items():
        assert getattr(feltdb.auth, name) is getattr(importlib.import_module(module), name)
    shown = {
        alias.name: node.module
        for node in ast.walk(ast.parse(inspect.getsource(feltdb.auth)))
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    }
    assert shown == feltdb.auth._EXPORTS
