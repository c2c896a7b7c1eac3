"""The dashboard at ``/ui/`` attacked over HTTP, against a real ``feltdb serve`` process
seeded as its users would seed it (:func:`support.dashboard.seed`).

Each test is an attack on one endpoint or credential, and checks the refusal and that
nothing changed: the session cookie and what the store keeps of it, replaying what is
stored or shown, forged cookies, cross-site posts (CSRF, login CSRF), a grant reaching
past what it may see or do, revocation and expiry, open redirects after sign-in, one-time
links, the bounds of queries and forms, and the headers and content of every page.

The server is this module's own (a SQLite file, seeded once): the package's server of each
backend is not used, since the seed is shared by every test here. Tests that end sessions
or revoke grants use grants of their own.
"""

from __future__ import annotations

import base64
import json
import re
import sqlite3
import ssl
import threading
import time
from collections.abc import Iterator
from contextlib import closing, contextmanager
from typing import Any

import httpx
import msgspec
import pytest
from support.dashboard import (
    APPLICATION,
    APPROVER,
    SCRIPT,
    Seeded,
    form_token,
    ids_on,
    seed,
    signed_in,
)
from support.server import Server, serve

from feltdb import Subject, WorkloadStore
from feltdb.auth import GrantConstraints
from feltdb.auth.grants import GrantStatus, SignedGrant
from feltdb.auth.policy import READ
from feltdb.auth.sessions import (
    issue_ticket,
    new_session_id,
    session_cookie,
    session_key,
    verify_ticket,
)
from feltdb.auth.tokens import Keyring, decode_token, encode_token
from feltdb.server.ui.render import UI_CSP
from feltdb.server.ui.sessions import SESSION_LIFETIME_S, SESSIONS_COLLECTION
from feltdb.server.ui.viewer import COOKIE, MAX_FORM_FIELDS, SIGN_IN_COOKIE
from feltdb.storage.canonical import canonical_json

EVIL = "http://evil.example"
INVALID = 422
"""What the dashboard answers an invalid query or form (a too-long search, a garbage
cursor): the status the API answers ``WORKLOAD_INVALID`` with (``status_for``), as
``server/ui/routing.py`` says its refusal pages do."""
TOKEN_TEXT = re.compile(r"fgt2\.[A-Za-z0-9_-]{16,}")
"""A token as it would appear in a page (the sign-in page's "fgt2.…" hint is not one)."""
TICKET_TEXT = re.compile(r"fgl1\.[A-Za-z0-9_-]{16,}")
TLS = ssl.create_default_context()
"""One TLS context for every client here (none is used: the server is plain HTTP), so that
a client costs no loading of certificates."""


# ------------------------------------------------------------------ fixtures and helpers


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """This module's ``feltdb serve``, on a SQLite file (see the module's docstring)."""
    yield from serve(tmp_path_factory.mktemp("dashboard-edge"))


@pytest.fixture(scope="module")
def seeded(server: Server) -> Seeded:
    return seed(server)


@pytest.fixture(scope="module")
def admin(server: Server, seeded: Seeded) -> Iterator[httpx.Client]:
    """A dashboard session of ``human:ada``, who may do everything in the seeded
    application. No test ends it.
    """
    http = signed_in(server, server.token(APPLICATION, subject=APPROVER), verify=TLS)
    try:
        yield http
    finally:
        http.close()


@pytest.fixture(scope="module")
def csrf(admin: httpx.Client) -> str:
    """The form token of :func:`admin`'s session."""
    return form_token(admin.get("/ui/").text)


@contextmanager
def session(server: Server, token: str) -> Iterator[httpx.Client]:
    """A dashboard session signed in with ``token``, closed afterwards."""
    http = signed_in(server, token, verify=TLS)
    try:
        yield http
    finally:
        http.close()


@contextmanager
def browser(server: Server) -> Iterator[httpx.Client]:
    """A client holding no session, following no redirect."""
    with httpx.Client(base_url=server.url, timeout=10, verify=TLS) as http:
        yield http


def get(server: Server, path: str, **options: Any) -> httpx.Response:
    return httpx.get(f"{server.url}{path}", timeout=10, verify=TLS, **options)


def post(server: Server, path: str, **options: Any) -> httpx.Response:
    return httpx.post(f"{server.url}{path}", timeout=10, verify=TLS, **options)


def cookie_header(value: str) -> dict[str, str]:
    return {"Cookie": f"{COOKIE}={value}"}


def api(server: Server) -> dict[str, str]:
    """Headers of a token that reads all of the seeded application through ``/v1``."""
    return server.headers(APPLICATION)


def world(server: Server) -> dict[str, Any]:
    """Every workload of the seeded application, as the API answers it: what a test
    compares before and after an attack to show that nothing changed.
    """
    answer = get(server, "/v1/workloads", params={"limit": 500}, headers=api(server))
    assert answer.status_code == 200, answer.text
    return {item["workload_id"]: item for item in answer.json()["items"]}


def sign_in_answer(
    http: httpx.Client, secret: str, *, field: str = "token", **extra: str
) -> httpx.Response:
    """Load the sign-in page (its nonce cookie and form token), then post ``secret``
    (a token, or with ``field="ticket"`` a link's ticket); the answer, not followed.
    """
    page = http.get("/ui/login", follow_redirects=False)
    assert page.status_code == 200, page.text
    data = {"csrf": form_token(page.text), field: secret, **extra}
    return http.post("/ui/login", data=data, follow_redirects=False)


def session_cookie_of(answer: httpx.Response) -> str | None:
    """The ``Set-Cookie`` line of the session cookie in ``answer``, if it sets one."""
    for line in answer.headers.get_list("set-cookie"):
        if line.startswith(f"{COOKIE}=") and not line.startswith(f'{COOKIE}="";'):
            return line
    return None


def parts_of(cookie: str) -> tuple[str, str, str]:
    """A session cookie's ``(session id, key id, signature)``."""
    prefix, session_id, rest = cookie.split(".", 2)
    assert prefix == "fgs1"
    key_id, signature = rest.rsplit(".", 1)
    return session_id, key_id, signature


def stored_text(server: Server) -> str:
    """Everything the store's file holds, as text: every row and log entry of every table."""
    with closing(sqlite3.connect(f"file:{server.target}?mode=ro", uri=True)) as db:
        tables = [
            name for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type='table'")
        ]
        assert {"rows", "transactions"} <= set(tables)
        dumped = []
        for table in tables:
            for row in db.execute(f'SELECT * FROM "{table}"'):
                dumped.append(repr(row))
    return "\n".join(dumped)


