"""Grants: what a subject may do, where, and until when. Pure data, no I/O."""

from __future__ import annotations

import enum
import hashlib
import re
import secrets

import msgspec

from feltdb.auth.subjects import Subject
from feltdb.fields import Instant, StringSet
from feltdb.records.base import Record, frozen_members

_GRANT_ID = re.compile(r"grant_([0-9a-f]{16})([0-9a-f]{8})")
_EARLIER_IDS = re.compile(r"grant_[0-9a-f]{16}|admin-[0-9a-f]{12}")
"""The ids earlier releases minted, without a check: a grant issued then (``grant issue``,
the first start's admin grant) is still revoked without ``force``."""


def _grant_id_check(random_part: str) -> str:
    return hashlib.sha256(b"feltdb grant id\0" + random_part.encode("ascii")).hexdigest()[:8]


def new_grant_id() -> str:
    """A fresh grant id: ``grant_``, 64 random bits and a check of them (8 hex digits),
    so that :func:`minted_grant_id` can tell an id feltdb minted from a mistyped one.
    """
    random_part = secrets.token_hex(8)
    return f"grant_{random_part}{_grant_id_check(random_part)}"


def minted_grant_id(grant_id: str) -> bool:
    """Whether ``grant_id`` has the shape and check of a :func:`new_grant_id` (or the shape
    of an id an earlier release minted): ``False`` for a mistyped or truncated id, a
    workload id or a token pasted in its place (a one-digit typo of a checked id passes
    once in four billion).
    """
    found = _GRANT_ID.fullmatch(grant_id)
    if found is not None:
        return found[2] == _grant_id_check(found[1])
    return _EARLIER_IDS.fullmatch(grant_id) is not None


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
