"""What every route depends on: the app's state, the verified caller and its scope, the
clock, and the path's workload id, as ``Annotated`` aliases for route signatures.

The routes are module-level (one set of functions for every app); each request finds its
app's :class:`ServerState` on ``request.app.state.server``.
"""

# No `from __future__ import annotations`: FastAPI reads these aliases' metadata.

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Annotated

from fastapi import Depends, Path, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from feltdb.auth import Grant
from feltdb.auth.scope import Scope
from feltdb.auth.tokens import Keyring, decode_token
from feltdb.auth.verified import VerifiedTokens
from feltdb.errors import ErrorCode, WorkloadError
from feltdb.fields import MAX_ID_CHARS
from feltdb.server.errors import Unauthenticated
from feltdb.server.fields import NOT_BLANK
from feltdb.server.limits import SignInLimits
from feltdb.server.wakeup import Wakeup
from feltdb.work.authority import Authority
from feltdb.work.store import WorkloadStore

PREFIX = "/v1"
"""The prefix of every route. Each audience's router carries it itself, so its routes' own
paths are the paths served (what the route-template metric label and the ``Allow`` header
of a 405 read), however the routers are included."""


@dataclass(frozen=True)
class Caller:
    """The verified grant of a request, the id of the key that signed its token, and the
    work the grant may see (its tenant's application, within its constraints).
    """

    grant: Grant
    key_id: str
    scope: Scope

    def authority(self, store: WorkloadStore) -> Authority:
        """The authority as this caller may use it: every rule of its grant, its scope and
        its subject, composed once (:class:`~feltdb.work.authority.Authority`).
        """
        return Authority.of_grant(store, self.grant, self.scope)


@dataclass(frozen=True)
class ServerState:
    """What the routes of one app act on: its store, the keyring that verifies bearer
    tokens, the clock every operation reads (unix seconds), its long-poll wake-ups, and
    the callers it verified in the last second (:mod:`feltdb.auth.verified`).
    """

    store: WorkloadStore
    keyring: Keyring
    clock: Callable[[], int]
    wakeup: Wakeup
    verified: VerifiedTokens[Caller] = field(default_factory=VerifiedTokens)
    sessions: VerifiedTokens[Caller] = field(default_factory=VerifiedTokens)
    """The dashboard sessions verified in the last second, by cookie (:mod:`feltdb.server.ui`)."""
    sign_ins: SignInLimits = field(default_factory=SignInLimits)
    """How often a client, or a grant, may sign in (:mod:`feltdb.server.limits`)."""

    def forget_grant(self, grant_id: str, *, tenant_id: str, application_id: str) -> None:
        """A grant of this tenant's application was revoked through this app: no request
        under it is let through from now on (its verified tokens and sessions are
        forgotten).
        """
        for verified in (self.verified, self.sessions):
            verified.forget_grant(grant_id, tenant_id=tenant_id, application_id=application_id)


async def server_state(request: Request) -> ServerState:
    """The state of the app answering ``request`` (set by ``create_app``)."""
    state: ServerState = request.app.state.server
    return state


State = Annotated[ServerState, Depends(server_state)]


async def store_of(state: State) -> WorkloadStore:
    """The app's store."""
    return state.store


async def now(state: State) -> int:
    """The app's clock, read once for the request."""
    return state.clock()


Store = Annotated[WorkloadStore, Depends(store_of)]
Now = Annotated[int, Depends(now)]


bearer = HTTPBearer(auto_error=False, description="A feltdb token (fgt2.…)")


async def caller(
    state: State,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
) -> Caller:
    """The request's verified, unrevoked grant.

    A token verified in full (decoded, its signature and validity checked, the
    revocations read) is remembered for at most ``REVOCATION_BOUND_S`` (1 s) by
    :class:`~feltdb.auth.verified.VerifiedTokens`: the same token within that bound is
    answered from memory, its validity checked against this request's clock. So a
    revocation committed elsewhere refuses requests within 1 s; one through this app's
    revoke route, at once.

    Raises:
        Unauthenticated: no bearer token, or one that cannot be decoded (401).
        WorkloadError: ``WORKLOAD_UNAUTHORIZED`` for a token that does not verify or a
            revoked grant (403); ``WORKLOAD_STORAGE_FAILURE`` when the revocations cannot
            be read (503: never let through).
    """
    if credentials is None:
        raise Unauthenticated("a bearer token is required (Authorization: Bearer …)")
    token = credentials.credentials
    at = state.clock()
    remembered = state.verified.get(token, at)
    if remembered is not None:
        return remembered
    try:
        signed = decode_token(token)
    except WorkloadError as error:
        raise Unauthenticated(error.message) from error
    grant = state.keyring.verify_signed(signed, at)
    check = state.verified.begin()  # before the read: the bound is timed from here
    verified = await run_in_threadpool(unrevoked, state.store, grant, signed.key_id)
    state.verified.put(token, grant, verified, check)
    return verified


def unrevoked(store: WorkloadStore, grant: Grant, key_id: str) -> Caller:
    """The caller of a verified ``grant`` (signed by ``key_id``), unless it was revoked:
    one keyed read of the store. Every way in (a token, a dashboard session) checks here.

    Raises:
        WorkloadError: ``WORKLOAD_UNAUTHORIZED`` for a revoked grant;
            ``WORKLOAD_STORAGE_FAILURE`` when the revocations cannot be read.
    """
    revoked = store.grants.is_revoked(
        grant.id, tenant_id=grant.tenant_id, application_id=grant.application_id
    )
    if revoked:
        raise WorkloadError(
            ErrorCode.WORKLOAD_UNAUTHORIZED, "the grant was revoked", {"grant_id": grant.id}
        )
    return Caller(grant, key_id, Scope.of_grant(grant))


Auth = Annotated[Caller, Depends(caller)]
"""The verified caller: every ``/v1`` route's first parameter."""


async def authority(verified: Auth, state: State) -> Authority:
    """The authority as the request's verified caller may use it."""
    return verified.authority(state.store)


Acting = Annotated[Authority, Depends(authority)]
"""The verified caller's authority: what a route calls for every rule and every write."""

WorkloadId = Annotated[
    str,
    Path(min_length=1, max_length=MAX_ID_CHARS, pattern=NOT_BLANK, description="The workload"),
]
"""The ``{workload_id}`` of a route's path."""