def stored_session(server: Server, session_id: str) -> dict[str, Any] | None:
    with WorkloadStore.open(server.target) as store:
        row = store.db.get_row(SESSIONS_COLLECTION, session_key(session_id))
    return None if row is None else dict(row.document)


def snapshot_signatures(server: Server, workload_ids: list[str]) -> set[str]:
    """The evidence signatures of these workloads' ``authorization_snapshot``, read from
    the store.
    """
    with WorkloadStore.open(server.target) as store:
        return {store.get(w).authorization_snapshot.signature for w in workload_ids}


def ticket_document(ticket: str) -> dict[str, Any]:
    encoded = ticket.removeprefix("fgl1.")
    document: dict[str, Any] = json.loads(
        base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4))
    )
    return document


def ticket_of(document: dict[str, Any]) -> str:
    raw = canonical_json(document).encode("utf-8")
    return "fgl1." + base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def refused_on_v1(server: Server, token: str) -> int:
    answer = get(server, "/v1/workloads", headers={"Authorization": f"Bearer {token}"})
    return answer.status_code


def all_seeded(seeded: Seeded) -> list[str]:
    return [*seeded.succeeded, *seeded.dead, *seeded.held, *seeded.ready, seeded.script]


# ------------------------------------------------------------------ the session cookie


def test_the_session_cookie_is_http_only_strict_scoped_to_the_dashboard_and_holds_no_token(
    server: Server, seeded: Seeded
):
    grant = server.grant(APPLICATION, subject=APPROVER)
    token = server.keyring.sign(grant)
    with browser(server) as http:
        answer = sign_in_answer(http, token)
    assert answer.status_code == 303, answer.text
    line = session_cookie_of(answer)
    assert line is not None, answer.headers
    value, *attributes = [part.strip() for part in line.split(";")]
    flags = {a.split("=", 1)[0].lower(): a.split("=", 1)[-1].lower() for a in attributes}
    assert "httponly" in flags
    assert flags["samesite"] == "strict"
    assert flags["path"] == "/ui"
    assert 0 < int(flags["max-age"]) <= SESSION_LIFETIME_S
    assert "secure" not in flags  # plain HTTP here; see the next test for HTTPS
    cookie = value.split("=", 1)[1]
    assert cookie.startswith("fgs1.") and len(cookie) < 200
    body, signed = token.removeprefix("fgt2."), decode_token(token)
    for secret in ("fgt2.", body, body[:24], signed.signature, grant.id):
        assert secret not in cookie
    # The sign-in form's nonce cookie is forgotten once it served.
    assert any(
        line.startswith(f'{SIGN_IN_COOKIE}="";') or line.startswith(f"{SIGN_IN_COOKIE}=;")
        for line in answer.headers.get_list("set-cookie")
    ), answer.headers.get_list("set-cookie")


def test_behind_a_tls_proxy_both_cookies_are_secure(server: Server, seeded: Seeded):
    # uvicorn believes X-Forwarded-Proto from loopback, as from a TLS-terminating proxy.
    forwarded = {"X-Forwarded-Proto": "https"}
    with httpx.Client(base_url=server.url, timeout=10, headers=forwarded, verify=TLS) as http:
        page = http.get("/ui/login")
        (nonce_line,) = [
            line for line in page.headers.get_list("set-cookie") if line.startswith(SIGN_IN_COOKIE)
        ]
        assert "secure" in [part.strip().lower() for part in nonce_line.split(";")]
        nonce = nonce_line.split(";", 1)[0]  # the client keeps a Secure cookie off plain HTTP
        answer = http.post(
            "/ui/login",
            data={"csrf": form_token(page.text), "token": server.token(APPLICATION)},
            headers={"Cookie": nonce},
        )
    assert answer.status_code == 303, answer.text
    line = session_cookie_of(answer)
    assert line is not None
    assert "secure" in [part.strip().lower() for part in line.split(";")]


def test_the_store_keeps_neither_the_session_id_nor_the_cookie_only_its_digest(
    server: Server, seeded: Seeded
):
    token = server.token(APPLICATION, subject=APPROVER)
    with session(server, token) as http:
        cookie = http.cookies[COOKIE]
        assert http.get("/ui/").status_code == 200
    session_id, _, signature = parts_of(cookie)
    text = stored_text(server)
    for secret in (session_id, cookie, signature, token, decode_token(token).signature):
        assert secret not in text
    assert not TOKEN_TEXT.search(text) and not TICKET_TEXT.search(text)
    assert session_key(session_id) in text
    row = stored_session(server, session_id)
    assert row is not None and row["subject"] == str(APPROVER)


# ------------------------------------------------------------------ nothing stored is a credential


def test_a_sessions_stored_evidence_is_no_token_and_signs_nobody_in(server: Server, seeded: Seeded):
    with session(server, server.token(APPLICATION, subject=APPROVER)) as http:
        session_id, _, _ = parts_of(http.cookies[COOKIE])
    row = stored_session(server, session_id)
    assert row is not None
    evidence = SignedGrant.parse(row["evidence"])
    replayed = encode_token(evidence)
    assert refused_on_v1(server, replayed) == 403
    with browser(server) as http:
        answer = sign_in_answer(http, replayed)
    assert answer.status_code == 401 and session_cookie_of(answer) is None, answer.text


def test_a_workloads_authorization_snapshot_is_no_token_and_signs_nobody_in(
    server: Server, seeded: Seeded
):
    with WorkloadStore.open(server.target) as store:
        snapshot = store.get(seeded.held[0]).authorization_snapshot
    replayed = encode_token(snapshot)
    assert refused_on_v1(server, replayed) == 403
    with browser(server) as http:
        answer = sign_in_answer(http, replayed)
    assert answer.status_code == 401 and session_cookie_of(answer) is None, answer.text


