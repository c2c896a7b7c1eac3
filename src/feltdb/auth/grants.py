"""Grants: what a subject may do, where, and until when. Pure data, no I/O."""

from __future__ import annotations

import enum

from pydantic import BaseModel, ConfigDict, Field

from feltdb.auth.subjects import Subject
from feltdb.fields import Instant, StringSet


class ResourceScopeKind(enum.StrEnum):
    """What a resource scope's URI names."""

    WORKLOAD = "workload"
    APPLICATION = "application"
    CONNECTION = "connection"
    SECRET = "secret"
    AUDIT = "audit"


class ResourceScope(BaseModel):
    """A resource a grant covers: a kind and a URI pattern (``*`` matches any run)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: ResourceScopeKind
    uri: str


class GrantStatus(enum.StrEnum):
    """Whether a grant may still be used."""

    ACTIVE = "active"
    SUSPENDED = "suspended"
    REVOKED = "revoked"


class GrantConstraints(BaseModel):
    """Narrowing conditions on a grant. Empty sets mean "no narrowing"."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    environments: StringSet = Field(default_factory=frozenset)
    definitions: StringSet = Field(default_factory=frozenset)


class Grant(BaseModel):
    """A grant of capabilities on resources from an issuer to a subject, for a tenant and
    application, valid from ``issued_at`` until ``expires_at`` (unix seconds, exclusive).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    contract_version: int = 1
    id: str
    issuer: Subject
    subject: Subject
    tenant_id: str
    application_id: str
    capabilities: StringSet = Field(default_factory=frozenset)
    resources: tuple[ResourceScope, ...] = ()
    constraints: GrantConstraints = Field(default_factory=GrantConstraints)
    issued_at: Instant
    expires_at: Instant
    parent_grant: str | None = None
    revision: int = 1
    status: GrantStatus = GrantStatus.ACTIVE


class SignedGrant(BaseModel):
    """A grant with the key id and HMAC-SHA256 signature that vouch for it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    grant: Grant
    key_id: str
    signature: str
