"""The records: plain structs, validated where input enters, naming what is wrong."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from support.factories import make_request

from feltdb import (
    Grant,
    GrantSigner,
    ResourceScope,
    Subject,
    Workload,
    WorkloadError,
    WorkloadRetryPolicy,
)
from feltdb.auth import GrantStatus, SubjectKind
from feltdb.auth.grants import ResourceScopeKind
from feltdb.work.admission import new_workload


def a_workload() -> dict[str, Any]:
    return new_workload(make_request(), "workload_1").to_json()


def refused(parse: Any, data: Any) -> WorkloadError:
    with pytest.raises(WorkloadError) as raised:
        parse(data)
    assert raised.value.code == "WORKLOAD_INVALID"
    return raised.value


@pytest.mark.parametrize(
    ("change", "field", "problem"),
    [
        (lambda d: d.pop("state"), "state", "missing required field"),
        (lambda d: d["retry_policy"].update(bogus=1), "retry_policy.bogus", "unknown field"),
        (
            lambda d: d["authorization_snapshot"]["grant"].pop("id"),
            "authorization_snapshot.grant.id",
            "missing required field",
        ),
        (
            lambda d: d["retry_policy"].update(max_attempts=-1),
            "retry_policy.max_attempts",
            ">= 0",
        ),
        (
            lambda d: d["execution_history"][0].update(to="LOST"),
            "execution_history.0.to",
            "Invalid enum value 'LOST'",
        ),
        (lambda d: d["requested_by"].update(id="x" * 257), "requested_by.id", "length <= 256"),
        (lambda d: d.update(priority=True), "priority", "Expected `int`, got `bool`"),
    ],
    ids=[
        "missing",
        "unknown-nested",
        "missing-nested",
        "out-of-bound",
        "in-a-list",
        "long",
        "bool",
    ],
)
def test_parse_names_the_field_that_is_wrong_and_what_is_wrong_with_it(
    change: Any, field: str, problem: str
) -> None:
    document = a_workload()
    change(document)
    error = refused(Workload.parse, document)
    assert error.details == {"fields": [field]}
    assert error.message.startswith(f"invalid Workload: {field}: ")
    assert problem in error.message


def test_parse_takes_a_dict_and_parse_json_takes_text_and_neither_takes_the_other() -> None:
    document = a_workload()
    text = msgspec.json.encode(document).decode()
    assert Workload.parse(document) == Workload.parse_json(text)
    refused(Workload.parse, text)  # a string is not read as JSON text
    assert "not JSON" in refused(Workload.parse_json, "{").message


def test_a_workload_document_without_the_fields_added_since_parses_as_their_absence_meant() -> None:
    document = a_workload()
    del document["session_id"], document["dependencies"]
    parsed = Workload.parse(document)
    assert parsed.session_id is None and parsed.dependencies == []


def test_a_subject_made_with_a_kind_s_value_is_the_same_subject() -> None:
    made = Subject(kind="human", id="ada")  # type: ignore[arg-type]
    assert made == Subject.human("ada") and hash(made) == hash(Subject.human("ada"))
    assert made.kind is SubjectKind.HUMAN and str(made) == "human:ada"
    assert sorted([Subject.human("b"), Subject.agent("z"), Subject.human("a")]) == [
        Subject.agent("z"),
        Subject.human("a"),
        Subject.human("b"),
    ]


def grant(**changes: Any) -> Grant:
    fields: dict[str, Any] = dict(
        id="g",
        issuer=Subject.human("h"),
        subject=Subject.agent("a"),
        tenant_id="t",
        application_id="app",
        capabilities=["workload:submit"],
        resources=(ResourceScope(kind="workload", uri="flow://app/*"),),  # type: ignore[arg-type]
        issued_at=1,
        expires_at=100,
        status="active",
    )
    return Grant(**{**fields, **changes})


def test_a_grant_made_with_any_iterable_and_values_holds_sets_lists_and_members() -> None:
    made = grant()
    assert made.capabilities == frozenset({"workload:submit"})
    assert made.resources == [ResourceScope(kind=ResourceScopeKind.WORKLOAD, uri="flow://app/*")]
    assert made.status is GrantStatus.ACTIVE
    assert made.resources[0].kind is ResourceScopeKind.WORKLOAD


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"expires_at": 2**53}, "expires_at"),
        ({"subject": Subject(kind=SubjectKind.AGENT, id="x" * 257)}, "subject.id"),
        ({"revision": "2"}, "revision"),
    ],
    ids=["instant-out-of-bound", "long-id", "string-revision"],
)
def test_nothing_is_signed_that_no_verifier_would_read_back(changes: Any, field: str) -> None:
    signer = GrantSigner("k", bytes(range(32)))
    error = refused(signer.sign, grant(**changes))
    assert error.details == {"fields": [field]}
    refused(signer.sign_token, grant(**changes))


def test_a_record_is_not_validated_when_made_but_a_request_validates_the_records_it_holds() -> None:
    policy = WorkloadRetryPolicy(max_attempts=-1)  # made: the authority's own, unchecked
    assert policy.max_attempts == -1
    with pytest.raises(WorkloadError) as raised:
        make_request(retry_policy=policy)
    assert raised.value.details == {"fields": ["retry_policy.max_attempts"]}