def test_no_dashboard_signature_is_a_token_signature(
    server: Server, seeded: Seeded, admin: httpx.Client, csrf: str
):
    grant = server.grant(APPLICATION, subject=APPROVER)
    ticket = issue_ticket(server.keyring, grant, int(time.time()))
    document = ticket_document(ticket)
    _, key_id, cookie_signature = parts_of(admin.cookies[COOKIE])
    form_key, form_signature = csrf.split("~")
    # The ticket's grant with the ticket's signature, the form token's or the cookie's:
    for key, signature in (
        (document["key_id"], document["signature"]),
        (form_key, form_signature),
        (key_id, cookie_signature),
    ):
        forged = encode_token(SignedGrant(grant=grant, key_id=key, signature=signature))
        assert refused_on_v1(server, forged) == 403
    # The ticket, the cookie and the form token themselves are not bearer tokens either.
    for credential in (ticket, admin.cookies[COOKIE], csrf):
        assert refused_on_v1(server, credential) == 401


def test_the_session_cookie_is_no_credential_for_the_api_nor_a_token_for_the_dashboard(
    server: Server, seeded: Seeded, admin: httpx.Client
):
    cookie = admin.cookies[COOKIE]
    answer = get(server, "/v1/workloads", headers=cookie_header(cookie))
    assert answer.status_code == 401, answer.text
    with browser(server) as http:
        page = http.get("/ui/", headers=api(server))
    assert page.status_code == 303 and page.headers["location"].startswith("/ui/login")


# ------------------------------------------------------------------ forged cookies


def _flip(text: str, at: int) -> str:
    swapped = "B" if text[at] != "B" else "C"
    if text[at] in "0123456789abcdef":
        swapped = "0" if text[at] != "0" else "1"
    return text[:at] + swapped + text[at + 1 :]


def forged_cookies(server: Server, cookie: str, csrf: str) -> dict[str, str]:
    session_id, key_id, signature = parts_of(cookie)
    same_key_id = Keyring.generate(server.keyring.active)
    return {
        "altered-id": f"fgs1.{_flip(session_id, 5)}.{key_id}.{signature}",
        "altered-signature": f"fgs1.{session_id}.{key_id}.{_flip(signature, 63)}",
        "uppercase-signature": f"fgs1.{session_id}.{key_id}.{signature.upper()}",
        "other-keyring": session_cookie(same_key_id, session_id),
        "other-key-id": session_cookie(Keyring.generate(), session_id),
        "form-token-as-signature": f"fgs1.{session_id}.{key_id}.{csrf.split('~')[1]}",
        "signed-but-never-opened": session_cookie(server.keyring, new_session_id()),
        "overlong": cookie + "A" * 600,
        "truncated": cookie[:-1],
        "garbage": "fgs1.a.b.c",
        "empty": "",
        "token": server.token(APPLICATION, subject=APPROVER),
    }


FORGERIES = [
    "altered-id", "altered-signature", "uppercase-signature", "other-keyring",
    "other-key-id", "form-token-as-signature", "signed-but-never-opened", "overlong",
    "truncated", "garbage", "empty", "token",
]  # fmt: skip


@pytest.mark.parametrize("forgery", FORGERIES)
def test_a_forged_cookie_signs_nobody_in_and_changes_nothing(
    server: Server, seeded: Seeded, admin: httpx.Client, csrf: str, forgery: str
):
    forged = forged_cookies(server, admin.cookies[COOKIE], csrf)[forgery]
    before = world(server)
    hashes = {w: before[w]["input_hash"] for w in seeded.held}
    with browser(server) as http:
        for path in ("/ui/", f"/ui/workloads/{seeded.held[0]}", "/ui/approvals"):
            page = http.get(path, headers=cookie_header(forged))
            assert page.status_code == 303, (path, page.text)
            assert page.headers["location"].startswith("/ui/login?next=/ui/")
            assert "mallory" not in page.text
        # The posts carry the real session's form token: only the cookie is forged.
        for path, data in (
            (f"/ui/workloads/{seeded.ready[0]}/cancel", {}),
            (f"/ui/workloads/{seeded.dead[0]}/retry", {"reason": "forged"}),
            (
                f"/ui/approvals/{seeded.held[0]}/decision",
                {"outcome": "approved", "input_hash": hashes[seeded.held[0]]},
            ),
            ("/ui/dead-letters/retry", {"workload_id": seeded.dead, "reason": "forged"}),
            ("/ui/audit/verify", {}),
            ("/ui/logout", {}),
        ):
            answer = http.post(path, data={"csrf": csrf, **data}, headers=cookie_header(forged))
            assert answer.status_code == 401, (path, answer.status_code, answer.text[:300])
            assert session_cookie_of(answer) is None
    assert world(server) == before
    assert admin.get("/ui/", follow_redirects=False).status_code == 200


# ------------------------------------------------------------------ CSRF


def action(seeded: Seeded, before: dict[str, Any], name: str) -> tuple[str, dict[str, Any]]:
    """The path and fields (but the form token) of the action ``name`` on seeded work."""
    held = seeded.held[0]
    return {
        "cancel": (f"/ui/workloads/{seeded.ready[0]}/cancel", {}),
        "retry": (f"/ui/workloads/{seeded.dead[0]}/retry", {"reason": "forged"}),
        "decision": (
            f"/ui/approvals/{held}/decision",
            {"outcome": "approved", "input_hash": before[held]["input_hash"]},
        ),
        "dead-letters": ("/ui/dead-letters/retry", {"workload_id": seeded.dead, "reason": "x"}),
        "verify": ("/ui/audit/verify", {}),
        "logout": ("/ui/logout", {}),
    }[name]


ACTIONS = ["cancel", "retry", "decision", "dead-letters", "verify", "logout"]
CSRF_ATTACKS = [
    "no-token", "empty-token", "other-sessions-token", "sign-in-forms-token", "two-tokens",
    "evil-origin", "evil-referer", "null-origin", "other-port-origin", "https-origin",
]  # fmt: skip


@pytest.fixture(scope="module")
def other_csrf(server: Server, seeded: Seeded) -> str:
    """The form token of another session (of the same person, on the same server)."""
    with session(server, server.token(APPLICATION, subject=APPROVER)) as other:
        return form_token(other.get("/ui/").text)


