"""Document safety: what may enter workload state, and the secret material that may not.

Two rules, each one table:

- :data:`SECRET_KEY_NAMES`: an object key names a secret when, normalized (lower case,
  without ``-``, ``_``, ``.`` and spaces, so ``apiKey``, ``api-key`` and ``API_KEY`` are one
  name), it is in this set. The reference's five names (``password``, ``secret``,
  ``token``, ``api_key``, ``private_key``) are among them.
- :data:`SECRET_VALUE_PATTERNS`: a string holds secret material when one of these
  patterns occurs in it: private-key blocks, live API keys of common providers, bearer
  credentials and feltdb's own tokens.

:func:`check_document` walks a JSON document once, without recursion, checking its shape
(JSON types only, at most :data:`~feltdb.fields.MAX_JSON_DEPTH` deep, valid Unicode text)
and both rules; :func:`ensure_safe_text` applies the value rule to free text and to
identifiers that are stored and shown (result ids, kinds, keys, sessions, artifacts).
"""

from __future__ import annotations

import functools
import math
import re
import unicodedata
from typing import Any

from feltdb.errors import ErrorCode, WorkloadError
from feltdb.fields import MAX_DOCUMENT_BYTES, MAX_JSON_DEPTH, MAX_KEY_CHARS, text_problem
from feltdb.storage.canonical import canonical_json

SECRET_KEY_NAMES = frozenset(
    {
        "password",
        "passwd",
        "pwd",
        "passphrase",
        "credential",
        "credentials",
        "secret",
        "token",
        "apikey",
        "privatekey",
        "accesstoken",
        "refreshtoken",
        "idtoken",
        "authtoken",
        "sessiontoken",
        "bearertoken",
        "clientsecret",
        "secretkey",
        "secretaccesskey",
        "authorization",
        "cookie",
    }
)
"""Object keys, normalized (:func:`normalized_key`), whose value is taken for a secret: a
key is a secret's when its normalized form is one of these or ends with one (``db_password``,
``x-api-key``, ``aws_secret_access_key``)."""

SECRET_VALUE_PATTERNS: dict[str, str] = {
    # The reference's "BEGIN PRIVATE KEY", in any case and for every key type.
    "private key block": r"(?i)BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY",
    # The reference refuses any "sk-…", but "sk-learn" is harmless: a key is "sk-" and 20
    # key characters (OpenAI's have 48 or more), a labelled "sk-live-…"/"sk-proj-…" and 8,
    # or Stripe's "sk_…"/"rk_…" and 12 (Stripe's have 24 or more).
    "OpenAI-style or Stripe key": r"(?<![A-Za-z0-9])(?:sk-[A-Za-z0-9_-]{20,}"
    r"|sk-(?:live|test|proj|ant|admin|svcacct)-[A-Za-z0-9_-]{8,}|[sr]k_[A-Za-z0-9_]{12,})",
    "feltdb live key": r"(?i)(?<![A-Za-z0-9])fdb_live_",
    "AWS access key id": r"(?<![A-Z0-9])(?:AKIA|ASIA)[0-9A-Z]{16}(?![A-Z0-9])",
    "GitHub token": r"(?<![A-Za-z0-9])(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})",
    "Slack token": r"(?<![A-Za-z0-9])xox[abposr]-[A-Za-z0-9-]{10,}",
    # A credential, not the word: 16 token characters with a digit or a punctuation mark.
    "bearer credential": r"(?i)(?<![A-Za-z0-9])Bearer\s+(?=[A-Za-z0-9._~+/=-]*[0-9._~+/=-])"
    r"[A-Za-z0-9._~+/=-]{16,}",
    "feltdb token": r"(?i)(?<![A-Za-z0-9])fgt[0-9]+\.\W*[A-Za-z0-9_-]{16,}",
}
"""What secret material looks like in a string: a name for each pattern (said in the
refusal) and the pattern, searched anywhere in the text."""

_SECRET_VALUE = re.compile(
    "|".join(f"(?:{p.removeprefix('(?i)')})" for p in SECRET_VALUE_PATTERNS.values()),
    re.IGNORECASE,
)
_SECRET_KEY_SUFFIXES = tuple(sorted(SECRET_KEY_NAMES))
_ASCII_NOT_ALNUM = str.maketrans(
    "", "", "".join(c for c in map(chr, range(128)) if not c.isalnum())
)
_SHORTEST_SECRET = len("fdb_live_")
_MEMBER_BOUND = 32
"""Bytes a member may take besides its text: a number's digits, quotes, a colon, a comma."""
"""No pattern matches fewer characters, so shorter strings are not searched."""


def normalized_key(key: str) -> str:
    """``key`` as :data:`SECRET_KEY_NAMES` holds names: compatibility-normalized (NFKC, so
    fullwidth letters are letters), case-folded, and only its letters and digits kept (no
    separators, spaces, punctuation or invisible format characters).
    """
    if key.isascii():
        return key.lower().translate(_ASCII_NOT_ALNUM)
    key = unicodedata.normalize("NFKC", key)
    return "".join(character for character in key.casefold() if character.isalnum())


_CACHED_KEYS = 4096
_CACHED_KEY_CHARS = 64
"""Keys of at most this many characters have their answer cached (at most
:data:`_CACHED_KEYS` of them: about 1 MiB at worst); a longer key is checked each time, so
a flood of long keys, refused or not, pins no memory."""


