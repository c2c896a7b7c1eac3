"""The ``/v1`` routes: HTTP translated to :class:`~feltdb.work.store.WorkloadStore` calls.

By audience: :mod:`.requesters`, :mod:`.workers`, :mod:`.operators` (and approvers, and
grant revocation), :mod:`.lists` (and the audit), over the shared dependencies of
:mod:`.deps`; their bodies are :mod:`feltdb.server.bodies`. Every route authenticates
the bearer token (a signed grant, verified with the server's keyring), authorizes the
grant with :mod:`feltdb.auth.policy` for the route's capability and resource, and then
makes one store call with the grant's :class:`~feltdb.auth.scope.Scope`. Identity never
comes from the body: a submission's ``requested_by`` and ``authorization_snapshot`` are
the token's subject and signed grant; a worker's id is the grant's subject id and its
capabilities the grant's capabilities; a decider is the grant's subject.

| route | capability | resource checked |
| --- | --- | --- |
| ``POST /v1/workloads`` | ``workload:execute`` | ``flow://{app}/workloads/{new id}`` (by |
  the store, at admission) |
| ``GET /v1/workloads/{id}`` | ``workload:read`` | ``flow://{app}/workloads/{id}`` |
| ``POST /v1/workloads/{id}/cancel`` | ``workload:cancel`` | the workload |
| ``POST /v1/claims`` | ``workload:claim`` | ``flow://{app}/workloads/*`` (any of the app's) |
| ``POST /v1/workloads/{id}/{claim,start,heartbeat,context,checkpoint,complete,fail,``
  ``confirm-cancel}`` | ``workload:claim`` | the workload |
| ``POST /v1/batches/workloads`` | ``workload:execute`` | each new workload (by the store) |
| ``POST /v1/batches/claims`` | ``workload:claim`` | ``flow://{app}/workloads/*`` |
| ``POST /v1/batches/{completions,heartbeats}`` | ``workload:claim`` | each item's workload |
| ``POST /v1/workloads/{id}/retry`` | ``workload:operate`` | the workload |
| ``POST /v1/workloads/{id}/decision`` | ``workload:approve`` | the workload |
| ``GET /v1/workloads`` | ``workload:read`` | ``flow://{app}/workloads/*`` |
| ``GET /v1/approvals`` | ``workload:approve`` | ``flow://{app}/workloads/*`` |
| ``GET /v1/dead-letters`` | ``workload:operate`` | ``flow://{app}/workloads/*`` |
| ``GET /v1/audit`` | ``audit:read`` | ``flow://{app}/workloads/*`` |
| ``GET /v1/audit/verify`` | ``audit:read`` | ``flow://{app}/workloads/*`` |
| ``POST /v1/grants/{grant_id}/revoke`` | ``grant:revoke`` | (the tenant and application) |
| ``POST /v1/retention/prune`` | ``workload:operate`` | ``flow://{app}/workloads/*`` |
| ``GET /v1/limits/concurrency`` | ``workload:read`` | ``flow://{app}/workloads/*``, |
  unconstrained |
| ``PUT /v1/limits/concurrency/definitions/{id}`` | ``workload:operate`` | |
  ``flow://{app}/workloads/*``, unconstrained |
| ``POST /v1/workflows`` | ``workload:execute`` | each new workload (by the store) |
| ``GET /v1/workflows/{id}`` | ``workload:read`` | ``flow://{app}/workloads/*`` |
| ``POST /v1/workflows/{id}/cancel`` | ``workload:read``, ``workload:cancel`` | |
  ``flow://{app}/workloads/*`` |
| ``/v1/schedules…`` (:mod:`.schedules`) | ``schedule:manage`` (to create: and |
  ``workload:execute``) | ``flow://{app}/workloads/*``, unconstrained |

The tenant and application of every request are the grant's. Work of another tenant or
application, or outside the grant's constraints, is answered ``404 WORKLOAD_NOT_FOUND``
by the store exactly as missing work is, so no request can learn whether it exists. A
grant without ``workload:read`` may still read the work its subject holds the claim of
(with ``workload:claim``) and work that requires approval (with ``workload:approve``);
any other read is refused ``403``, never ``404`` (``feltdb.auth.policy.may_read``). The
lists (``GET /v1/workloads``, ``/v1/approvals``, ``/v1/dead-letters``) and the audit
only ever hold the grant's tenant's application's entries, and need a grant covering all
of the application's workloads.

Batches (``/v1/batches/…``) make one store call each and answer ``200`` with one answer per
item, in order: an item refused (by the grant's coverage of its workload, or by the store)
answers the status and error body its single route would; the token, the body's size and
its shape refuse the whole request.

Lists are pages: ``{"items": [...], "next_cursor": str | null}`` in the order of
``WorkloadStore.list`` (priority descending, then oldest first, then id), ``limit`` 1 to
500 (50 by default), ``cursor`` the previous page's ``next_cursor`` (opaque: URL-safe
base64 of the last item's ``[priority, created_at, id]``). Each page is a keyset seek over
the scheduling index, whatever its depth. The ``definition`` filter is applied to each page
as read, so a filtered page may hold fewer than ``limit`` items (even none) while
``next_cursor`` is set: follow it until it is ``null``.

Revocation: ``POST /v1/grants/{grant_id}/revoke`` revokes a grant id *of the caller's
tenant and application* (a revocation never reaches another tenant's grants). Through
this server, every later request under that grant is refused ``403``; a revocation
committed elsewhere (another server, ``feltdb grant revoke --db``) is in force within
:data:`~feltdb.auth.verified.REVOCATION_BOUND_S` (1 s), since a verified token is trusted
that long (:mod:`feltdb.auth.verified`). Checking costs one primary-key read of the store
(``system_revoked_grants``) per token per second, not per request; a store that cannot be
read refuses the request (503), never lets it through.
"""

from fastapi import APIRouter

from feltdb.server.routes import (
    limits,
    lists,
    operators,
    requesters,
    retention,
    schedules,
    workers,
    workflows,
)
from feltdb.server.routes.deps import Caller, ServerState

__all__ = ["Caller", "ServerState", "build_router"]


def build_router() -> APIRouter:
    """The ``/v1`` routes. They act on the :class:`ServerState` of the app answering each
    request (``app.state.server``).
    """
    router = APIRouter()
    audiences = (requesters, workers, operators, lists, limits, retention, schedules, workflows)
    for audience in audiences:
        router.include_router(audience.router)
    return router