@pytest.mark.parametrize("attack", CSRF_ATTACKS)
@pytest.mark.parametrize("name", ACTIONS)
def test_a_cross_site_post_is_refused_and_changes_nothing(
    server: Server,
    seeded: Seeded,
    admin: httpx.Client,
    csrf: str,
    other_csrf: str,
    name: str,
    attack: str,
):
    before = world(server)
    path, fields = action(seeded, before, name)
    with browser(server) as http:
        sign_in_csrf = form_token(http.get("/ui/login").text)
    port = server.url.rsplit(":", 1)[1]
    token: Any = {
        "no-token": None,
        "empty-token": "",
        "other-sessions-token": other_csrf,
        "sign-in-forms-token": sign_in_csrf,
        "two-tokens": [csrf, other_csrf],
    }.get(attack, csrf)
    headers = {
        "evil-origin": {"Origin": EVIL},
        "evil-referer": {"Referer": f"{EVIL}/cute-cats"},
        "null-origin": {"Origin": "null"},
        "other-port-origin": {"Origin": f"http://127.0.0.1:{int(port) + 1}"},
        "https-origin": {"Origin": f"https://127.0.0.1:{port}"},
    }.get(attack, {})
    data = dict(fields) if token is None else {**fields, "csrf": token}
    answer = admin.post(path, data=data, headers=headers, follow_redirects=False)
    assert answer.status_code == 403, (answer.status_code, answer.text[:400])
    assert "Not allowed" in answer.text and "Verified" not in answer.text
    assert world(server) == before
    assert admin.get("/ui/", follow_redirects=False).status_code == 200  # still signed in


def test_a_post_from_the_dashboard_itself_is_let_through(
    server: Server, seeded: Seeded, admin: httpx.Client, csrf: str
):
    # The control of the attacks above: the same post, with the right token, from here.
    for headers in ({"Origin": server.url}, {"Referer": f"{server.url}/ui/audit"}, {}):
        answer = admin.post("/ui/audit/verify", data={"csrf": csrf}, headers=headers)
        assert answer.status_code == 200, answer.text
        assert "Verified" in answer.text


@pytest.mark.parametrize("name", ACTIONS)
def test_an_action_is_never_done_by_a_get(
    server: Server, seeded: Seeded, admin: httpx.Client, csrf: str, name: str
):
    before = world(server)
    path, fields = action(seeded, before, name)
    answer = admin.get(path, params={"csrf": csrf, **fields}, follow_redirects=False)
    assert answer.status_code == 405, answer.text
    assert world(server) == before


LOGIN_CSRF_ATTACKS = [
    "no-nonce-cookie", "no-token", "wrong-token", "another-browsers-token",
    "a-sessions-token", "evil-origin", "null-origin",
]  # fmt: skip


@pytest.mark.parametrize("attack", LOGIN_CSRF_ATTACKS)
def test_no_other_site_can_sign_a_browser_in(
    server: Server, seeded: Seeded, csrf: str, attack: str
):
    token = server.token(APPLICATION, subject=Subject.human("mallory"))
    with browser(server) as victim, browser(server) as attacker:
        own = form_token(victim.get("/ui/login").text)
        theirs = form_token(attacker.get("/ui/login").text)
        if attack == "no-nonce-cookie":
            victim.cookies.clear()
        field = {
            "no-token": None,
            "wrong-token": own[:-1] + ("0" if own[-1] != "0" else "1"),
            "another-browsers-token": theirs,
            "a-sessions-token": csrf,
        }.get(attack, own)
        headers = {"evil-origin": {"Origin": EVIL}, "null-origin": {"Origin": "null"}}.get(
            attack, {}
        )
        data = {"token": token} if field is None else {"token": token, "csrf": field}
        answer = victim.post("/ui/login", data=data, headers=headers)
        assert answer.status_code == 403, (answer.status_code, answer.text[:300])
        assert session_cookie_of(answer) is None
        assert victim.get("/ui/").status_code == 303
        # The control: the browser's own form, from here, signs in.
        fresh = form_token(victim.get("/ui/login").text)
        fine = victim.post("/ui/login", data={"token": token, "csrf": fresh})
        assert fine.status_code == 303 and session_cookie_of(fine) is not None


def test_a_sign_in_always_opens_a_new_session_whatever_cookie_the_browser_held(
    server: Server, seeded: Seeded, admin: httpx.Client
):
    # Session fixation: a cookie planted in the victim's browser is not what it signs in as.
    planted = admin.cookies[COOKIE]
    with browser(server) as http:
        page = http.get("/ui/login")
        http.cookies.set(COOKIE, planted)
        token = server.token(APPLICATION, subject=Subject.human("bob"))
        answer = http.post("/ui/login", data={"csrf": form_token(page.text), "token": token})
    line = session_cookie_of(answer)
    assert answer.status_code == 303 and line is not None
    fresh = line.split(";", 1)[0].split("=", 1)[1]
    assert parts_of(fresh)[0] != parts_of(planted)[0]
    assert "human:ada" in admin.get("/ui/").text  # the planted session is still ada's


# ------------------------------------------------------------------ authorization


def test_a_reader_is_offered_no_action_and_its_forged_posts_are_refused(
    server: Server, seeded: Seeded
):
    reader = server.token(APPLICATION, subject=Subject.human("reader"), capabilities={READ})
    before = world(server)
    with session(server, reader) as http:
        overview = http.get("/ui/")
        assert overview.status_code == 200
        for link in ('href="/ui/approvals"', 'href="/ui/dead-letters"', 'href="/ui/audit"'):
            assert link not in overview.text
        for workload_id in (seeded.ready[0], seeded.dead[0], seeded.held[0]):
            page = http.get(f"/ui/workloads/{workload_id}")
            assert page.status_code == 200, page.text
            assert 'id="actions"' not in page.text
            for offer in ("/cancel", "/retry", "/decision", "approval inbox"):
                assert offer not in page.text
        for path in ("/ui/approvals", "/ui/dead-letters", "/ui/audit"):
            assert http.get(path).status_code == 403, path
        token = form_token(overview.text)
        for name in ("cancel", "retry", "decision", "dead-letters", "verify"):
            path, fields = action(seeded, before, name)
            answer = http.post(path, data={"csrf": token, **fields}, follow_redirects=False)
            assert answer.status_code == 403, (name, answer.text[:300])
            assert "Verified" not in answer.text
    assert world(server) == before


FOREIGN = {"other-tenant": ("evil", APPLICATION), "other-application": ("t", "elsewhere")}


