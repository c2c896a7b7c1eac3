"""Bad credentials for the security soak: every way a token can fail, made from a good one.

Each :class:`BadToken` says what the README's error table answers for it: ``401``
(``WORKLOAD_UNAUTHORIZED`` with ``WWW-Authenticate: Bearer``) for a request without a bearer
token or with one that cannot be decoded, ``403`` (``WORKLOAD_UNAUTHORIZED``) for a token
that decodes but does not verify: a bad signature, an unknown key, outside its validity
window, a status other than active, claims changed after signing, a signature spliced from
another token, or a workload's evidence presented as a token. Revoked grants (``403``
too) need the server, so the soak makes those itself.

What is NOT made here: tokens over the 64 KiB bound (uvicorn refuses headers that large
before the app sees them, with its own answer) and tokens signed by a key the server holds
but has retired (the server has one key).
"""

from __future__ import annotations

import base64
import json
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import msgspec

from feltdb import Grant, GrantStatus, ResourceScope, ResourceScopeKind, Subject
from feltdb.auth.tokens import Keyring, decode_token, encode_token
from feltdb.storage.canonical import canonical_json

UNDECODABLE = 401
UNVERIFIED = 403


@dataclass(frozen=True)
class BadToken:
    """A credential the server must refuse: the ``Authorization`` header to send (``None``:
    send none) and the status the README gives it.
    """

    kind: str
    authorization: str | None
    status: int

    def headers(self) -> dict[str, str]:
        return {} if self.authorization is None else {"Authorization": self.authorization}


def _document(token: str) -> dict[str, Any]:
    raw = token.removeprefix("fgt2.")
    loaded: dict[str, Any] = json.loads(base64.urlsafe_b64decode(raw + "=" * (-len(raw) % 4)))
    return loaded


def _token_of(document: dict[str, Any]) -> str:
    raw = canonical_json(document).encode("utf-8")
    return "fgt2." + base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def _tampered(token: str, change: Callable[[dict[str, Any]], None]) -> str:
    """``token`` with its grant changed by ``change`` and its signature kept."""
    document = _document(token)
    change(document["grant"])
    return _token_of(document)


def bad_tokens(keyring: Keyring, grant: Grant, now: int, rng: random.Random) -> list[BadToken]:
    """Every bad credential made from ``grant`` (a grant the server would accept, signed by
    ``keyring``, the server's) at ``now``. Each decodable one is checked to decode here, and
    each undecodable one not to, so a mistake of this module is not taken for the server's.
    """
    good = keyring.sign(grant)
    signature = _document(good)["signature"]
    other = Keyring.generate(keyring.active)  # the same key id, another secret
    stranger = Keyring.generate("k-stranger")
    later = msgspec.structs.replace(
        grant, **{"id": f"{grant.id}-b", "subject": Subject.human("mallory")}
    )

    def signed(**update: Any) -> str:
        return keyring.sign(msgspec.structs.replace(grant, **update))

    def wider(g: dict[str, Any]) -> None:
        g["resources"] = [{"kind": ResourceScopeKind.WORKLOAD.value, "uri": "flow://*"}]

    undecodable = {
        "no-header": None,
        "bearer-without-token": "Bearer",
        "basic-scheme": "Basic " + base64.b64encode(b"admin:admin").decode(),
        "garbage": "Bearer " + "".join(rng.choice("abcdefXYZ0123456789") for _ in range(40)),
        "wrong-prefix": "Bearer " + "fgt9." + good[len("fgt2.") :],
        "retired-prefix": "Bearer " + "fgt1." + good[len("fgt2.") :],
        "truncated": "Bearer " + good[: len(good) // 2 + 1],
        "not-base64url": "Bearer " + good[:20] + "!" + good[21:],
        "not-json": "Bearer fgt2." + base64.urlsafe_b64encode(b"{grant:").decode().rstrip("="),
        "upper-case-signature": "Bearer "
        + _token_of({**_document(good), "signature": signature.upper()}),
        "short-signature": "Bearer " + _token_of({**_document(good), "signature": signature[:63]}),
        "no-signature": "Bearer "
        + _token_of({k: v for k, v in _document(good).items() if k != "signature"}),
    }
    unverified = {
        "forged-same-key-id": other.sign(grant),
        "unknown-key": stranger.sign(grant),
        "expired": signed(issued_at=now - 7200, expires_at=now - rng.randint(1, 3600)),
        "expires-now": signed(issued_at=now - 60, expires_at=now),
        "not-yet-valid": signed(issued_at=now + 600, expires_at=now + 4200),
        "suspended": signed(status=GrantStatus.SUSPENDED),
        "status-revoked": signed(status=GrantStatus.REVOKED),
        "tampered-tenant": _tampered(good, lambda g: g.update(tenant_id=g["tenant_id"] + "-x")),
        "tampered-application": _tampered(
            good, lambda g: g.update(application_id=g["application_id"] + "x")
        ),
        "tampered-subject": _tampered(
            good, lambda g: g.update(subject={"kind": "human", "id": "root"})
        ),
        "tampered-expiry": _tampered(
            signed(issued_at=now - 7200, expires_at=now - 10),
            lambda g: g.update(expires_at=now + 3600),
        ),
        "tampered-capabilities": _tampered(
            signed(capabilities=frozenset({"workload:read"})),
            lambda g: g.update(capabilities=sorted(grant.capabilities)),
        ),
        "tampered-resources": _tampered(
            signed(resources=[ResourceScope(kind=ResourceScopeKind.WORKLOAD, uri="flow://none/x")]),
            wider,
        ),
        "tampered-key-id": _token_of({**_document(good), "key_id": "k-stranger"}),
        "spliced-signature": _token_of({**_document(keyring.sign(later)), "signature": signature}),
        "evidence-as-token": encode_token(keyring.evidence(grant)),
    }
    made = [BadToken(kind, header, UNDECODABLE) for kind, header in undecodable.items()]
    made += [BadToken(kind, f"Bearer {token}", UNVERIFIED) for kind, token in unverified.items()]
    for bad in made:
        value = (bad.authorization or "").removeprefix("Bearer ")
        decodes = _decodes(value)
        assert decodes == (bad.status == UNVERIFIED), f"{bad.kind}: decodes={decodes}"
    return made


def _decodes(token: str) -> bool:
    try:
        decode_token(token)
    except Exception:
        return False
    return True
