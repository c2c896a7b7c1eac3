"""Signing in and out of the dashboard.

Sign in with a pasted token, or with a one-time link that ``feltdb grant issue --login``
prints (``/ui/login#ticket=fgl1.…``: the ticket rides in the fragment, which browsers never
send, so it is in no server's log; the page's script posts it). Either way the grant is
verified exactly as a bearer token's is (signature, validity, revocation), a session is
opened in the store (:mod:`feltdb.server.ui.sessions`), and the browser gets a signed cookie
naming it: HTTP-only, ``SameSite=Strict``, scoped to ``/ui``, ``Secure`` over HTTPS, and
holding no token. Signing out ends the session in the store, for every server.

The sign-in form is protected too (login CSRF: no other site may sign a browser in as
someone else): it carries a token bound to a nonce cookie of its own.
"""

from __future__ import annotations

import re
import secrets
from typing import Final

from fastapi import APIRouter, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from feltdb.auth.sessions import (
    TICKET_PREFIX,
    form_token,
    form_token_matches,
    new_session_id,
    session_cookie,
    verify_ticket,
)
from feltdb.auth.tokens import decode_token
from feltdb.errors import ErrorCode, WorkloadError
from feltdb.server.routes.deps import ServerState, unrevoked
from feltdb.server.ui import sessions
from feltdb.server.ui.render import UI_HEADERS, page
from feltdb.server.ui.routing import PageRoute
from feltdb.server.ui.viewer import (
    COOKIE,
    SIGN_IN_COOKIE,
    FormRefused,
    SignInRequired,
    check_form,
    check_origin,
    field,
    form_of,
    server_of,
    viewer_of,
)

router = APIRouter(prefix="/ui", include_in_schema=False, route_class=PageRoute)

HOME: Final = "/ui/"
_NEXT: Final = re.compile(r"/ui(/[A-Za-z0-9._~!$&'()*+,;=:@%/?-]*)?")
"""Where a sign-in may go on to: a path of the dashboard, never another site."""
_NONCE: Final = re.compile(r"[0-9a-f]{32}")
"""A sign-in form's nonce, as its cookie holds it."""
SIGN_IN_NONCE_S: Final = 3600
"""How long a sign-in form's nonce cookie lasts."""


def next_path(text: str | None) -> str:
    """``text`` if it is a path of the dashboard (at most 2,000 characters, no ``//`` and no
    dot segment, even percent-encoded), else the overview: a sign-in can never send the
    browser to another site, nor out of the dashboard.
    """
    if text is None or len(text) > 2000 or _NEXT.fullmatch(text) is None:
        return HOME
    if "//" in text or ".." in text or "%2e" in text.lower():
        return HOME
    return text


def _signed_in_with(state: ServerState, secret: str, at: int) -> tuple[str, int]:
    """Open a session for the grant ``secret`` (a token or a sign-in ticket) carries;
    its id and end (blocking).

    Raises:
        WorkloadError: ``WORKLOAD_UNAUTHORIZED`` naming why the grant does not sign in.
    """
    if secret.startswith(TICKET_PREFIX):
        ticket = verify_ticket(state.keyring, secret, at)
        grant, key_id = ticket.grant, ticket.key_id
        unrevoked(state.store, grant, key_id)
        if not sessions.spend_ticket(state.store.db, ticket.nonce, ticket.expires_at, at):
            raise WorkloadError(
                ErrorCode.WORKLOAD_UNAUTHORIZED,
                "this sign-in link was used already: each link signs in once",
            )
    else:
        signed = decode_token(secret)
        grant, key_id = state.keyring.verify_signed(signed, at), signed.key_id
        unrevoked(state.store, grant, key_id)
    wait = state.sign_ins.per_grant.take(f"{grant.tenant_id}/{grant.application_id}/{grant.id}")
    if wait:
        raise _GrantLimited(wait)
    session_id = new_session_id()
    ends = sessions.open_session(
        state.store.db, session_id, state.keyring.evidence(grant, key_id), at
    )
    return session_id, ends


class _GrantLimited(Exception):
    """The grant signed in as often as it may for now: again in ``wait`` seconds."""

    def __init__(self, wait: int) -> None:
        super().__init__(wait)
        self.wait = wait


