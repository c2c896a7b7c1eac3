"""Signing and verifying grants with HMAC-SHA256 over their canonical JSON."""

from __future__ import annotations

import hashlib
import hmac

from feltdb.auth.grants import Grant, GrantStatus, SignedGrant
from feltdb.canonical import canonical_json
from feltdb.errors import ErrorCode, WorkloadError

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

    def _signature(self, grant: Grant) -> str:
        payload = canonical_json(grant.model_dump(mode="json")).encode("utf-8")
        return hmac.new(self._secret, payload, hashlib.sha256).hexdigest()

    def sign(self, grant: Grant) -> SignedGrant:
        """Sign ``grant``: the signature covers every field of it."""
        return SignedGrant(grant=grant, key_id=self.key_id, signature=self._signature(grant))

    def verify(self, signed: SignedGrant, now: int) -> Grant:
        """Return the grant if this key signed it, it is active and ``now`` is inside it.

        Raises:
            WorkloadError: ``WORKLOAD_UNAUTHORIZED`` naming the failed check (key, signature,
                status, not yet valid, expired).
        """
        if signed.key_id != self.key_id:
            raise WorkloadError(
                ErrorCode.WORKLOAD_UNAUTHORIZED,
                f"grant was signed by unknown key {signed.key_id!r}",
            )
        if not hmac.compare_digest(signed.signature, self._signature(signed.grant)):
            raise WorkloadError(ErrorCode.WORKLOAD_UNAUTHORIZED, "grant signature does not verify")
        grant = signed.grant
        if grant.status is not GrantStatus.ACTIVE:
            raise WorkloadError(ErrorCode.WORKLOAD_UNAUTHORIZED, f"grant is {grant.status.value}")
        if now < grant.issued_at:
            raise WorkloadError(ErrorCode.WORKLOAD_UNAUTHORIZED, "grant is not valid yet")
        if now >= grant.expires_at:
            raise WorkloadError(ErrorCode.WORKLOAD_UNAUTHORIZED, "grant has expired")
        return grant
