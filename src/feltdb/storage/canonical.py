"""Canonical JSON and content hashes, shared by every layer.

Two implementations (or two writers) agree on identities only if they agree on bytes:
keys sorted, separators ``,`` and ``:``, UTF-8, no whitespace (docs/api.md, "Deterministic
identities"). :func:`canonical_json` (the standard library's encoder) makes the text of
every identity; :func:`stored_json` makes the same text faster, for documents stored.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any, Final

import orjson

_OPTIONS: Final = (
    orjson.OPT_SORT_KEYS
    | orjson.OPT_PASSTHROUGH_SUBCLASS
    | orjson.OPT_PASSTHROUGH_DATETIME
    | orjson.OPT_PASSTHROUGH_DATACLASS
)
"""Sorted keys; a subclass of a JSON type, a datetime or a dataclass is refused (so made
by :func:`canonical_json`) rather than written as orjson would write it."""


_NEGATIVE_EXPONENT: Final = re.compile(rb"e-(?<=[0-9]e-)")
"""A digit, then ``e-`` (the literal first, so that the search skips to it)."""


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


def stored_json(value: Any) -> str:
    """:func:`canonical_json` of a JSON value that holds no NaN nor infinity, the same text
    byte for byte, made by orjson (about eight times faster on a workload's document).

    For a value of plain JSON types, as a record's ``to_json`` answers it (whose values
    were checked to be finite JSON where they entered). orjson would write NaN as ``null``,
    and an enum or a UUID as its value, where :func:`canonical_json` refuses them, so a value of
    unknown origin goes to :func:`canonical_json` instead. A value orjson refuses (an
    integer beyond 64 bits, a key that is not a string, a lone surrogate) and text that
    may hold a float orjson writes otherwise (:func:`_may_differ`) are made by
    :func:`canonical_json`: the text is always its text.

    Raises:
        ValueError: the value is not JSON (as :func:`canonical_json`).
    """
    try:
        encoded = orjson.dumps(value, option=_OPTIONS)
    except TypeError:  # orjson.JSONEncodeError
        return canonical_json(value)
    if _may_differ(encoded):
        return canonical_json(value)
    return encoded.decode()


def float_free_json(value: list[str] | dict[str, str | int | bool | None]) -> str:
    """:func:`canonical_json` of a list of strings, or of an object whose values are
    strings, integers, booleans or null: the same text byte for byte, by orjson alone
    (no float, so nothing it could write otherwise; a value orjson refuses, such as a
    lone surrogate or an integer beyond 64 bits, is made by :func:`canonical_json`).

    Raises:
        ValueError: the value is not JSON (as :func:`canonical_json`).
    """
    try:
        return orjson.dumps(value, option=_OPTIONS).decode()
    except TypeError:  # orjson.JSONEncodeError
        return canonical_json(value)


def _may_differ(encoded: bytes) -> bool:
    """Whether orjson's ``encoded`` text may write a float otherwise than ``json.dumps``.

    orjson writes every finite float as Python's ``repr`` does but those below 1e-4 in
    magnitude (``0.00001`` for ``1e-05``, ``1e-7`` for ``1e-07``), and its text of each of
    those holds ``0.0000`` or a digit then ``e-`` (a string holding those runs answers
    ``True`` too: harmless). ``tests/unit/storage/test_stored_json.py`` holds orjson to it.
    """
    # Each test looks for a rare byte first: bytes.find is fastest on one byte.
    if b"." in encoded and b"0.0000" in encoded:
        return True
    return b"-" in encoded and _NEGATIVE_EXPONENT.search(encoded) is not None


def json_object(text: str) -> dict[str, Any]:
    """The JSON object ``text`` holds, decoded by the standard library's parser (orjson's
    reads an integer beyond 64 bits as a float, and an older store may hold one).

    Raises:
        ValueError: saying it "is not JSON" or "is not a JSON object".
    """
    try:
        value = json.loads(text)
    except ValueError as error:
        raise ValueError(f"is not JSON: {error}") from error
    if not isinstance(value, dict):
        raise ValueError("is not a JSON object")
    return value


def sha256_hex(text: str) -> str:
    """Lowercase hex SHA-256 of ``text`` encoded as UTF-8.

    Total: a lone surrogate, which UTF-8 cannot encode, is hashed by its code point
    (``surrogatepass``) rather than raising, so deriving an id never fails before the
    input's own check refuses it. Valid text hashes exactly as plain UTF-8.
    """
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def content_hash(value: Any) -> str:
    """The content hash of a JSON value: hex SHA-256 of its canonical JSON (made by
    :func:`stored_json`: the same text). For a document checked where it entered
    (``check_document``: plain JSON types only), as every caller's is.

    Raises:
        ValueError: NaN or infinity (as :func:`canonical_json`).
    """
    text = stored_json(value)
    if "null" in text:  # orjson writes NaN and infinity as null; canonical_json refuses them
        text = canonical_json(value)
    return sha256_hex(text)