def _too_many(request: Request, message: str, wait: int) -> HTMLResponse:
    """The sign-in page refusing ``429``, saying when to try again."""
    answer = _sign_in_form(request, message, 429)
    answer.headers["Retry-After"] = str(wait)
    return answer


def _sign_in_form(
    request: Request,
    message: str | None = None,
    status_code: int = 200,
    *,
    signed_in_as: str | None = None,
) -> HTMLResponse:
    """The sign-in page, with a form token bound to the browser's sign-in nonce."""
    nonce = request.cookies.get(SIGN_IN_COOKIE)
    if nonce is None or not _NONCE.fullmatch(nonce):
        nonce = secrets.token_hex(16)
    keyring = server_of(request).keyring
    answer = page(
        request,
        "login.html",
        None,
        status_code=status_code,
        message=message,
        form_token=form_token(keyring, f"sign-in:{nonce}"),
        next=next_path(request.query_params.get("next")),
        signed_out="signed_out" in request.query_params,
        signed_in_as=signed_in_as,
    )
    answer.set_cookie(
        SIGN_IN_COOKIE, nonce, max_age=SIGN_IN_NONCE_S, path="/ui", httponly=True,
        samesite="strict", secure=request.url.scheme == "https",
    )  # fmt: skip
    return answer


@router.get("/login")
def sign_in_page(request: Request) -> Response:
    """The sign-in form; to a browser signed in already, with who it is signed in as (a
    sign-in link opened there is used, and switches the session: never left unspent in
    the address bar of a page it was redirected to).
    """
    try:
        viewer = viewer_of(request)
    except SignInRequired:
        return _sign_in_form(request)
    return _sign_in_form(request, signed_in_as=viewer.subject)


@router.post("/login")
async def sign_in(request: Request) -> Response:
    """Verify the pasted token or the link's ticket, open a session, go on to ``next``."""
    form = await form_of(request)
    check_origin(request)
    nonce = request.cookies.get(SIGN_IN_COOKIE, "")
    keyring = server_of(request).keyring
    if not _NONCE.fullmatch(nonce) or not form_token_matches(
        keyring, f"sign-in:{nonce}", field(form, "csrf")
    ):
        raise FormRefused("the sign-in form's token is missing or stale: reload the page")
    secret = (field(form, "ticket") or field(form, "token") or "").strip()
    if not secret:
        return _sign_in_form(request, "Paste a token (fgt2.…) or open a sign-in link.", 400)
    state = server_of(request)
    client = request.client.host if request.client is not None else "-"
    wait = state.sign_ins.per_client.take(client)
    if wait:
        return _too_many(
            request, f"Too many sign-ins from this address: try again in {wait} s.", wait
        )
    try:
        session_id, ends = await run_in_threadpool(_signed_in_with, state, secret, state.clock())
    except _GrantLimited as limited:
        return _too_many(
            request,
            f"Too many sign-ins with this grant: try again in {limited.wait} s.",
            limited.wait,
        )
    except WorkloadError as error:
        if error.code != ErrorCode.WORKLOAD_UNAUTHORIZED:
            raise
        return _sign_in_form(request, f"Not signed in: {error.message}.", 401)
    # A session the browser held is replaced, not ended: a cookie may have been planted,
    # and signing in must never end somebody else's session. It lasts until its own end.
    answer = RedirectResponse(next_path(field(form, "next")), status_code=303, headers=UI_HEADERS)
    answer.set_cookie(
        COOKIE, session_cookie(keyring, session_id), max_age=max(1, ends - state.clock()),
        path="/ui", httponly=True, samesite="strict", secure=request.url.scheme == "https",
    )  # fmt: skip
    answer.delete_cookie(SIGN_IN_COOKIE, path="/ui")
    return answer


@router.post("/logout")
async def sign_out(request: Request) -> Response:
    """End the session (in the store, so on every server) and forget the cookie."""
    form = await form_of(request)
    viewer = await run_in_threadpool(viewer_of, request)
    check_form(request, viewer, form)
    state = server_of(request)
    await run_in_threadpool(sessions.end_session, state.store.db, viewer.session_id, state.clock())
    state.sessions.clear()  # this server: at once; the others within their bound (1 s)
    answer = RedirectResponse("/ui/login?signed_out", status_code=303, headers=UI_HEADERS)
    answer.delete_cookie(COOKIE, path="/ui", httponly=True, samesite="strict")
    return answer
