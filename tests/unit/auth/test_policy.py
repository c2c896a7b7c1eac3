"""feltdb.auth.policy: the capabilities, workload URIs, and what a grant covers."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from feltdb.auth import (
    ALL_CAPABILITIES,
    APPROVE,
    AUDIT,
    CANCEL,
    CLAIM,
    OPERATE,
    READ,
    REVOKE,
    SUBMIT,
    Grant,
    GrantConstraints,
    ResourceScope,
    ResourceScopeKind,
    Subject,
    authorize,
    workload_uri,
)
from feltdb.auth.capabilities import SCHEDULE
from feltdb.auth.policy import (
    covers,
    covers_application,
    ensure_within_constraints,
    within_constraints,
    worker_name,
)
from feltdb.errors import WorkloadError

W1 = workload_uri("app", "workload_1")


def scope(uri: str, kind: ResourceScopeKind = ResourceScopeKind.WORKLOAD) -> ResourceScope:
    return ResourceScope(kind=kind, uri=uri)


def make_grant(**overrides: Any) -> Grant:
    fields: dict[str, Any] = dict(
        id="g",
        issuer=Subject.human("h"),
        subject=Subject.agent("a1"),
        tenant_id="t",
        application_id="app",
        capabilities={SUBMIT, READ},
        resources=[scope("flow://app/workloads/*")],
        issued_at=1,
        expires_at=9999,
    )
    fields.update(overrides)
    return Grant(**fields)


def refusal(grant: Grant, *args: Any, **kwargs: Any) -> WorkloadError:
    with pytest.raises(WorkloadError) as refused:
        authorize(grant, *args, **kwargs)
    assert refused.value.code == "WORKLOAD_UNAUTHORIZED"
    return refused.value


# ------------------------------------------------------------------ names


def test_the_capabilities_have_the_documented_spellings():
    assert (SUBMIT, READ, CLAIM, CANCEL, OPERATE, APPROVE, AUDIT) == (
        "workload:execute",
        "workload:read",
        "workload:claim",
        "workload:cancel",
        "workload:operate",
        "workload:approve",
        "audit:read",
    )
    assert SCHEDULE == "schedule:manage"
    assert ALL_CAPABILITIES == {
        SUBMIT, READ, CLAIM, CANCEL, OPERATE, APPROVE, AUDIT, REVOKE, SCHEDULE
    }  # fmt: skip


def test_a_workload_uri_names_the_application_and_the_workload():
    assert workload_uri("app", "workload_abc") == "flow://app/workloads/workload_abc"


# ------------------------------------------------------------------ allowed


def test_a_grant_allows_its_capability_in_its_tenant_and_application():
    assert authorize(make_grant(), SUBMIT, "t", "app") is None
    assert authorize(make_grant(), READ, "t", "app", W1) is None


def test_without_a_resource_the_scopes_are_not_consulted():
    assert authorize(make_grant(resources=()), SUBMIT, "t", "app") is None


# ------------------------------------------------------------------ refused


def test_another_tenant_is_refused():
    error = refusal(make_grant(), READ, "t2", "app", workload_uri("app", "theirs"))
    assert "tenant" in error.message
    assert "'t2'" in error.message
    assert error.details == {"missing": "tenant"}


def test_another_application_is_refused():
    error = refusal(make_grant(), READ, "t", "app2", workload_uri("app2", "w"))
    assert "application" in error.message
    assert "'app2'" in error.message
    assert error.details == {"missing": "application"}


@pytest.mark.parametrize("capability", [CLAIM, CANCEL, OPERATE, APPROVE, AUDIT, "", "workload:*"])
def test_a_capability_the_grant_lacks_is_refused(capability):
    error = refusal(make_grant(), capability, "t", "app", W1)
    assert "capability" in error.message
    assert repr(capability) in error.message
    assert error.details == {"missing": "capability"}


def test_capabilities_are_not_globs():
    refusal(make_grant(capabilities={"workload:*"}), READ, "t", "app")
    refusal(make_grant(capabilities={"*"}), READ, "t", "app")


def test_a_resource_no_scope_covers_is_refused():
    other = workload_uri("other-app", "w")
    error = refusal(make_grant(resources=[scope("flow://app/workloads/w9")]), READ, "t", "app", W1)
    assert "resource" in error.message
    assert W1 in error.message
    assert error.details == {"missing": "resource"}
    assert "resource" in refusal(make_grant(), READ, "t", "app", other).message
    assert "resource" in refusal(make_grant(resources=()), READ, "t", "app", W1).message


def test_the_tenant_is_checked_first_so_nothing_else_is_revealed_across_tenants():
    grant = make_grant(capabilities=set(), resources=())
    error = refusal(grant, APPROVE, "t2", "app2", workload_uri("app2", "w"))
    assert error.details == {"missing": "tenant"}
    assert "workload" not in error.message
    assert "capability" not in error.message


def test_the_refusal_does_not_depend_on_which_workload_is_named():
    # Whether "w-that-exists" exists is unknowable to authorize: it never sees the store, and
    # the message only varies with what the caller itself sent.
    grant = make_grant()
    one = refusal(grant, READ, "t2", "app", workload_uri("app", "w-that-exists"))
    two = refusal(grant, READ, "t2", "app", workload_uri("app", "w-that-does-not"))
    assert one.message == two.message


# ------------------------------------------------------------------ glob matching


@pytest.mark.parametrize(
    ("pattern", "uri", "covered"),
    [
        ("flow://app/*", W1, True),
        ("flow://app/workloads/*", W1, True),
        ("flow://app/workloads/workload_1", W1, True),
        ("flow://app/workloads/workload_?", W1, True),
        ("flow://app/workloads/workload_[0-9]", W1, True),
        ("flow://*", W1, True),
        ("*", W1, True),
        ("flow://app/workloads/workload_1", workload_uri("app", "workload_10"), False),
        ("flow://app/workloads/workload_10", W1, False),
        ("flow://app/workloads/w2*", W1, False),
        ("flow://other/*", W1, False),
        ("flow://ap/*", W1, False),
        ("flow://APP/*", W1, False),
        ("flow://app/workloads/WORKLOAD_1", W1, False),
        ("flow://app/audit/*", W1, False),
        ("", W1, False),
    ],
)
def test_a_scope_covers_the_uris_its_glob_matches_case_sensitively(pattern, uri, covered):
    grant = make_grant(resources=[scope(pattern)])
    if covered:
        authorize(grant, READ, "t", "app", uri)
    else:
        refusal(grant, READ, "t", "app", uri)


def test_any_one_scope_is_enough():
    grant = make_grant(
        resources=[
            scope("flow://app/workloads/a*"),
            scope("flow://app/*", ResourceScopeKind.APPLICATION),
        ]
    )
    authorize(grant, READ, "t", "app", W1)


# ------------------------------------------------------------------ the rule as a property

names = st.sampled_from(["t", "t2", "app", "app2", ""])
capabilities = st.sampled_from(sorted(ALL_CAPABILITIES))


@given(
    tenant=names,
    application=names,
    granted=st.frozensets(capabilities),
    needed=capabilities,
    patterns=st.lists(st.sampled_from(["flow://app/*", "flow://app/workloads/w?", "x"])),
    workload=st.sampled_from(["w1", "w22", "x"]),
)
def test_authorize_allows_exactly_when_tenant_application_capability_and_scope_hold(
    tenant, application, granted, needed, patterns, workload
):
    grant = make_grant(capabilities=granted, resources=[scope(p) for p in patterns])
    uri = workload_uri("app", workload)
    expected = (
        tenant == "t"
        and application == "app"
        and needed in granted
        and any(p == "flow://app/*" or (p.endswith("w?") and len(workload) == 2) for p in patterns)
    )
    try:
        authorize(grant, needed, tenant, application, uri)
    except WorkloadError as error:
        assert error.code == "WORKLOAD_UNAUTHORIZED"
        assert not expected
    else:
        assert expected


def test_an_application_grant_covers_every_workload_of_its_application_only() -> None:
    from feltdb.auth.policy import application_grant

    ada = Subject.human("ada")
    grant = application_grant(ada, "t", "app", {READ}, issued_at=5, expires_at=50)
    assert (grant.subject, grant.issuer, grant.issued_at, grant.expires_at) == (ada, ada, 5, 50)
    assert grant.id.startswith("grant_") and grant.capabilities == {READ}
    authorize(grant, READ, "t", "app", workload_uri("app", "workload_1"))
    for tenant, app, capability in (("t", "other", READ), ("u", "app", READ), ("t", "app", CLAIM)):
        with pytest.raises(WorkloadError):
            authorize(grant, capability, tenant, app, workload_uri(app, "workload_1"))
    named = application_grant(
        ada, "t", "app", set(), issued_at=0, expires_at=1, issuer=Subject.human("h"), grant_id="g"
    )
    assert (named.id, named.issuer) == ("g", Subject.human("h"))


# ------------------------------------------------------------------ whole-application coverage


@pytest.mark.parametrize(
    "uri,whole",
    [
        ("flow://app/workloads/*", True),
        ("flow://app/*", True),
        ("flow://*", True),
        ("*", True),
        ("flow://*/workloads/*", True),
        ("flow://app/workloads/**", True),
        ("flow://app/workloads/?", False),
        ("flow://app/workloads/[*]", False),
        ("flow://app/workloads/[*", False),
        ("flow://app/workloads/x*", False),
        ("flow://app/workloads/*x", False),
        ("flow://app/workloads", False),
        ("flow://other/*", False),
    ],
)
def test_whole_application_coverage_is_decided_about_the_pattern(uri: str, whole: bool):
    assert covers_application(make_grant(resources=[scope(uri)]), "app") is whole


def test_a_scope_of_another_kind_covers_no_workload():
    grant = make_grant(resources=[scope("*", ResourceScopeKind.SECRET)])
    assert not covers(grant, W1)
    assert not covers_application(grant, "app")


PATTERN_TEXT = st.text(alphabet="flow:/apwrkds*?[]!x-", max_size=24)


@given(head=PATTERN_TEXT, workload_id=st.text(min_size=0, max_size=12))
def test_a_pattern_that_covers_the_application_covers_every_workload_of_it(
    head: str, workload_id: str
):
    grant = make_grant(resources=[scope(head)])
    if covers_application(grant, "app"):
        assert covers(grant, workload_uri("app", workload_id))


def test_constraints_narrow_by_environment_and_definition():
    grant = make_grant(
        constraints=GrantConstraints(environments=["staging"], definitions=["a", "b"])
    )
    assert within_constraints(grant, "staging", "a")
    assert not within_constraints(grant, "production", "a")
    assert not within_constraints(grant, "staging", "c")
    assert within_constraints(make_grant(), "anything", "at-all")
    with pytest.raises(WorkloadError) as refused:
        ensure_within_constraints(grant, "staging", "c")
    assert refused.value.details == {"missing": "definition"}


def test_a_worker_is_named_by_kind_and_id():
    assert worker_name(Subject.worker("w1")) == "worker:w1"
    assert worker_name(Subject.agent("w1")) != worker_name(Subject.worker("w1"))
