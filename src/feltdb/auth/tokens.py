"""Bearer tokens: signed grants, compactly encoded, and the keyring that signs and checks them.

A token is ``"fgt2."`` followed by the unpadded base64url of the canonical JSON of a
:class:`~feltdb.auth.grants.SignedGrant` whose signature is a *token* signature
(:meth:`~feltdb.auth.signing.GrantSigner.sign_token`). The token carries the grant in the
clear: it is signed, not encrypted, so a grant must hold nothing secret.

The evidence a workload keeps of the grant it was admitted under (its
``authorization_snapshot``, :meth:`Keyring.evidence`) is signed in another domain, so it
can never be presented as a token. Tokens of the retired ``fgt1.`` format, whose signature
was the evidence signature, are refused.

Everything here is pure except :meth:`Keyring.load` and :meth:`Keyring.save`, which read and
write the keyring file.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import json
import os
import re
import secrets
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from feltdb.auth.grants import Grant, SignedGrant
from feltdb.auth.signing import GrantSigner
from feltdb.errors import ErrorCode, WorkloadError
from feltdb.storage.canonical import canonical_json

TOKEN_PREFIX = "fgt2."
"""The version tag every token starts with; a new encoding gets a new tag."""

RETIRED_PREFIXES = ("fgt1.",)
"""Tags of token formats no longer accepted (``fgt1.`` signed tokens as evidence, so a
stored snapshot was a working token)."""

MAX_TOKEN_CHARS = 65_536
"""Longer tokens are refused before decoding: no grant needs 64 KiB, and a bound keeps a
hostile header from costing more than a bounded parse."""

KEY_BYTES = 32
"""The size of a generated secret: the HMAC-SHA256 block's worth of randomness."""

_BASE64URL = re.compile(r"[A-Za-z0-9_-]*")
_SIGNATURE = re.compile(r"[0-9a-f]{64}")


