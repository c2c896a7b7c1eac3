"""Authorization policy: which capability a request needs, and whether a grant covers it.

Pure: a verified grant and the request's tenant, application and resource in, a refusal
out. The server decides which capability and resource each endpoint checks.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterable
from fnmatch import fnmatchcase
from typing import Final

from feltdb.auth.grants import Grant, ResourceScope, ResourceScopeKind
from feltdb.auth.subjects import Subject
from feltdb.errors import ErrorCode, WorkloadError

SUBMIT: Final = "workload:execute"
"""Admit work (``POST /v1/workloads``)."""
READ: Final = "workload:read"
"""Read work."""
CLAIM: Final = "workload:claim"
"""Act as a worker: claim, start, heartbeat, checkpoint, complete, fail."""
CANCEL: Final = "workload:cancel"
"""Request cancellation."""
OPERATE: Final = "workload:operate"
"""Operator actions, e.g. retry."""
APPROVE: Final = "workload:approve"
"""Decide work awaiting approval."""
AUDIT: Final = "audit:read"
"""Read committed transactions."""
REVOKE: Final = "grant:revoke"
"""Revoke a grant of one's own tenant and application (``POST /v1/grants/{id}/revoke``)."""

ALL_CAPABILITIES: Final = frozenset({SUBMIT, READ, CLAIM, CANCEL, OPERATE, APPROVE, AUDIT, REVOKE})
"""Every capability the server checks (an administrator's grant holds them all)."""


def workload_uri(application_id: str, workload_id: str) -> str:
    """The resource URI of a workload, which grants' resource scopes are matched against."""
    return f"flow://{application_id}/workloads/{workload_id}"


def application_grant(
    subject: Subject,
    tenant_id: str,
    application_id: str,
    capabilities: Iterable[str],
    *,
    issued_at: int,
    expires_at: int,
    issuer: Subject | None = None,
    grant_id: str | None = None,
) -> Grant:
    """A grant to ``subject`` of ``capabilities`` on every workload of ``application_id``
    (the scope ``workload_uri(application_id, "*")``), from ``issued_at`` until
    ``expires_at``, issued by ``issuer`` (default: the subject itself), with a fresh
    ``grant_…`` id unless ``grant_id`` is given.
    """
    return Grant(
        id=grant_id if grant_id is not None else f"grant_{secrets.token_hex(8)}",
        issuer=issuer if issuer is not None else subject,
        subject=subject,
        tenant_id=tenant_id,
        application_id=application_id,
        capabilities=frozenset(capabilities),
        resources=(
            ResourceScope(kind=ResourceScopeKind.WORKLOAD, uri=workload_uri(application_id, "*")),
        ),
        issued_at=issued_at,
        expires_at=expires_at,
    )


def _refuse(message: str, missing: str) -> WorkloadError:
    return WorkloadError(ErrorCode.WORKLOAD_UNAUTHORIZED, message, {"missing": missing})


def authorize(
    grant: Grant,
    capability: str,
    tenant_id: str,
    application_id: str,
    resource: str | None = None,
) -> None:
    """Refuse unless ``grant`` allows ``capability`` on ``resource`` in the tenant and app.

    The grant must be for exactly ``tenant_id`` and ``application_id``, hold ``capability``,
    and, when ``resource`` is given, have a resource scope whose ``uri`` glob-matches it
    (``fnmatch.fnmatchcase``: ``*`` matches any run of characters, ``/`` included). The grant
    is assumed verified (signature, status, validity): see ``Keyring.verify``.

    Args:
        grant: the verified grant of the caller.
        capability: the capability the request needs, e.g. :data:`SUBMIT`.
        tenant_id: the tenant the request acts in.
        application_id: the application the request acts in.
        resource: the URI of the resource acted on, e.g. :func:`workload_uri`'s.

    Raises:
        WorkloadError: ``WORKLOAD_UNAUTHORIZED`` naming what the grant lacks (tenant,
            application, capability or resource; also in ``details["missing"]``). The
            message depends only on the grant and the request, so it never tells whether
            another tenant's resource exists.
    """
    if grant.tenant_id != tenant_id:
        raise _refuse(f"the grant does not cover tenant {tenant_id!r}", "tenant")
    if grant.application_id != application_id:
        raise _refuse(f"the grant does not cover application {application_id!r}", "application")
    if capability not in grant.capabilities:
        raise _refuse(f"the grant lacks capability {capability!r}", "capability")
    if resource is not None and not any(
        fnmatchcase(resource, scope.uri) for scope in grant.resources
    ):
        raise _refuse(f"the grant does not cover resource {resource!r}", "resource")
