"""Who is looking at the dashboard: the session cookie verified into a
:class:`~feltdb.server.routes.deps.Caller`, and the checks every form post passes.

A request's session is decided here and nowhere else:

1. the cookie's signature (:func:`~feltdb.auth.sessions.session_of_cookie`), before any read;
2. the session in the store (open, not past its end: one keyed read);
3. the grant it acts under, from the session's evidence, verified by the keyring at the
   request's clock (so a grant that expired, or a key taken out of the keyring, ends it);
4. the grant's revocation (:func:`~feltdb.server.routes.deps.unrevoked`, as for a token).

Steps 2 to 4 are remembered per cookie for at most a second
(:class:`~feltdb.auth.verified.VerifiedTokens`), exactly as a token's are: a session ended
or a grant revoked on another server is refused here within that second, and at once when
it happens through this server.

A form post must also carry the form token of its session (:func:`check_form`) and, when
the browser says where it comes from (``Origin``), come from this server: so no other site
can make a signed-in browser act (besides the cookie being ``SameSite=Strict``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final
from urllib.parse import parse_qs, urlsplit

from fastapi import Request

from feltdb.auth.capabilities import SCHEDULE
from feltdb.auth.policy import (
    APPROVE,
    OPERATE,
    READ,
    allows_application,
    allows_audit,
    constrained,
)
from feltdb.auth.sessions import form_token, form_token_matches, session_of_cookie
from feltdb.errors import ErrorCode, WorkloadError
from feltdb.server.routes.deps import Caller, ServerState, unrevoked
from feltdb.server.ui import sessions

COOKIE: Final = "feltdb_session"
"""The session cookie's name."""
SIGN_IN_COOKIE: Final = "feltdb_sign_in"
"""The sign-in form's cookie: a nonce its form token is bound to (login CSRF)."""
MAX_FORM_FIELDS: Final = 600
"""The most fields a form post may hold (a page of dead letters, 500, and a few more)."""


class SignInRequired(Exception):
    """The request has no valid session: answered by the sign-in page (a redirect to it
    for a page; 401 for a form post).
    """

    def __init__(self, reason: str | None = None) -> None:
        super().__init__(reason or "sign in")
        self.reason = reason


class FormRefused(Exception):
    """A form post without its session's form token, or from another site: 403."""


@dataclass(frozen=True, slots=True)
class Offers:
    """Which pages a grant may open (the navigation shows only these)."""

    workloads: bool
    approvals: bool
    dead_letters: bool
    audit: bool
    schedules: bool = False


@dataclass(frozen=True, slots=True)
class Viewer:
    """A signed-in request: the caller its session acts as, the session's id and the form
    token every form of the page carries.
    """

    caller: Caller
    session_id: str
    form_token: str

    @property
    def subject(self) -> str:
        """Who is signed in, as ``KIND:ID``."""
        return str(self.caller.grant.subject)

    @property
    def offers(self) -> Offers:
        """The pages this viewer's grant may open, decided by the policy the pages use."""
        grant = self.caller.grant
        return Offers(
            workloads=allows_application(grant, READ),
            approvals=allows_application(grant, APPROVE),
            dead_letters=allows_application(grant, OPERATE),
            audit=allows_audit(grant),
            schedules=allows_application(grant, SCHEDULE) and not constrained(grant),
        )


def server_of(request: Request) -> ServerState:
    """The state of the app answering ``request``."""
    state: ServerState = request.app.state.server
    return state


def viewer_of(request: Request) -> Viewer:
    """The request's verified session (blocking: call it from a worker thread).

    Raises:
        SignInRequired: no cookie, a forged one, a session that ended or expired, or a
            grant that no longer verifies or was revoked.
        WorkloadError: ``WORKLOAD_STORAGE_FAILURE`` (never let through).
    """
    state = server_of(request)
    cookie = request.cookies.get(COOKIE)
    session_id = session_of_cookie(state.keyring, cookie)
    if session_id is None or cookie is None:
        raise SignInRequired()
    at = state.clock()
    caller = state.sessions.get(cookie, at)
    if caller is None:
        check = state.sessions.begin()
        session = sessions.session_of(state.store.db, session_id, at)
        if session is None:
            raise SignInRequired("your session ended: sign in again")
        try:
            grant = state.keyring.verify_evidence(session.evidence, at)
            caller = unrevoked(state.store, grant, session.evidence.key_id)
        except WorkloadError as error:
            if error.code != ErrorCode.WORKLOAD_UNAUTHORIZED:
                raise
            raise SignInRequired(f"your session's grant no longer holds: {error.message}") from None
        state.sessions.put(cookie, grant, caller, check)
    return Viewer(caller, session_id, form_token(state.keyring, session_id))


async def form_of(request: Request) -> dict[str, list[str]]:
    """The fields of a urlencoded form post (the body is bounded by the app's body limit).

    Raises:
        FormRefused: a body that is not a urlencoded form, or holds too many fields.
    """
    media = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if media != "application/x-www-form-urlencoded":
        raise FormRefused("a form post is application/x-www-form-urlencoded")
    body = (await request.body()).decode("utf-8", "replace")
    try:
        return parse_qs(body, keep_blank_values=True, max_num_fields=MAX_FORM_FIELDS)
    except ValueError:
        raise FormRefused("the form holds too many fields") from None


def field(form: dict[str, list[str]], name: str) -> str | None:
    """A form field's single value (``None``: absent or given more than once)."""
    values = form.get(name, [])
    return values[0] if len(values) == 1 else None


def check_origin(request: Request) -> None:
    """Refuse a post whose ``Origin`` (or, without it, ``Referer``) is another site (an
    opaque origin, ``null``, is one).

    Raises:
        FormRefused: the post comes from another origin.
    """
    claimed = request.headers.get("origin") or request.headers.get("referer")
    if claimed is None:
        return  # not said: the form token decides alone
    parts = urlsplit(claimed)
    own = urlsplit(str(request.base_url))
    if (parts.scheme, parts.netloc) != (own.scheme, own.netloc):
        raise FormRefused("the form was posted from another site")


def check_form(request: Request, viewer: Viewer, form: dict[str, list[str]]) -> None:
    """Refuse a post from another site, or without the form token of ``viewer``'s session.

    Raises:
        FormRefused: as :func:`check_origin`, or a missing or wrong form token.
    """
    check_origin(request)
    if not form_token_matches(server_of(request).keyring, viewer.session_id, field(form, "csrf")):
        raise FormRefused("the form's token is missing or not this session's: reload the page")
