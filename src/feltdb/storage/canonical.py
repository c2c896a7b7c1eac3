"""Canonical JSON and content hashes, shared by every layer.

Two implementations (or two writers) agree on identities only if they agree on bytes:
keys sorted, separators ``,`` and ``:``, UTF-8, no whitespace (API.md, "Deterministic
identities").
"""

from __future__ import annotations

import hashlib
import json
from typing import Any


def canonical_json(value: Any) -> str:
    """Serialize ``value`` canonically: sorted keys, no whitespace, non-ASCII kept as is.

    Raises:
        ValueError: the value is not JSON (NaN, infinity, or a non-JSON type).
    """
    try:
        return json.dumps(
            value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
        )
    except TypeError as error:
        raise ValueError(f"not JSON: {error}") from error


def sha256_hex(text: str) -> str:
    """Lowercase hex SHA-256 of ``text`` encoded as UTF-8.

    Total: a lone surrogate, which UTF-8 cannot encode, is hashed by its code point
    (``surrogatepass``) rather than raising, so deriving an id never fails before the
    input's own check refuses it. Valid text hashes exactly as plain UTF-8.
    """
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def content_hash(value: Any) -> str:
    """The content hash of a JSON value: hex SHA-256 of its canonical JSON."""
    return sha256_hex(canonical_json(value))
