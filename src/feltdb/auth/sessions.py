"""The dashboard's credentials: session cookies, CSRF tokens and one-time sign-in links.

Pure: a keyring and text in, text or a refusal out. What a session *is* (its grant, when it
ends) is kept in the store (:mod:`feltdb.server.ui.sessions`); what the browser holds is only:

- **a session cookie**, ``fgs1.<session id>.<key id>.<signature>``: a random 256-bit id,
  signed (:data:`~feltdb.auth.signing.SESSION_DOMAIN`) so a guessed or altered cookie is
  refused before the store is read. It holds no token and no grant. The store keeps only
  the SHA-256 of the id (:func:`session_key`), so nothing stored can be sent back as a
  cookie.
- **a CSRF token** per form (:func:`form_token`): the signature of the session id in
  another domain (:data:`~feltdb.auth.signing.CSRF_DOMAIN`); a page served to the session
  carries it, a page elsewhere cannot know it.
- **a sign-in link**'s ticket, ``fgl1.<base64url JSON>``: a grant, a nonce and an expiry
  signed in :data:`~feltdb.auth.signing.LOGIN_DOMAIN`. It is not a bearer token (no route
  of ``/v1`` accepts it) and it opens one session once: the store records its nonce as
  spent (:func:`feltdb.server.ui.sessions.spend_ticket`).
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import secrets
from dataclasses import dataclass
from typing import Final

from feltdb.auth.grants import Grant, GrantStatus
from feltdb.auth.signing import CSRF_DOMAIN, LOGIN_DOMAIN, SESSION_DOMAIN
from feltdb.auth.tokens import MAX_TOKEN_CHARS, Keyring
from feltdb.errors import ErrorCode, WorkloadError
from feltdb.storage.canonical import canonical_json, sha256_hex

SESSION_PREFIX: Final = "fgs1."
TICKET_PREFIX: Final = "fgl1."
MAX_COOKIE_CHARS: Final = 512
"""Longer cookies are refused unread (a session cookie is about 150 characters)."""
MAX_TICKET_CHARS: Final = MAX_TOKEN_CHARS
"""A ticket carries a grant, as a token does: the same bound."""
TICKET_LIFETIME_S: Final = 600
"""How long a sign-in link may be used, unless its grant ends sooner: ten minutes."""

_COOKIE = re.compile(r"fgs1\.([A-Za-z0-9_-]{43})\.([A-Za-z0-9._:-]{1,128})\.([0-9a-f]{64})")
_FORM_TOKEN = re.compile(r"([A-Za-z0-9._:-]{1,128})~([0-9a-f]{64})")


def new_session_id() -> str:
    """A fresh session id: 256 random bits, base64url (43 characters)."""
    return secrets.token_urlsafe(32)


def session_key(session_id: str) -> str:
    """The key the store keeps a session under: a digest of its id, never the id."""
    return "session_" + sha256_hex(session_id)


def session_cookie(keyring: Keyring, session_id: str) -> str:
    """The cookie value that names ``session_id``, signed by the active key."""
    key_id, signature = keyring.mac(SESSION_DOMAIN, session_id.encode("ascii"))
    return f"{SESSION_PREFIX}{session_id}.{key_id}.{signature}"


def session_of_cookie(keyring: Keyring, cookie: str | None) -> str | None:
    """The session id a cookie names, if a key of ``keyring`` signed it; ``None`` for no
    cookie, a malformed one, an overlong one or a bad signature.
    """
    if cookie is None or len(cookie) > MAX_COOKIE_CHARS:
        return None
    found = _COOKIE.fullmatch(cookie)
    if found is None:
        return None
    session_id, key_id, signature = found.groups()
    if not keyring.mac_matches(SESSION_DOMAIN, session_id.encode("ascii"), key_id, signature):
        return None
    return session_id


def form_token(keyring: Keyring, bound_to: str) -> str:
    """The CSRF token of forms served to ``bound_to`` (a session id, or a sign-in form's
    nonce), signed by the active key.
    """
    key_id, signature = keyring.mac(CSRF_DOMAIN, bound_to.encode("ascii"))
    return f"{key_id}~{signature}"


def form_token_matches(keyring: Keyring, bound_to: str, token: str | None) -> bool:
    """Whether ``token`` is :func:`form_token` of ``bound_to`` by a key of ``keyring``
    (never for a ``bound_to`` that is not ASCII: no form is bound to one).
    """
    found = _FORM_TOKEN.fullmatch(token) if token is not None and len(token) <= 256 else None
    if found is None or not bound_to.isascii():
        return False
    key_id, signature = found.groups()
    return keyring.mac_matches(CSRF_DOMAIN, bound_to.encode("ascii"), key_id, signature)


@dataclass(frozen=True, slots=True)
class Ticket:
    """A verified sign-in link's ticket: the grant it signs in with, the key that signed
    it, its nonce (spent on use) and the unix second it can no longer be used from.
    """

    grant: Grant
    key_id: str
    nonce: str
    expires_at: int


def issue_ticket(
    keyring: Keyring, grant: Grant, now: int, lifetime_s: int = TICKET_LIFETIME_S
) -> str:
    """A one-time sign-in ticket for ``grant``, usable from ``now`` for ``lifetime_s``
    seconds (less if the grant expires first).
    """
    body = {
        "grant": grant.to_json(),
        "nonce": secrets.token_hex(16),
        "expires_at": min(now + lifetime_s, grant.expires_at),
    }
    key_id, signature = keyring.mac(LOGIN_DOMAIN, canonical_json(body).encode("utf-8"))
    document = canonical_json({"body": body, "key_id": key_id, "signature": signature})
    encoded = base64.urlsafe_b64encode(document.encode("utf-8")).rstrip(b"=").decode("ascii")
    return TICKET_PREFIX + encoded


def verify_ticket(keyring: Keyring, text: str, now: int) -> Ticket:
    """The ticket ``text`` carries, if a key of ``keyring`` signed it and both it and its
    grant are valid at ``now``. Whether it was already used is the store's to say.

    Raises:
        WorkloadError: ``WORKLOAD_UNAUTHORIZED`` naming what failed.
    """
    if len(text) > MAX_TICKET_CHARS or not text.startswith(TICKET_PREFIX):
        raise _refused("this is not a feltdb sign-in link")
    encoded = text[len(TICKET_PREFIX) :]
    try:
        raw = base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4))
        document = json.loads(raw)
        body, key_id, signature = document["body"], document["key_id"], document["signature"]
        payload = canonical_json(body).encode("utf-8", "surrogatepass")
    except (ValueError, binascii.Error, TypeError, KeyError, RecursionError):
        raise _refused("the sign-in link is damaged") from None
    if not (
        isinstance(key_id, str)
        and isinstance(signature, str)
        and keyring.mac_matches(LOGIN_DOMAIN, payload, key_id, signature)
    ):
        raise _refused("the sign-in link's signature does not verify")
    try:
        grant = Grant.parse(body["grant"])
        nonce, expires_at = str(body["nonce"]), int(body["expires_at"])
    except (WorkloadError, KeyError, TypeError, ValueError):
        raise _refused("the sign-in link is damaged") from None
    if now >= expires_at:
        raise _refused("the sign-in link has expired: issue another")
    if grant.status is not GrantStatus.ACTIVE or not grant.issued_at <= now < grant.expires_at:
        raise _refused("the sign-in link's grant is not valid now")
    return Ticket(grant, key_id, nonce, expires_at)


def _refused(message: str) -> WorkloadError:
    return WorkloadError(ErrorCode.WORKLOAD_UNAUTHORIZED, message)
