"""Factories for the reference's fixture requests (its `create()` / `create_as()`)."""

from __future__ import annotations

from typing import Any

from feltdb import CreateWorkload, Grant, GrantSigner, ResourceScope, ResourceScopeKind, Subject

CAPABILITIES = frozenset({"email:send"})
"""The capabilities the fixture request needs and the fixture workers hold."""

SIGNER = GrantSigner("k", bytes([1] * 32))


def make_grant(**overrides: Any) -> Grant:
    """The fixture requests' grant (agent ``a1`` in tenant ``t``'s ``app``, every workload of
    it, ``workload:execute``, valid from 1 to 9999), with ``overrides`` applied.
    """
    fields: dict[str, Any] = dict(
        contract_version=1,
        id="g",
        issuer=Subject.human("h"),
        subject=Subject.agent("a1"),
        tenant_id="t",
        application_id="app",
        capabilities={"workload:execute"},
        resources=[ResourceScope(kind=ResourceScopeKind.WORKLOAD, uri="flow://app/workloads/*")],
        issued_at=1,
        expires_at=9999,
        parent_grant=None,
        revision=1,
    )
    fields.update(overrides)
    return Grant(**fields)


def make_request(agent: str = "a1", **overrides: Any) -> CreateWorkload:
    """The reference's fixture request, made by agent ``agent``, with ``overrides`` applied."""
    subject = Subject.agent(agent)
    grant = make_grant(subject=subject)
    fields: dict[str, Any] = dict(
        tenant_id="t",
        application_id="app",
        environment="production",
        definition_id="send",
        definition_revision="r1",
        trigger="manual",
        input={"id": 1},
        requested_by=subject,
        session_id="session-1",
        authorization_snapshot=SIGNER.sign(grant),
        capability_snapshot={"email:send"},
        idempotency_key="one",
        created_at=10,
    )
    fields.update(overrides)
    return CreateWorkload(**fields)