@pytest.mark.parametrize("where", FOREIGN.values(), ids=FOREIGN.keys())
def test_a_grant_elsewhere_finds_none_of_the_applications_work(
    server: Server, seeded: Seeded, where: tuple[str, str]
):
    tenant, application = where
    before = world(server)
    outsider = server.token(application, tenant=tenant, subject=Subject.human("eve"))
    ours = all_seeded(seeded)
    with session(server, outsider) as http:
        for workload_id in ours:
            page = http.get(f"/ui/workloads/{workload_id}")
            assert page.status_code == 404, (workload_id, page.text[:300])
            for content in ("mallory@example.com", "user0@example.com", "refund-1", "nightly"):
                assert content not in page.text
        for path in (
            "/ui/",
            "/ui/workloads",
            "/ui/workloads?q=workload_",
            "/ui/workloads?q=refund",
            "/ui/workloads?state=AWAITING_APPROVAL",
            "/ui/approvals",
            "/ui/dead-letters",
            "/ui/audit",
        ):
            page = http.get(path)
            assert page.status_code == 200, path
            assert ids_on(page.text, ours) == [], path
            assert "payout" not in page.text and "mallory" not in page.text, path
        for workload_id in (seeded.held[0], seeded.dead[0]):
            audit = http.get("/ui/audit", params={"workload": workload_id}).text
            assert "No transaction" in audit and "/ui/workloads/" not in audit
        token = form_token(http.get("/ui/").text)
        for name in ("cancel", "retry", "decision"):
            path, fields = action(seeded, before, name)
            answer = http.post(path, data={"csrf": token, **fields}, follow_redirects=False)
            assert answer.status_code == 404, (name, answer.text[:300])
        retried = http.post(
            "/ui/dead-letters/retry",
            data={"csrf": token, "workload_id": seeded.dead, "reason": "x"},
        )
        assert retried.status_code == 200 and "re-armed" not in retried.text
    assert world(server) == before


def narrowed_token(server: Server, definition: str) -> str:
    grant = server.grant(APPLICATION, subject=Subject.human("narrow"))
    grant = msgspec.structs.replace(grant, constraints=GrantConstraints(definitions=[definition]))
    return server.keyring.sign(grant)


COUNTED_ROW = re.compile(r'<th scope="row"><a href="/ui/workloads\?definition=([^"&]+)">')


def test_a_grant_narrowed_to_one_definition_sees_only_its_work(server: Server, seeded: Seeded):
    before = world(server)
    mine = [*seeded.dead, *seeded.ready]  # the report workloads
    others = [*seeded.succeeded, *seeded.held, seeded.script]
    with session(server, narrowed_token(server, "report")) as http:
        overview = http.get("/ui/").text
        assert COUNTED_ROW.findall(overview) == ["report"]
        assert ids_on(overview, others) == []
        listed = http.get("/ui/workloads").text
        assert sorted(ids_on(listed, mine)) == sorted(mine)
        assert ids_on(listed, others) == []
        for query in ("workload_", "order", "refund", "hostile", "nightly"):
            found = http.get("/ui/workloads", params={"q": query}).text
            assert ids_on(found, others) == [], query
        assert sorted(ids_on(http.get("/ui/workloads?q=workload_").text, mine)) == sorted(mine)
        assert ids_on(http.get("/ui/workloads?definition=send").text, others) == []
        assert ids_on(http.get("/ui/approvals").text, seeded.held) == []
        assert sorted(ids_on(http.get("/ui/dead-letters").text, seeded.dead)) == sorted(seeded.dead)
        for workload_id in others:
            page = http.get(f"/ui/workloads/{workload_id}")
            assert page.status_code == 404, workload_id
            assert "mallory" not in page.text and "user0@" not in page.text
        assert http.get(f"/ui/workloads/{mine[0]}").status_code == 200
        assert http.get("/ui/audit").status_code == 403  # the audit is the whole application's
        token = form_token(overview)
        cancel = http.post(f"/ui/workloads/{seeded.script}/cancel", data={"csrf": token})
        assert cancel.status_code == 404
        held = seeded.held[1]
        decide = http.post(
            f"/ui/approvals/{held}/decision",
            data={"csrf": token, "outcome": "approved", "input_hash": before[held]["input_hash"]},
        )
        assert decide.status_code == 404
    assert world(server) == before


# ------------------------------------------------------------------ revocation and expiry


def test_revoking_the_grant_through_the_api_ends_its_session_at_once(
    server: Server, seeded: Seeded
):
    grant = server.grant(APPLICATION, subject=Subject.human("leaver"))
    token = server.keyring.sign(grant)
    with session(server, token) as http:
        page = http.get("/ui/")
        assert page.status_code == 200
        revoked = post(server, f"/v1/grants/{grant.id}/revoke", headers=api(server))
        assert revoked.status_code == 200, revoked.text
        after = http.get("/ui/approvals", follow_redirects=False)
        assert after.status_code == 303
        assert after.headers["location"] == "/ui/login?next=/ui/approvals"
        answer = http.post("/ui/audit/verify", data={"csrf": form_token(page.text)})
        assert answer.status_code == 401
    with browser(server) as again:
        refused = sign_in_answer(again, token)
    assert refused.status_code == 401 and session_cookie_of(refused) is None
    assert "revoked" in refused.text


def test_a_session_ends_when_its_grant_expires(server: Server, seeded: Seeded):
    started = time.time()
    ends = int(started) + 2
    grant = server.grant(
        APPLICATION, subject=Subject.human("brief"), issued_at=ends - 60, lifetime=60
    )
    with session(server, server.keyring.sign(grant)) as http:
        cookie = http.cookies[COOKIE]
        assert http.get("/ui/").status_code == 200
    row = stored_session(server, parts_of(cookie)[0])
    assert row is not None and row["expires_at"] == grant.expires_at
    time.sleep(max(0.0, ends - time.time()) + 0.1)
    with browser(server) as http:
        page = http.get("/ui/", headers=cookie_header(cookie))
    assert page.status_code == 303, page.text
    assert page.headers["location"].startswith("/ui/login")


def test_a_signed_out_cookie_is_refused_at_once(server: Server, seeded: Seeded):
    with session(server, server.token(APPLICATION, subject=APPROVER)) as http:
        cookie = http.cookies[COOKIE]
        token = form_token(http.get("/ui/").text)
        out = http.post("/ui/logout", data={"csrf": token}, follow_redirects=False)
        assert out.status_code == 303 and out.headers["location"] == "/ui/login?signed_out"
    with browser(server) as http:
        assert http.get("/ui/", headers=cookie_header(cookie)).status_code == 303
        replayed = http.post("/ui/logout", data={"csrf": token}, headers=cookie_header(cookie))
        assert replayed.status_code == 401
    assert stored_session(server, parts_of(cookie)[0]) is None