def _b64encode(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _b64decode(text: str) -> bytes:
    """Strict unpadded-or-padded base64url: any other character is an error."""
    stripped = text.rstrip("=")
    if not _BASE64URL.fullmatch(stripped) or len(stripped) % 4 == 1:
        raise ValueError("not base64url")
    return base64.urlsafe_b64decode(stripped + "=" * (-len(stripped) % 4))


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _unauthorized(message: str) -> WorkloadError:
    return WorkloadError(ErrorCode.WORKLOAD_UNAUTHORIZED, message)


def encode_token(signed: SignedGrant) -> str:
    """Encode ``signed`` as a bearer token.

    Args:
        signed: the signed grant to carry.

    Returns:
        ``TOKEN_PREFIX`` + unpadded base64url of the canonical JSON of
        ``signed.to_json()``.
    """
    document = canonical_json(signed.to_json())
    return TOKEN_PREFIX + _b64encode(document.encode("utf-8"))


def decode_token(token: str) -> SignedGrant:
    """Decode a bearer token into the signed grant it carries, without verifying it.

    Args:
        token: the token, as sent after ``Bearer``.

    Returns:
        The signed grant. Its signature, status and validity are NOT checked here: use
        :meth:`Keyring.verify`.

    Raises:
        WorkloadError: ``WORKLOAD_UNAUTHORIZED`` for anything malformed: not a string, too
            long, a wrong prefix, bad base64url, bad UTF-8 or JSON, or a document that is not
            a valid signed grant. Never any other exception.
    """
    if not isinstance(token, str):
        raise _unauthorized("token is not a string")
    if len(token) > MAX_TOKEN_CHARS:
        raise _unauthorized(f"token is longer than {MAX_TOKEN_CHARS} characters")
    if token.startswith(RETIRED_PREFIXES):
        raise _unauthorized(
            f"token format {token.split('.', 1)[0]!r} is retired: mint a new token"
            f" ({TOKEN_PREFIX}…)"
        )
    if not token.startswith(TOKEN_PREFIX):
        raise _unauthorized(f"token does not start with {TOKEN_PREFIX!r}")
    try:
        text = _b64decode(token[len(TOKEN_PREFIX) :]).decode("utf-8")
    except ValueError:  # binascii.Error and UnicodeDecodeError are ValueErrors
        raise _unauthorized("token is not base64url-encoded UTF-8") from None
    try:
        document = json.loads(text, parse_constant=_refuse_constant)
    except (ValueError, RecursionError):
        raise _unauthorized("token does not hold JSON") from None
    try:
        signed = SignedGrant.parse(document)
    except (ValueError, TypeError, RecursionError, WorkloadError):
        raise _unauthorized("token does not hold a valid signed grant") from None
    if not _SIGNATURE.fullmatch(signed.signature):
        raise _unauthorized("token signature is not 64 lowercase hex digits")
    return signed


class Keyring:
    """Named HMAC secrets: the active one signs, every one verifies (so keys can rotate).

    The file form is ``{"active": key_id, "keys": {key_id: base64url secret}}``.
    """

    def __init__(self, keys: Mapping[str, bytes], active: str) -> None:
        """Hold ``keys`` (key id → secret), signing with ``keys[active]``.

        Args:
            keys: key id → secret; each secret at least 16 bytes.
            active: the id of the key that signs new tokens.

        Raises:
            WorkloadError: ``WORKLOAD_INVALID`` when there are no keys, ``active`` is not
                one of them, or a key id or secret is unusable.
        """
        if not keys:
            raise WorkloadError(ErrorCode.WORKLOAD_INVALID, "a keyring needs at least one key")
        if active not in keys:
            raise WorkloadError(
                ErrorCode.WORKLOAD_INVALID, f"the active key {active!r} is not in the keyring"
            )
        self._signers = {key_id: GrantSigner(key_id, secret) for key_id, secret in keys.items()}
        self._secrets = {key_id: bytes(secret) for key_id, secret in keys.items()}
        self._active = active

    @property
    def active(self) -> str:
        """The id of the key that signs new tokens."""
        return self._active

    @property
    def key_ids(self) -> frozenset[str]:
        """The ids of every key that verifies tokens."""
        return frozenset(self._signers)

    def __repr__(self) -> str:
        # Never the secrets: a keyring ends up in logs and tracebacks.
        return f"Keyring(active={self._active!r}, key_ids={sorted(self._signers)!r})"

    @classmethod
    def generate(cls, key_id: str | None = None) -> Keyring:
        """A new keyring of one random 32-byte key, which is active.

        Args:
            key_id: the key's id; by default ``"k-"`` and 8 random hex digits.
        """
        key_id = key_id if key_id is not None else f"k-{secrets.token_hex(4)}"
        return cls({key_id: secrets.token_bytes(KEY_BYTES)}, key_id)

    @classmethod
    def from_json(cls, text: str) -> Keyring:
        """Read a keyring from its JSON form.

        Raises:
            WorkloadError: ``WORKLOAD_INVALID`` when ``text`` is not a keyring document.
        """
        try:
            document = json.loads(text)
        except (ValueError, RecursionError):
            raise WorkloadError(ErrorCode.WORKLOAD_INVALID, "keyring is not JSON") from None
        if not isinstance(document, dict) or set(document) != {"active", "keys"}:
            raise WorkloadError(
                ErrorCode.WORKLOAD_INVALID, 'a keyring is {"active": id, "keys": {id: secret}}'
            )
        active, keys = document["active"], document["keys"]
        if not isinstance(active, str) or not isinstance(keys, dict):
            raise WorkloadError(
                ErrorCode.WORKLOAD_INVALID, "keyring 'active' must be a string, 'keys' an object"
            )
        secrets_by_id: dict[str, bytes] = {}
        for key_id, encoded in keys.items():
            try:
                if not isinstance(encoded, str):
                    raise ValueError("not a string")
                secrets_by_id[key_id] = _b64decode(encoded)
            except (ValueError, binascii.Error):
                raise WorkloadError(
                    ErrorCode.WORKLOAD_INVALID, f"keyring key {key_id!r} is not base64url"
                ) from None
        return cls(secrets_by_id, active)

    def to_json(self) -> str:
        """The keyring's JSON form (it holds the secrets: keep it private)."""
        keys = {key_id: _b64encode(secret) for key_id, secret in self._secrets.items()}
        return json.dumps({"active": self._active, "keys": keys}, indent=2, sort_keys=True)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Keyring:
        """Read the keyring file at ``path``.

        Raises:
            OSError: the file cannot be read (e.g. ``FileNotFoundError``).
            WorkloadError: ``WORKLOAD_INVALID`` when the file is not a keyring.
        """
        return cls.from_json(Path(path).read_text(encoding="utf-8"))

    def save(self, path: str | os.PathLike[str], *, exclusive: bool = False) -> None:
        """Write the keyring to ``path``, readable and writable by its owner only (0600).

        The file is never visible half-written or with wider permissions: it is written to
        a 0600 temporary file beside ``path`` and renamed over it.

        Args:
            path: where to write.
            exclusive: refuse (``FileExistsError``) when ``path`` already exists, atomically.

        Raises:
            OSError: the file cannot be written; ``FileExistsError`` when ``exclusive`` and
                ``path`` exists.
        """
        target = Path(path)
        data = (self.to_json() + "\n").encode("utf-8")
        if exclusive:
            # O_EXCL: two `keys new` racing cannot both believe they created the file.
            fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as file:
                file.write(data)
            return
        # mkstemp creates the file 0600 whatever the umask.
        fd, temporary = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
        try:
            with os.fdopen(fd, "wb") as file:
                file.write(data)
            os.replace(temporary, target)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise

    def sign(self, grant: Grant) -> str:
        """Sign ``grant`` with the active key and encode it as a bearer token."""
        return encode_token(self._signers[self._active].sign_token(grant))

    def evidence(self, grant: Grant, key_id: str | None = None) -> SignedGrant:
        """``grant`` signed as evidence (an ``authorization_snapshot``), by ``key_id`` (the
        key that verified the caller's token) or the active key. Evidence is never a token.

        Raises:
            WorkloadError: ``WORKLOAD_UNAUTHORIZED`` for a key id this keyring lacks.
        """
        signer = self._signers.get(key_id if key_id is not None else self._active)
        if signer is None:
            raise _unauthorized("grant was signed by a key this keyring does not hold")
        return signer.sign(grant)

    def mac(self, domain: bytes, payload: bytes) -> tuple[str, str]:
        """``(key id, signature)``: the active key's :meth:`GrantSigner.mac` of ``payload``."""
        return self._active, self._signers[self._active].mac(domain, payload)

    def mac_matches(self, domain: bytes, payload: bytes, key_id: str, signature: str) -> bool:
        """Whether ``signature`` is key ``key_id``'s :meth:`GrantSigner.mac` of ``payload``
        (``False`` for a key this keyring lacks); compared in constant time.
        """
        signer = self._signers.get(key_id)
        if signer is None:
            return False
        expected = signer.mac(domain, payload).encode("ascii")
        return hmac.compare_digest(signature.encode("utf-8", "surrogatepass"), expected)

    def verify(self, token: str, now: int) -> Grant:
        """Decode ``token`` and return its grant if a key of this keyring signed it, it is
        active, and ``now`` is inside its validity window.

        Args:
            token: the bearer token.
            now: the time of the request, in unix seconds.

        Raises:
            WorkloadError: ``WORKLOAD_UNAUTHORIZED`` for a malformed token, an unknown key
                id, a bad signature, a suspended or revoked grant, or one that is not yet or
                no longer valid.
        """
        return self.verify_signed(decode_token(token), now)

    def verify_evidence(self, signed: SignedGrant, now: int) -> Grant:
        """The grant of an authorization snapshot (:meth:`evidence`), if a key of this
        keyring signed it as evidence and it was valid at ``now``.

        Raises:
            WorkloadError: ``WORKLOAD_UNAUTHORIZED`` as :meth:`verify`.
        """
        signer = self._signers.get(signed.key_id)
        if signer is None:
            raise _unauthorized("grant was signed by a key this keyring does not hold")
        return signer.verify(signed, now)

    def verify_signed(self, signed: SignedGrant, now: int) -> Grant:
        """:meth:`verify` for a token already decoded (:func:`decode_token`).

        Raises:
            WorkloadError: as :meth:`verify`, but for a malformed token.
        """
        signer = self._signers.get(signed.key_id)
        if signer is None:
            raise _unauthorized("token was signed by a key this server does not hold")
        return signer.verify_token(signed, now)
