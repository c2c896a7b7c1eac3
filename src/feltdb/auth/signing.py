"""Signing and verifying grants with HMAC-SHA256 over their canonical JSON, in two domains.

A grant is signed for one of two purposes, and a signature made for one never verifies
for the other:

- **evidence** (:meth:`GrantSigner.sign`, :meth:`GrantSigner.verify`): the
  ``authorization_snapshot`` kept with each workload and named in its audit records. The
  HMAC covers the canonical JSON of the grant alone.
- **bearer tokens** (:meth:`GrantSigner.sign_token`, :meth:`GrantSigner.verify_token`):
  the credential a caller presents. The HMAC covers :data:`TOKEN_DOMAIN` followed by the
  canonical JSON of the grant.

Canonical JSON of a grant always begins with ``{``, and :data:`TOKEN_DOMAIN` does not, so
no grant's evidence signature is any grant's token signature: a snapshot read from a
workload, the audit feed or the database itself can never be replayed as a token.

The dashboard's cookies, forms and sign-in links are signed too (:meth:`GrantSigner.mac`),
each in a domain of its own (:data:`MAC_DOMAINS`), none of which is the token's or begins
with ``{``: none of those signatures is a token's or evidence's, nor any other's.
"""

from __future__ import annotations

import hashlib
import hmac
from typing import Any

from feltdb.auth.grants import Grant, GrantStatus, SignedGrant
from feltdb.errors import ErrorCode, WorkloadError
from feltdb.storage.canonical import canonical_json

TOKEN_DOMAIN = b"feltdb bearer token v2\x00"
"""What a token signature covers before the grant: it separates tokens from evidence."""

SESSION_DOMAIN = b"feltdb dashboard session v1\x00"
"""What a dashboard session cookie's signature covers before the session id."""
CSRF_DOMAIN = b"feltdb dashboard form v1\x00"
"""What a dashboard form's CSRF token covers before the session (or sign-in) it is bound to."""
LOGIN_DOMAIN = b"feltdb dashboard sign-in link v1\x00"
"""What a one-time sign-in link's signature covers before its ticket."""
MAC_DOMAINS = frozenset({SESSION_DOMAIN, CSRF_DOMAIN, LOGIN_DOMAIN})
"""The domains :meth:`GrantSigner.mac` signs in; never :data:`TOKEN_DOMAIN`."""

MIN_SECRET_BYTES = 16
"""Shorter HMAC keys are refused: a guessable key makes every grant forgeable."""


class GrantSigner:
    """Signs grants with one key and verifies grants signed by it."""

    def __init__(self, key_id: str, secret: bytes) -> None:
        """Hold ``secret`` under ``key_id``.

        Raises:
            WorkloadError: ``WORKLOAD_INVALID`` for an empty key id or a secret shorter
                than 16 bytes.
        """
        if not key_id:
            raise WorkloadError(ErrorCode.WORKLOAD_INVALID, "a signing key needs a key id")
        if len(secret) < MIN_SECRET_BYTES:
            raise WorkloadError(
                ErrorCode.WORKLOAD_INVALID,
                f"a signing key must be at least {MIN_SECRET_BYTES} bytes",
            )
        self.key_id = key_id
        self._secret = bytes(secret)

    def _signature(self, document: dict[str, Any], domain: bytes = b"") -> str:
        """The signature of a grant's ``document`` (its :meth:`~Grant.to_json`)."""
        # surrogatepass: a grant decoded from a forged token may hold a lone surrogate;
        # it must fail to verify, not fail to encode (issue 9, point 7).
        text = canonical_json(document)
        payload = domain + text.encode("utf-8", "surrogatepass")
        return hmac.new(self._secret, payload, hashlib.sha256).hexdigest()

    def mac(self, domain: bytes, payload: bytes) -> str:
        """The hex HMAC-SHA256 of ``domain`` then ``payload``, ``domain`` one of
        :data:`MAC_DOMAINS`.

        Raises:
            ValueError: another domain (the token's above all).
        """
        if domain not in MAC_DOMAINS:
            raise ValueError("not a dashboard signing domain")
        return hmac.new(self._secret, domain + payload, hashlib.sha256).hexdigest()

    def sign(self, grant: Grant) -> SignedGrant:
        """Sign ``grant`` as evidence (an authorization snapshot): the signature covers
        every field of it, and is never a valid token signature.

        Raises:
            WorkloadError: ``WORKLOAD_INVALID`` for a grant no verifier would accept (a
                field of the wrong type or out of its bound): nothing unusable is signed.
        """
        return self._signed(grant, b"")

    def sign_token(self, grant: Grant) -> SignedGrant:
        """Sign ``grant`` as a bearer token's credential (:data:`TOKEN_DOMAIN`).

        Raises:
            WorkloadError: ``WORKLOAD_INVALID``, as :meth:`sign`.
        """
        return self._signed(grant, TOKEN_DOMAIN)

    def _signed(self, grant: Grant, domain: bytes) -> SignedGrant:
        # A record is not validated when it is made: the grant is read back as a verifier
        # would read it (refused WORKLOAD_INVALID naming the field), from the one document
        # its signature covers.
        document = grant.to_json()
        checked = Grant.parse(document)
        signature = self._signature(document, domain)
        return SignedGrant(grant=checked, key_id=self.key_id, signature=signature)

    def verify(self, signed: SignedGrant, now: int) -> Grant:
        """Return the grant if this key signed it as evidence, it is active and ``now`` is
        inside it.

        Raises:
            WorkloadError: ``WORKLOAD_UNAUTHORIZED`` naming the failed check (key, signature,
                status, not yet valid, expired).
        """
        return self._verified(signed, now, b"")

    def verify_token(self, signed: SignedGrant, now: int) -> Grant:
        """:meth:`verify` for a bearer token's signed grant (:meth:`sign_token`): an
        evidence signature does not verify here.

        Raises:
            WorkloadError: as :meth:`verify`.
        """
        return self._verified(signed, now, TOKEN_DOMAIN)

    def _verified(self, signed: SignedGrant, now: int, domain: bytes) -> Grant:
        if signed.key_id != self.key_id:
            raise WorkloadError(
                ErrorCode.WORKLOAD_UNAUTHORIZED,
                f"grant was signed by unknown key {signed.key_id!r}",
            )
        # Compared as bytes: compare_digest refuses str holding non-ASCII characters, and a
        # signature is whatever the caller sent (issue 9, point 6).
        expected = self._signature(signed.grant.to_json(), domain).encode("ascii")
        given = signed.signature.encode("utf-8", "surrogatepass")
        if not hmac.compare_digest(given, expected):
            raise WorkloadError(ErrorCode.WORKLOAD_UNAUTHORIZED, "grant signature does not verify")
        grant = signed.grant
        if grant.status is not GrantStatus.ACTIVE:
            raise WorkloadError(ErrorCode.WORKLOAD_UNAUTHORIZED, f"grant is {grant.status.value}")
        if now < grant.issued_at:
            raise WorkloadError(ErrorCode.WORKLOAD_UNAUTHORIZED, "grant is not valid yet")
        if now >= grant.expires_at:
            raise WorkloadError(ErrorCode.WORKLOAD_UNAUTHORIZED, "grant has expired")
        return grant