# ------------------------------------------------------------------ open redirects

ELSEWHERE = [
    "//evil.example",
    "https://evil.example",
    "http:evil.example",
    "/ui/../x",
    "/ui/%2e%2e/x",
    "/ui/./../../x",
    "\\evil",
    "/\\evil.example",
    "/ui/\\\\evil.example",
    "//ui/",
    "/ui//evil.example",
    "javascript:alert(1)",
    "/uievil",
    "/ui\r\nSet-Cookie: x=y",
    "",
]


@pytest.mark.parametrize("target", ELSEWHERE)
def test_a_sign_in_goes_on_to_the_dashboard_only(server: Server, seeded: Seeded, target: str):
    token = server.token(APPLICATION, subject=APPROVER)
    with browser(server) as http:
        page = http.get("/ui/login", params={"next": target})
        assert 'name="next" value="/ui/"' in page.text
        answer = http.post(
            "/ui/login", data={"csrf": form_token(page.text), "token": token, "next": target}
        )
    assert answer.status_code == 303, answer.text
    assert answer.headers["location"] == "/ui/"


def test_a_sign_in_goes_on_to_the_dashboard_page_it_was_asked_for(server: Server, seeded: Seeded):
    target = f"/ui/workloads/{seeded.held[0]}"
    with browser(server) as http:
        answer = sign_in_answer(http, server.token(APPLICATION, subject=APPROVER), next=target)
    assert answer.status_code == 303 and answer.headers["location"] == target


# ------------------------------------------------------------------ one-time links


def ticket_for(server: Server, subject: Subject = APPROVER, **grant: Any) -> str:
    return issue_ticket(
        server.keyring, server.grant(APPLICATION, subject=subject, **grant), int(time.time())
    )


def test_a_sign_in_link_signs_in_once(server: Server, seeded: Seeded):
    ticket = ticket_for(server)
    with browser(server) as first:
        answer = sign_in_answer(first, ticket, field="ticket")
        assert answer.status_code == 303 and session_cookie_of(answer) is not None
        assert first.get("/ui/").status_code == 200
    with browser(server) as second:
        again = sign_in_answer(second, ticket, field="ticket")
    assert again.status_code == 401 and session_cookie_of(again) is None
    assert "used already" in again.text
    # Pasted where a token goes, it is the same link, spent.
    with browser(server) as third:
        pasted = sign_in_answer(third, ticket)
    assert pasted.status_code == 401 and session_cookie_of(pasted) is None


def test_a_sign_in_link_redeemed_twice_at_once_signs_in_once(server: Server, seeded: Seeded):
    ticket = ticket_for(server)
    start = threading.Barrier(2)
    statuses: list[int] = []

    def redeem() -> None:
        with browser(server) as http:
            page = http.get("/ui/login")
            start.wait(timeout=10)
            answer = http.post("/ui/login", data={"csrf": form_token(page.text), "ticket": ticket})
            statuses.append(answer.status_code)

    threads = [threading.Thread(target=redeem) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=20)
    assert sorted(statuses) == [303, 401]


def tampered_tickets(server: Server) -> dict[str, str]:
    document = ticket_document(ticket_for(server, Subject.human("intern"), capabilities={READ}))
    promoted = json.loads(json.dumps(document))
    promoted["body"]["grant"]["capabilities"] = sorted({READ, "workload:approve"})
    someone_else = json.loads(json.dumps(document))
    someone_else["body"]["grant"]["subject"] = {"kind": "human", "id": "ada"}
    longer = json.loads(json.dumps(document))
    longer["body"]["expires_at"] += 86400
    resigned = json.loads(json.dumps(document))
    resigned["signature"] = _flip(document["signature"], 0)
    other_key = json.loads(json.dumps(document))
    other_key["key_id"] = "k-elsewhere"
    stranger = Keyring.generate(server.keyring.active)
    now = int(time.time())
    return {
        "promoted-grant": ticket_of(promoted),
        "another-subject": ticket_of(someone_else),
        "longer-life": ticket_of(longer),
        "altered-signature": ticket_of(resigned),
        "unknown-key": ticket_of(other_key),
        "another-keyring": issue_ticket(stranger, server.grant(APPLICATION), now),
        "expired": issue_ticket(server.keyring, server.grant(APPLICATION), now - 600, 60),
        "grant-suspended": issue_ticket(
            server.keyring, server.grant(APPLICATION, status=GrantStatus.SUSPENDED), now
        ),
        "grant-not-yet-valid": issue_ticket(
            server.keyring, server.grant(APPLICATION, issued_at=now + 600), now
        ),
        "not-base64": "fgl1.%%%%",
        "not-json": "fgl1." + base64.urlsafe_b64encode(b"[1, 2").decode().rstrip("="),
        "no-body": ticket_of({"key_id": "k", "signature": "0" * 64}),
    }


TAMPERINGS = [
    "promoted-grant", "another-subject", "longer-life", "altered-signature", "unknown-key",
    "another-keyring", "expired", "grant-suspended", "grant-not-yet-valid", "not-base64",
    "not-json", "no-body",
]  # fmt: skip


@pytest.mark.parametrize("tampering", TAMPERINGS)
def test_a_tampered_or_expired_sign_in_link_is_refused(
    server: Server, seeded: Seeded, tampering: str
):
    ticket = tampered_tickets(server)[tampering]
    with browser(server) as http:
        answer = sign_in_answer(http, ticket, field="ticket")
        assert answer.status_code == 401, answer.text[:300]
        assert session_cookie_of(answer) is None
        assert "Not signed in" in answer.text
        assert http.get("/ui/").status_code == 303


def test_a_link_of_a_revoked_grant_is_refused(server: Server, seeded: Seeded):
    grant = server.grant(APPLICATION, subject=Subject.human("gone"))
    ticket = issue_ticket(server.keyring, grant, int(time.time()))
    revoked = post(server, f"/v1/grants/{grant.id}/revoke", headers=api(server))
    assert revoked.status_code == 200
    with browser(server) as http:
        answer = sign_in_answer(http, ticket, field="ticket")
    assert answer.status_code == 401 and session_cookie_of(answer) is None


