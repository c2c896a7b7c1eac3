"""Grants: what a subject may do, where, and until when. Pure data, no I/O."""

from __future__ import annotations

import enum

import msgspec

from feltdb.auth.subjects import Subject
from feltdb.fields import Instant, StringSet
from feltdb.records.base import Record, frozen_members


class ResourceScopeKind(enum.StrEnum):
    """What a resource scope's URI names."""

    WORKLOAD = "workload"
    APPLICATION = "application"
    CONNECTION = "connection"
    SECRET = "secret"
    AUDIT = "audit"


class ResourceScope(Record, frozen=True, kw_only=True):  # type: ignore[misc]
    """A resource a grant covers: a kind and a URI pattern (``*`` matches any run)."""

    kind: ResourceScopeKind
    uri: str

    def __post_init__(self) -> None:
        if type(self.kind) is not ResourceScopeKind:
            msgspec.structs.force_setattr(self, "kind", ResourceScopeKind(self.kind))


class GrantStatus(enum.StrEnum):
    """Whether a grant may still be used."""

    ACTIVE = "active"
    SUSPENDED = "suspended"
    REVOKED = "revoked"


class GrantConstraints(Record, frozen=True, kw_only=True):  # type: ignore[misc]
    """Narrowing conditions on a grant. Empty sets mean "no narrowing"."""

    environments: StringSet = frozenset()
    definitions: StringSet = frozenset()

    def __post_init__(self) -> None:
        frozen_members(self, "environments", "definitions")


class Grant(Record, frozen=True, kw_only=True):  # type: ignore[misc]
    """A grant of capabilities on resources from an issuer to a subject, for a tenant and
    application, valid from ``issued_at`` until ``expires_at`` (unix seconds, exclusive).
    """

    contract_version: int = 1
    id: str
    issuer: Subject
    subject: Subject
    tenant_id: str
    application_id: str
    capabilities: StringSet = frozenset()
    resources: list[ResourceScope] = msgspec.field(default_factory=list)
    constraints: GrantConstraints = GrantConstraints()
    issued_at: Instant
    expires_at: Instant
    parent_grant: str | None = None
    revision: int = 1
    status: GrantStatus = GrantStatus.ACTIVE

    def __post_init__(self) -> None:
        frozen_members(self, "capabilities")
        if type(self.resources) is not list:
            msgspec.structs.force_setattr(self, "resources", list(self.resources))
        if type(self.status) is not GrantStatus:
            msgspec.structs.force_setattr(self, "status", GrantStatus(self.status))


class SignedGrant(Record, frozen=True, kw_only=True):  # type: ignore[misc]
    """A grant with the key id and HMAC-SHA256 signature that vouch for it."""

    grant: Grant
    key_id: str
    signature: str