def secret_key(key: str) -> bool:
    """Whether an object key names a secret (``apiKey``, ``client_secret``, ``passwd``,
    ``db_password``…).
    """
    if len(key) <= _CACHED_KEY_CHARS:
        return _short_secret_key(key)
    return _names_a_secret(key)


def _names_a_secret(key: str) -> bool:
    name = normalized_key(key)
    return name in SECRET_KEY_NAMES or name.endswith(_SECRET_KEY_SUFFIXES)


# Cached: documents repeat their keys, and the answer depends on the key alone.
_short_secret_key = functools.lru_cache(maxsize=_CACHED_KEYS)(_names_a_secret)


def sensitive_text(text: str) -> bool:
    """Whether ``text`` holds secret material (:data:`SECRET_VALUE_PATTERNS`)."""
    return len(text) >= _SHORTEST_SECRET and _SECRET_VALUE.search(text) is not None


def _invalid(field: str, message: str) -> WorkloadError:
    return WorkloadError(ErrorCode.WORKLOAD_INVALID, f"{field} {message}", {"fields": [field]})


def _secret(field: str) -> WorkloadError:
    return WorkloadError(
        ErrorCode.WORKLOAD_SECRET_REJECTED,
        f"plaintext secrets are forbidden in workload state ({field})",
        {"fields": [field]},
    )


def _check_string(text: str, field: str) -> None:
    """Refuse a string of a document that is not valid text or holds secret material."""
    if not text.isascii():
        problem = text_problem(text, len(text), identifier=False)
        if problem is not None:
            raise _invalid(field, f"holds a string that {problem}")
    if sensitive_text(text):
        raise _secret(field)


def _check_key(key: Any, field: str) -> None:
    """Refuse an object key that is not a string, not valid Unicode, or secret-like."""
    if type(key) is not str:
        raise _invalid(field, "must be JSON: object keys must be strings")
    if len(key) > MAX_KEY_CHARS:
        raise _invalid(
            field,
            f"holds an object key of {len(key):,} characters, over the limit of {MAX_KEY_CHARS:,}",
        )
    if not key.isascii():
        _check_string(key, field)
    elif len(key) >= _SHORTEST_SECRET and sensitive_text(key):
        raise _secret(field)
    if secret_key(key):
        raise _secret(field)


def check_document(value: Any, field: str, *, max_depth: int = MAX_JSON_DEPTH) -> None:
    """Refuse a document (input, checkpoint state, output) that is not JSON, nests deeper
    than ``max_depth``, holds text that is not valid Unicode, or carries secret material.

    One walk with an explicit stack of containers, so a document of any depth costs no
    recursion: the depth limit is met before any deeper level is looked at. Scalars are
    checked where they are found, without a trip through the stack (about 1 µs a member on
    this machine; ``bench/bench_input_checks.py``).

    Raises:
        WorkloadError: ``WORKLOAD_INVALID`` naming ``field`` (not JSON: a non-string key,
            NaN or infinity, a type JSON lacks; too deep; a lone surrogate);
            ``WORKLOAD_SECRET_REJECTED`` naming ``field`` for a secret key or value.
    """
    stack: list[tuple[Any, int]] = []
    # An upper bound of the encoded size, grown as the walk goes: the exact size (an
    # encode) is computed only for a document that might pass the limit.
    size = 0

    def member(item: Any, depth: int) -> None:
        nonlocal size
        kind = type(item)
        size += _MEMBER_BOUND
        if kind is str:
            size += 6 * len(item)  # at worst a \uXXXX escape per character
            _check_string(item, field)
        elif kind is dict or kind is list or isinstance(item, dict | list | tuple):
            if depth >= max_depth:
                raise _invalid(field, f"nests deeper than {max_depth} levels")
            stack.append((item, depth + 1))
        elif item is None or isinstance(item, int):  # bool is an int
            return
        elif isinstance(item, str):
            _check_string(item, field)
        elif isinstance(item, float):
            if not math.isfinite(item):
                raise _invalid(field, "must be JSON: NaN and infinity are not JSON numbers")
        else:
            raise _invalid(field, f"must be JSON: {kind.__name__} is not a JSON type")

    member(value, 0)
    while stack:
        container, depth = stack.pop()
        if isinstance(container, dict):
            for key, item in container.items():
                _check_key(key, field)
                size += 6 * len(key)
                member(item, depth)
        else:
            for item in container:
                member(item, depth)
    if size > MAX_DOCUMENT_BYTES:
        encoded = len(canonical_json(value).encode("utf-8"))
        if encoded > MAX_DOCUMENT_BYTES:
            raise _invalid(
                field, f"is {encoded} bytes of JSON, over the limit of {MAX_DOCUMENT_BYTES}"
            )


def ensure_safe(value: Any, field: str) -> None:
    """:func:`check_document`, under the reference's name."""
    check_document(value, field)


def ensure_safe_text(text: str, what: str) -> None:
    """Refuse free text (an error, a reason) or a shown identifier that carries secret
    material.

    Raises:
        WorkloadError: ``WORKLOAD_SECRET_REJECTED``.
    """
    if sensitive_text(text):
        raise WorkloadError(
            ErrorCode.WORKLOAD_SECRET_REJECTED,
            f"{what} may not contain secret material",
            {"fields": [what]},
        )