def test_a_sign_in_link_is_not_a_bearer_token(server: Server, seeded: Seeded):
    ticket = ticket_for(server)
    assert verify_ticket(server.keyring, ticket, int(time.time())).grant.subject == APPROVER
    for path in ("/v1/workloads", f"/v1/workloads/{seeded.held[0]}", "/v1/approvals"):
        answer = get(server, path, headers={"Authorization": f"Bearer {ticket}"})
        assert answer.status_code == 401, (path, answer.text)


def test_a_refused_sign_in_does_not_show_what_was_pasted(server: Server, seeded: Seeded):
    revoked_grant = server.grant(APPLICATION, subject=Subject.human("gone"))
    token = server.keyring.sign(revoked_grant)
    post(server, f"/v1/grants/{revoked_grant.id}/revoke", headers=api(server))
    expired = server.token(APPLICATION, issued_at=int(time.time()) - 7200)
    damaged_link = ticket_for(server)[:-4]
    for secret in (token, expired, token[:-3], "fgt2." + "A" * 40, damaged_link):
        with browser(server) as http:
            answer = sign_in_answer(http, secret)
        assert answer.status_code == 401, answer.text[:300]
        assert secret not in answer.text
        assert not TOKEN_TEXT.search(answer.text) and not TICKET_TEXT.search(answer.text)


# ------------------------------------------------------------------ bounds


def test_a_search_over_200_characters_is_refused_as_a_page(admin: httpx.Client):
    assert admin.get("/ui/workloads", params={"q": "x" * 200}).status_code == 200
    answer = admin.get("/ui/workloads", params={"q": "x" * 201})
    assert answer.status_code == INVALID
    assert answer.headers["content-type"].startswith("text/html")
    assert "q: must be at most 200 characters" in answer.text


def _b64(value: object) -> str:
    return base64.urlsafe_b64encode(json.dumps(value).encode()).decode().rstrip("=")


GARBAGE_CURSORS = {
    "not-base64": "!!!!",
    "not-json": "AAAA",
    "empty-list": _b64([]),
    "short": _b64([1]),
    "wrong-types": _b64(["a", "b", "c"]),
    "infinite": _b64([1e400, 1, "x"]),
    "huge": _b64([10**30, 1, "x"]),
    "nulls": _b64([None, None, None]),
    "nested": _b64([[1], [2], [3]]),
    "long": "A" * 1025,
}


@pytest.mark.parametrize("cursor", GARBAGE_CURSORS.values(), ids=GARBAGE_CURSORS.keys())
@pytest.mark.parametrize("path", ["/ui/workloads", "/ui/approvals", "/ui/dead-letters"])
def test_a_garbage_cursor_is_refused_as_a_page(admin: httpx.Client, path: str, cursor: str):
    answer = admin.get(path, params={"cursor": cursor}, follow_redirects=False)
    assert answer.status_code == INVALID, answer.text[:300]
    assert answer.headers["content-type"].startswith("text/html")
    assert 'class="problem" role="alert"' in answer.text


@pytest.mark.parametrize(
    "before", ["0", "-1", "x", "99999999999999999999", "1" * 21, "\u00b2", "\u0661\u0662", "01"]
)
def test_a_garbage_audit_position_is_refused_as_a_page(admin: httpx.Client, before: str):
    answer = admin.get("/ui/audit", params={"before": before})
    assert answer.status_code == INVALID, answer.text[:300]
    assert answer.headers["content-type"].startswith("text/html")


FORM = "application/x-www-form-urlencoded"


def test_a_form_of_too_many_fields_is_refused(
    server: Server, seeded: Seeded, admin: httpx.Client, csrf: str
):
    before = world(server)
    crowded = "&".join([f"csrf={csrf}", *(f"f{n}=1" for n in range(MAX_FORM_FIELDS))])
    answer = admin.post(
        f"/ui/workloads/{seeded.ready[0]}/cancel",
        content=crowded.encode(),
        headers={"Content-Type": FORM},
    )
    assert answer.status_code == 403, answer.text[:300]
    assert "too many fields" in answer.text
    with browser(server) as http:
        page = http.get("/ui/login")
        token = server.token(APPLICATION, subject=APPROVER)
        crowded = "&".join(
            [f"csrf={form_token(page.text)}", f"token={token}", *(f"f{n}=1" for n in range(600))]
        )
        refused = http.post("/ui/login", content=crowded.encode(), headers={"Content-Type": FORM})
        assert refused.status_code == 403, refused.text[:300]
        assert session_cookie_of(refused) is None
    assert world(server) == before


def test_a_body_over_1_mib_is_refused_unread(
    server: Server, seeded: Seeded, admin: httpx.Client, csrf: str
):
    before = world(server)
    big = f"csrf={csrf}&reason=".encode() + b"x" * (1024 * 1024)

    def streamed() -> Iterator[bytes]:
        yield from (big[i : i + 65536] for i in range(0, len(big), 65536))

    for path in (f"/ui/workloads/{seeded.dead[0]}/retry", "/ui/login", "/ui/logout"):
        for body in (big, streamed()):
            answer = admin.post(path, content=body, headers={"Content-Type": FORM})
            assert answer.status_code == 413, (path, answer.text[:300])
    assert world(server) == before
    assert admin.get("/ui/", follow_redirects=False).status_code == 200


@pytest.mark.parametrize(
    "media", ["application/json", "multipart/form-data; boundary=x", "text/plain", ""]
)
def test_a_post_that_is_not_a_urlencoded_form_is_refused(
    server: Server, seeded: Seeded, admin: httpx.Client, csrf: str, media: str
):
    before = world(server)
    body = f"csrf={csrf}".encode()
    headers = {"Content-Type": media} if media else {}
    for path in (f"/ui/workloads/{seeded.ready[0]}/cancel", "/ui/audit/verify", "/ui/logout"):
        answer = admin.post(path, content=body, headers=headers)
        assert answer.status_code == 403, (path, answer.status_code, answer.text[:300])
    with browser(server) as http:
        page = http.get("/ui/login")
        token = server.token(APPLICATION, subject=APPROVER)
        sent = f"csrf={form_token(page.text)}&token={token}".encode()
        refused = http.post("/ui/login", content=sent, headers=headers)
        assert refused.status_code == 403, (refused.status_code, refused.text[:300])
        assert session_cookie_of(refused) is None
    assert world(server) == before
    assert admin.get("/ui/", follow_redirects=False).status_code == 200


