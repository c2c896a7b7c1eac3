"""Authorization policy: which capability a request needs, and whether a grant covers it.

Pure: a verified grant and the request's tenant, application and resource in, a refusal
out. Every entry point decides coverage here: :func:`covers` for one workload,
:func:`covers_application` for all of an application's, :func:`within_constraints` for a
grant narrowed to environments or definitions, and :func:`worker_name` for who a worker
is. The rules of the server's routes are here too: who may read a workload
(:func:`may_read`, :func:`authorize_read`), act on one (:func:`authorize_workload`), act as
its worker (:func:`authorize_worker`), claim from a whole application
(:func:`claim_filter`), read the audit (:func:`authorize_audit`) and revoke grants
(:func:`authorize_revoke`).
Which work a grant may *see* at all is its :class:`~feltdb.auth.scope.Scope`, which the
store applies.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import TYPE_CHECKING

# The capabilities are the policy's words: re-exported, so `feltdb.auth.policy` names
# them as it always has (the command line takes them from the module that imports nothing).
from feltdb.auth.capabilities import ALL_CAPABILITIES as ALL_CAPABILITIES
from feltdb.auth.capabilities import APPROVE as APPROVE
from feltdb.auth.capabilities import AUDIT as AUDIT
from feltdb.auth.capabilities import CANCEL as CANCEL
from feltdb.auth.capabilities import CLAIM as CLAIM
from feltdb.auth.capabilities import OPERATE as OPERATE
from feltdb.auth.capabilities import READ as READ
from feltdb.auth.capabilities import REVOKE as REVOKE
from feltdb.auth.capabilities import SUBMIT as SUBMIT
from feltdb.auth.grants import Grant, ResourceScope, ResourceScopeKind, new_grant_id
from feltdb.auth.scope import Scope
from feltdb.auth.subjects import Subject
from feltdb.errors import ErrorCode, WorkloadError

if TYPE_CHECKING:  # the records import this package: at run time they are only read
    from feltdb.records.workload import Workload


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
        id=grant_id if grant_id is not None else new_grant_id(),
        issuer=issuer if issuer is not None else subject,
        subject=subject,
        tenant_id=tenant_id,
        application_id=application_id,
        capabilities=frozenset(capabilities),
        resources=[
            ResourceScope(kind=ResourceScopeKind.WORKLOAD, uri=workload_uri(application_id, "*"))
        ],
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


# ---------------------------------------------------------------------- the routes' rules


def authorize_workload(grant: Grant, capability: str, workload_id: str) -> None:
    """Refuse unless ``grant`` allows ``capability`` on workload ``workload_id`` of its own
    tenant and application (:func:`authorize` on its :func:`workload_uri`).

    Whether the workload exists, and is inside the grant's :class:`Scope`, is not asked:
    the store answers work outside the scope ``WORKLOAD_NOT_FOUND``, as missing work.
    """
    authorize(
        grant,
        capability,
        grant.tenant_id,
        grant.application_id,
        workload_uri(grant.application_id, workload_id),
    )


def authorize_worker(grant: Grant, workload_id: str) -> str:
    """Refuse unless ``grant`` may act as a worker on ``workload_id`` (:data:`CLAIM` on
    it); answer the worker it acts as (:func:`worker_name`). The claim's fence (whether
    this worker holds the claim it names) is the store's to check.
    """
    authorize_workload(grant, CLAIM, workload_id)
    return worker_name(grant.subject)


def allows(grant: Grant, capability: str, workload_id: str) -> bool:
    """Whether :func:`authorize_workload` lets ``grant`` use ``capability`` on
    ``workload_id`` (what a page offers; the action is authorized again when taken).
    """
    return _permitted(lambda: authorize_workload(grant, capability, workload_id))


def _permitted(authorize: Callable[[], None]) -> bool:
    """Whether ``authorize`` (one of this module's refusals) lets the grant through."""
    try:
        authorize()
    except WorkloadError:
        return False
    return True


def may_read(grant: Grant, workload: Workload) -> bool:
    """Whether ``grant`` may read ``workload``: work inside its scope that it holds
    :data:`READ` on; or that its subject holds the current claim of, with :data:`CLAIM` on
    it (a worker reads its definition, timeouts and state: whether cancellation was
    requested); or that requires an approval, with :data:`APPROVE` on it (an approver
    reviews its input and input hash, as the inbox lists it).
    """
    if not Scope.of_grant(grant).admits(
        workload.tenant_id, workload.application_id, workload.environment, workload.definition_id
    ):
        return False
    workload_id = workload.workload_id
    if allows(grant, READ, workload_id):
        return True
    claim = workload.current_claim
    if (
        claim is not None
        and claim.worker_id == worker_name(grant.subject)
        and allows(grant, CLAIM, workload_id)
    ):
        return True
    return workload.approval is not None and allows(grant, APPROVE, workload_id)


def authorize_read(grant: Grant, workload_id: str, workload: Workload | None) -> None:
    """Refuse ``grant`` reading ``workload_id`` unless :func:`may_read` allows it.

    ``workload`` is the workload as read in the grant's scope, ``None`` when there is none
    (missing, or outside the scope). A grant with :data:`READ` on ``workload_id`` is never
    refused here: work it cannot find is the caller's ``WORKLOAD_NOT_FOUND``. Any other
    grant is refused for the missing capability whatever ``workload`` is, never told
    "not found": a grant without :data:`READ` does not learn whether the work exists.

    Raises:
        WorkloadError: ``WORKLOAD_UNAUTHORIZED``, as :func:`authorize` for :data:`READ`.
    """
    try:
        authorize_workload(grant, READ, workload_id)
    except WorkloadError:
        if workload is None or not may_read(grant, workload):
            raise


def allows_application(grant: Grant, capability: str) -> bool:
    """Whether :func:`authorize_application` lets ``grant`` use ``capability`` on all of
    its application's work (a list a page offers).
    """
    return _permitted(lambda: authorize_application(grant, capability))


def allows_audit(grant: Grant) -> bool:
    """Whether :func:`authorize_audit` lets ``grant`` read its application's audit."""
    return _permitted(lambda: authorize_audit(grant))


def authorize_audit(grant: Grant) -> None:
    """Refuse unless ``grant`` may read the audit: :data:`AUDIT` on the whole application,
    and narrowed to no environment or definition (the log is the whole application's).

    Raises:
        WorkloadError: ``WORKLOAD_UNAUTHORIZED``; a constrained grant's names
            ``"unconstrained grant"`` as missing.
    """
    _authorize_unconstrained(
        grant,
        AUDIT,
        "the audit is the whole application's: a grant constrained to environments or"
        " definitions may not read it",
    )


def authorize_revoke(grant: Grant) -> None:
    """Refuse unless ``grant`` may revoke grants: :data:`REVOKE` on the whole application,
    and narrowed to no environment or definition (a revocation reaches every grant of the
    application, whatever work it covers).

    Raises:
        WorkloadError: ``WORKLOAD_UNAUTHORIZED``, as :func:`authorize_audit`.
    """
    _authorize_unconstrained(
        grant,
        REVOKE,
        "a grant constrained to environments or definitions may not revoke grants",
    )


def _authorize_unconstrained(grant: Grant, capability: str, refusal: str) -> None:
    authorize_application(grant, capability)
    if constrained(grant):
        raise _refuse(refusal, "unconstrained grant")


@dataclass(frozen=True, slots=True)
class ClaimFilter:
    """What a worker's ``claim_next`` may pick: work its capabilities cover, of these
    definitions and environments (``None``: any).
    """

    capabilities: frozenset[str]
    definitions: frozenset[str] | None
    environments: frozenset[str] | None


def claim_filter(
    grant: Grant,
    capabilities: Iterable[str] | None = None,
    definitions: Iterable[str] | None = None,
) -> ClaimFilter:
    """Refuse unless ``grant`` may claim from its whole application (:data:`CLAIM` on every
    workload: ``claim_next`` may pick any); answer what it may claim, the worker's own
    ``capabilities`` and ``definitions`` (its handlers) narrowing the grant's. A
    capability the grant does not hold is ignored; so is a definition outside the grant's
    constraints.

    Raises:
        WorkloadError: ``WORKLOAD_UNAUTHORIZED``, as :func:`authorize_application`.
    """
    authorize_application(grant, CLAIM)
    held = frozenset(grant.capabilities)
    if capabilities is not None:
        held &= frozenset(capabilities)
    allowed = frozenset(grant.constraints.definitions) or None
    if definitions is not None:
        asked = frozenset(definitions)
        allowed = asked if allowed is None else allowed & asked
    return ClaimFilter(held, allowed, frozenset(grant.constraints.environments) or None)
