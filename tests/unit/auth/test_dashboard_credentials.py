"""The dashboard's credentials (feltdb.auth.sessions): session cookies, form tokens and
one-time sign-in tickets, each signed in a domain of its own, none of them a token."""

from __future__ import annotations

import base64
import json

import msgspec
import pytest

from feltdb import Subject
from feltdb.auth.policy import application_grant
from feltdb.auth.sessions import (
    MAX_COOKIE_CHARS,
    TICKET_LIFETIME_S,
    form_token,
    form_token_matches,
    issue_ticket,
    new_session_id,
    session_cookie,
    session_key,
    session_of_cookie,
    verify_ticket,
)
from feltdb.auth.signing import CSRF_DOMAIN, SESSION_DOMAIN, TOKEN_DOMAIN, GrantSigner
from feltdb.auth.tokens import Keyring, decode_token
from feltdb.errors import WorkloadError
from feltdb.server.ui.signin import next_path

NOW = 1_800_000_000
RING = Keyring({"k1": bytes([7] * 32)}, "k1")
OTHER = Keyring({"k1": bytes([8] * 32)}, "k1")
GRANT = application_grant(
    Subject.human("ada"), "t", "app", {"workload:read"}, issued_at=NOW - 10, expires_at=NOW + 3600
)


def test_a_cookie_names_its_session_and_only_this_keyring_made_it() -> None:
    session_id = new_session_id()
    cookie = session_cookie(RING, session_id)
    assert session_of_cookie(RING, cookie) == session_id
    assert session_of_cookie(OTHER, cookie) is None  # another server's key
    prefix, body = cookie[:5], cookie[5:]
    altered_id = prefix + ("A" if body[0] != "A" else "B") + body[1:]
    assert session_of_cookie(RING, altered_id) is None
    altered_signature = cookie[:-1] + ("0" if cookie[-1] != "0" else "1")
    assert session_of_cookie(RING, altered_signature) is None
    for garbage in (None, "", "fgs1.", cookie + "x" * MAX_COOKIE_CHARS, "fgt2." + body):
        assert session_of_cookie(RING, garbage) is None


def test_a_cookie_outlives_a_key_rotation_and_not_the_keys_removal() -> None:
    session_id = new_session_id()
    cookie = session_cookie(RING, session_id)
    rotated = Keyring({"k1": bytes([7] * 32), "k2": bytes([9] * 32)}, "k2")
    assert session_of_cookie(rotated, cookie) == session_id
    assert session_of_cookie(Keyring({"k2": bytes([9] * 32)}, "k2"), cookie) is None


def test_the_store_key_is_a_digest_never_the_id() -> None:
    session_id = new_session_id()
    assert len(session_id) == 43  # 256 bits
    key = session_key(session_id)
    assert session_id not in key and key == session_key(session_id)
    assert key != session_key(new_session_id())


def test_a_form_token_is_bound_to_its_session() -> None:
    first, second = new_session_id(), new_session_id()
    token = form_token(RING, first)
    assert form_token_matches(RING, first, token)
    assert not form_token_matches(RING, second, token)
    assert not form_token_matches(OTHER, first, token)
    for bad in (None, "", token + "0", "k1~" + "0" * 64, "x" * 300):
        assert not form_token_matches(RING, first, bad)


def test_each_signature_has_a_domain_of_its_own_and_never_the_tokens() -> None:
    signer = GrantSigner("k1", bytes([7] * 32))
    payload = b"same payload"
    assert signer.mac(SESSION_DOMAIN, payload) != signer.mac(CSRF_DOMAIN, payload)
    with pytest.raises(ValueError):
        signer.mac(TOKEN_DOMAIN, payload)
    with pytest.raises(ValueError):
        signer.mac(b"", payload)


def test_a_ticket_carries_its_grant_once_verified() -> None:
    ticket = verify_ticket(RING, issue_ticket(RING, GRANT, NOW), NOW + 5)
    assert ticket.grant == GRANT
    assert ticket.key_id == "k1"
    assert ticket.expires_at == NOW + TICKET_LIFETIME_S
    assert len(ticket.nonce) == 32
    other = verify_ticket(RING, issue_ticket(RING, GRANT, NOW), NOW)
    assert other.nonce != ticket.nonce  # each link is its own


def test_a_ticket_lasts_no_longer_than_its_grant() -> None:
    short = msgspec.structs.replace(GRANT, expires_at=NOW + 60)
    assert verify_ticket(RING, issue_ticket(RING, short, NOW), NOW).expires_at == NOW + 60


def _tampered(text: str, change: dict[str, object]) -> str:
    encoded = text[5:]
    document = json.loads(base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4)))
    document["body"]["grant"].update(change)
    raw = json.dumps(document).encode()
    return "fgl1." + base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


@pytest.mark.parametrize(
    ("make", "at", "says"),
    [
        (lambda t: t, NOW + TICKET_LIFETIME_S, "expired"),
        (lambda t: t, NOW - 20, "not valid now"),  # before the grant's start
        (lambda t: _tampered(t, {"capabilities": ["audit:read"]}), NOW, "does not verify"),
        (lambda t: t[:-4], NOW, "damaged"),
        (lambda t: "fgl1.!!!", NOW, "damaged"),
        (lambda t: "fgt2." + t[5:], NOW, "not a feltdb sign-in link"),
        (lambda t: t + "A" * 70_000, NOW, "not a feltdb sign-in link"),
    ],
)
def test_a_ticket_is_refused_for_what_is_wrong_with_it(make, at, says) -> None:
    text = make(issue_ticket(RING, GRANT, NOW))
    with pytest.raises(WorkloadError) as refused:
        verify_ticket(RING, text, at)
    assert refused.value.code == "WORKLOAD_UNAUTHORIZED"
    assert says in refused.value.message


def test_a_ticket_signed_elsewhere_is_refused() -> None:
    with pytest.raises(WorkloadError, match="does not verify"):
        verify_ticket(OTHER, issue_ticket(RING, GRANT, NOW), NOW)


def test_a_ticket_is_not_a_token_and_a_token_is_not_a_ticket() -> None:
    ticket = issue_ticket(RING, GRANT, NOW)
    with pytest.raises(WorkloadError):
        decode_token(ticket)
    with pytest.raises(WorkloadError):
        RING.verify(ticket, NOW)
    with pytest.raises(WorkloadError, match="not a feltdb sign-in link"):
        verify_ticket(RING, RING.sign(GRANT), NOW)


@pytest.mark.parametrize(
    ("given", "goes_to"),
    [
        (None, "/ui/"),
        ("/ui/workloads?state=READY", "/ui/workloads?state=READY"),
        ("/ui", "/ui"),
        ("//evil.example/ui/", "/ui/"),
        ("https://evil.example/ui/", "/ui/"),
        ("/ui//evil.example", "/ui/"),
        ("/uievil", "/ui/"),
        ("/ui/\\evil", "/ui/"),
        ("/ui/\nSet-Cookie: x", "/ui/"),
        ("/docs", "/ui/"),
        ("/ui/../docs", "/ui/"),
        ("/ui/%2E%2E/docs", "/ui/"),
        ("/ui/" + "a" * 2001, "/ui/"),
    ],
)
def test_a_sign_in_goes_on_to_a_page_of_the_dashboard_only(given, goes_to) -> None:
    assert next_path(given) == goes_to