@pytest.mark.parametrize(
    "nonce",
    [b"\xe9\xe9", b"\xff" * 32, b"%00", b"a" * 4000],
    ids=["latin-1", "32-high-bytes", "percent-nul", "4000-characters"],
)
def test_a_hostile_sign_in_nonce_cookie_is_refused(server: Server, seeded: Seeded, nonce: bytes):
    token = server.token(APPLICATION, subject=APPROVER)
    with browser(server) as http:
        answer = http.post(
            "/ui/login",
            data={"csrf": "k~" + "0" * 64, "token": token},
            headers={"Cookie": b"feltdb_sign_in=" + nonce},
        )
    assert answer.status_code == 403, (answer.status_code, answer.text[:300])
    assert session_cookie_of(answer) is None


# ------------------------------------------------------------------ headers and content


def pages_of(seeded: Seeded) -> list[str]:
    return [
        "/ui/",
        "/ui/workloads",
        "/ui/workloads?state=READY&definition=report",
        "/ui/workloads?q=hostile",
        *(f"/ui/workloads/{w}" for w in all_seeded(seeded)),
        "/ui/approvals",
        "/ui/dead-letters",
        "/ui/audit",
        f"/ui/audit?workload={seeded.held[0]}",
        "/ui/workloads/workload_missing",  # a refusal page
        "/ui/workloads?cursor=garbage",  # another
    ]


def assert_dashboard_headers(answer: httpx.Response, *, page: bool = True) -> None:
    headers = answer.headers
    assert headers["content-security-policy"] == UI_CSP, answer.url
    assert "unsafe-inline" not in UI_CSP and "unsafe-eval" not in UI_CSP
    assert headers["x-frame-options"] == "DENY"
    assert headers["x-content-type-options"] == "nosniff"
    assert headers["referrer-policy"] == "same-origin"
    if page:
        assert headers["cache-control"] == "no-store", answer.url


INLINE = re.compile(r"<script(?![^>]*\ssrc=)|<style|\sstyle=|\son[a-z]+=|javascript:", re.I)


def test_every_page_is_answered_with_the_dashboards_headers_and_nothing_inline(
    server: Server, seeded: Seeded, admin: httpx.Client, csrf: str
):
    with browser(server) as anonymous:
        for path in ("/ui/login", "/ui/login?next=/ui/audit"):
            answer = anonymous.get(path)
            assert answer.status_code == 200
            assert_dashboard_headers(answer)
        for path in ("/ui", "/ui/", "/ui/approvals"):
            answer = anonymous.get(path, follow_redirects=False)
            assert answer.status_code in (303, 308), path
            assert_dashboard_headers(answer)
    for path in pages_of(seeded):
        answer = admin.get(path, follow_redirects=False)
        assert answer.status_code in (200, 404, INVALID), (path, answer.status_code)
        assert answer.headers["content-type"] == "text/html; charset=utf-8"
        assert_dashboard_headers(answer)
        assert not INLINE.search(answer.text), (path, INLINE.search(answer.text))
    for path, data in (("/ui/audit/verify", {"csrf": csrf}), ("/ui/audit/verify", {})):
        answer = admin.post(path, data=data)
        assert_dashboard_headers(answer)
        assert not INLINE.search(answer.text)


@pytest.mark.parametrize(
    "name,media", [("ui.css", "text/css"), ("ui.js", "text/javascript")], ids=["css", "js"]
)
def test_the_static_files_are_answered_with_the_dashboards_headers(
    server: Server, name: str, media: str
):
    answer = get(server, f"/ui/static/{name}")
    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith(media)
    assert_dashboard_headers(answer, page=False)


@pytest.mark.parametrize(
    "name", ["nope.js", "UI.CSS", "ui.js.map", "ui.js%00", "..%2f__init__.py", "%2e%2e", "ui.css "]
)
def test_an_unknown_static_file_is_not_found(server: Server, name: str):
    answer = get(server, f"/ui/static/{name}")
    assert answer.status_code == 404, (name, answer.text[:200])
    assert "import" not in answer.text


def test_no_page_shows_a_token_a_signature_or_the_session(
    server: Server, seeded: Seeded, admin: httpx.Client, csrf: str
):
    signatures = snapshot_signatures(server, all_seeded(seeded))
    session_id, _, cookie_signature = parts_of(admin.cookies[COOKIE])
    row = stored_session(server, session_id)
    assert row is not None
    evidence = row["evidence"]["signature"]
    secrets = {*signatures, evidence, session_id, cookie_signature, admin.cookies[COOKIE]}
    answers = [admin.get(path, follow_redirects=False) for path in pages_of(seeded)]
    answers.append(admin.post("/ui/audit/verify", data={"csrf": csrf}))
    for answer in answers:
        assert not TOKEN_TEXT.search(answer.text), answer.url
        assert not TICKET_TEXT.search(answer.text), answer.url
        for secret in secrets:
            assert secret not in answer.text, answer.url


def test_hostile_input_and_queries_show_as_text(
    server: Server, seeded: Seeded, admin: httpx.Client
):
    page = admin.get(f"/ui/workloads/{seeded.script}").text
    assert SCRIPT not in page
    assert "&lt;script&gt;document.title=&#39;pwned&#39;&lt;/script&gt;" in page
    probe = '"><script>alert(1)</script>'
    for path, name in (("/ui/workloads", "q"), ("/ui/audit", "workload"), ("/ui/audit", "subject")):
        answer = admin.get(path, params={name: probe})
        assert answer.status_code == 200, answer.text[:300]
        assert probe not in answer.text and "<script>alert(1)" not in answer.text
        assert "&#34;&gt;&lt;script&gt;alert(1)&lt;/script&gt;" in answer.text


def test_the_approval_inbox_says_nothing_a_link_made_up(admin: httpx.Client):
    # A notice that reads as the server's own words may only name what was decided: a link
    # that makes the inbox say anything else is content injection (phishing on this origin).
    lure = "Your session expired: call +1 555 0100 to keep your access"
    answer = admin.get("/ui/approvals", params={"decided": lure, "outcome": "approved"})
    assert answer.status_code == 200
    assert lure not in answer.text
    assert "+1 555 0100" not in answer.text
