"""Authorization policy: which capability a request needs, and whether a grant covers it.

Pure: a verified grant and the request's tenant, application and resource in, a refusal
out. Every entry point decides coverage here: :func:`covers` for one workload,
:func:`covers_application` for all of an application's, :func:`within_constraints` for a
grant narrowed to environments or definitions, and :func:`worker_name` for who a worker
is. The server decides which capability and resource each endpoint checks.
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


_WORKLOAD_SCOPES = frozenset({ResourceScopeKind.WORKLOAD, ResourceScopeKind.APPLICATION})
"""The kinds of resource scope that may cover a workload (a ``secret`` or ``connection``
scope never does, whatever its pattern)."""


def covers(grant: Grant, resource: str) -> bool:
    """Whether one of ``grant``'s workload resource scopes matches the URI ``resource``.

    A scope's ``uri`` is a glob (``fnmatch.fnmatchcase``: ``*`` matches any run of
    characters, ``/`` included; ``?`` one character; ``[…]`` a class). ``resource`` is a
    concrete URI, never a pattern: this is the one test of coverage every endpoint uses.
    """
    return any(
        scope.kind in _WORKLOAD_SCOPES and fnmatchcase(resource, scope.uri)
        for scope in grant.resources
    )


def _covers_every_uri_with_prefix(pattern: str, prefix: str) -> bool:
    # A glob matches every string that starts with `prefix` exactly when it ends in `*`
    # and what comes before that `*` matches some prefix of `prefix`: the final `*` then
    # matches the rest of `prefix` and any continuation. (A pattern ending in anything
    # else constrains the last character, so it misses some continuation.) Coverage is
    # therefore decided about the pattern, never by matching the pattern against itself:
    # `?` and `[*]` match the text "*" but not every workload id (issue 9, point 3).
    if not pattern.endswith("*"):
        return False
    head = pattern[:-1]
    return any(fnmatchcase(prefix[:end], head) for end in range(len(prefix) + 1))


def covers_application(grant: Grant, application_id: str) -> bool:
    """Whether ``grant``'s resource scopes cover *every* workload of ``application_id``,
    as a list, the audit, an inbox or ``claim_next`` (which may pick any of them) need.
    """
    prefix = workload_uri(application_id, "")
    return any(
        scope.kind in _WORKLOAD_SCOPES and _covers_every_uri_with_prefix(scope.uri, prefix)
        for scope in grant.resources
    )


def constrained(grant: Grant) -> bool:
    """Whether ``grant`` is narrowed to some environments or definitions."""
    return bool(grant.constraints.environments or grant.constraints.definitions)


def within_constraints(grant: Grant, environment: str, definition_id: str) -> bool:
    """Whether work of ``environment`` and ``definition_id`` is inside ``grant``'s
    constraints (an empty set of either does not narrow).
    """
    limits = grant.constraints
    return (not limits.environments or environment in limits.environments) and (
        not limits.definitions or definition_id in limits.definitions
    )


def ensure_within_constraints(grant: Grant, environment: str, definition_id: str) -> None:
    """Refuse work outside ``grant``'s constraints.

    Raises:
        WorkloadError: ``WORKLOAD_UNAUTHORIZED`` naming the environment or definition the
            grant does not cover (``details["missing"]``).
    """
    limits = grant.constraints
    if limits.environments and environment not in limits.environments:
        raise _refuse(f"the grant does not cover environment {environment!r}", "environment")
    if limits.definitions and definition_id not in limits.definitions:
        raise _refuse(f"the grant does not cover definition {definition_id!r}", "definition")


def authorize(
    grant: Grant,
    capability: str,
    tenant_id: str,
    application_id: str,
    resource: str | None = None,
) -> None:
    """Refuse unless ``grant`` allows ``capability`` on ``resource`` in the tenant and app.

    The grant must be for exactly ``tenant_id`` and ``application_id``, hold ``capability``,
    and, when ``resource`` is given, cover it (:func:`covers`). The grant is assumed
    verified (signature, status, validity): see ``Keyring.verify``.

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
    _authorize_caller(grant, capability, tenant_id, application_id)
    if resource is not None and not covers(grant, resource):
        raise _refuse(f"the grant does not cover resource {resource!r}", "resource")


def authorize_application(grant: Grant, capability: str) -> None:
    """Refuse unless ``grant`` allows ``capability`` on every workload of its application
    (:func:`covers_application`): what a list, an inbox, the audit and ``claim_next`` need.

    Raises:
        WorkloadError: ``WORKLOAD_UNAUTHORIZED``, as :func:`authorize`.
    """
    _authorize_caller(grant, capability, grant.tenant_id, grant.application_id)
    if not covers_application(grant, grant.application_id):
        everything = workload_uri(grant.application_id, "*")
        raise _refuse(f"the grant does not cover every workload ({everything})", "resource")


def _authorize_caller(grant: Grant, capability: str, tenant_id: str, application_id: str) -> None:
    if grant.tenant_id != tenant_id:
        raise _refuse(f"the grant does not cover tenant {tenant_id!r}", "tenant")
    if grant.application_id != application_id:
        raise _refuse(f"the grant does not cover application {application_id!r}", "application")
    if capability not in grant.capabilities:
        raise _refuse(f"the grant lacks capability {capability!r}", "capability")


def worker_name(subject: Subject) -> str:
    """The worker name the store records for ``subject`` acting as a worker: ``KIND:ID``
    (``worker:w1``), so two subjects of different kinds and one id are never one worker.
    """
    return str(subject)
