"""Document safety: what may enter workload state, and the secret material that may not.

Two rules, whose tables :mod:`feltdb.work.secret_shapes` holds:

- Keys. An object key names a secret when its normalized form (:func:`normalized_key`:
  NFKC, look-alike letters of other scripts folded to Latin
  (:data:`~feltdb.work.secret_shapes.CONFUSABLE_LETTERS`), lower case, letters and digits
  only, so ``apiKey``, ``api-key``, ``API_KEY`` and ``аpi_kеy`` in Cyrillic are one name)
  is a name of :data:`SECRET_KEY_NAMES`, or ends with one (``db_password``,
  ``x-api-key``). A key that merely starts with one (``password_policy``,
  ``tokens_used``) names no secret. Two kinds of names are stricter:

  - the short :data:`~feltdb.work.secret_shapes.SECRET_KEY_WORDS` (``pw``, ``pass``,
    ``jwt``, ``dsn``) match only as the whole key or as its *last word*: the last run of
    letters and digits, after a separator (anything but a letter or a digit; invisible
    format characters are no separator, they are dropped) or a capital that starts a word
    (``db_pass``, ``user-pw``, ``dbPass``, ``DBPass``, ``userPW``), never inside a word
    (``bypass``, ``compass``, ``BYPASS``, ``pwm``);
  - :data:`~feltdb.work.secret_shapes.WHOLE_SECRET_KEY_NAMES` (``tokens``) match only as
    the whole key (``max_tokens`` counts tokens).

- Values. A string holds secret material when one of :data:`SECRET_VALUE_PATTERNS`
  occurs in it (private-key blocks, provider keys and tokens, JWTs, credentials in URLs
  and headers, feltdb's own tokens) once Unicode format characters (category ``Cf``:
  zero-width spaces and joiners, soft hyphens, bidirectional marks) are taken out, or when
  it is itself a JSON object or array (it starts with ``{`` or ``[`` after white space and
  has at most :data:`EMBEDDED_JSON_CHARS` characters) that holds a secret key or value,
  looked for :data:`EMBEDDED_JSON_LEVELS` strings deep.

:func:`check_document` walks a JSON document once, without recursion, checking its shape
(JSON types only, at most :data:`~feltdb.fields.MAX_JSON_DEPTH` deep, valid Unicode text)
and both rules; :func:`ensure_safe_text` applies the value rule to free text and to
identifiers that are stored and shown (result ids, kinds, keys, sessions, artifacts).
"""

from __future__ import annotations

import functools
import json
import math
import re
import sys
import unicodedata
from typing import Any, Final

from feltdb.errors import ErrorCode, WorkloadError
from feltdb.fields import MAX_DOCUMENT_BYTES, MAX_JSON_DEPTH, MAX_KEY_CHARS, text_problem
from feltdb.storage.canonical import canonical_json
from feltdb.work.secret_shapes import (
    CONFUSABLE_LETTERS,
    LONG_TEXT_CHARS,
    SECRET_KEY_NAMES,
    SECRET_KEY_WORDS,
    SECRET_VALUE_PATTERNS,
    SHORT_TEXT_PATTERNS,
    SHORTEST_SECRET,
    WHOLE_SECRET_KEY_NAMES,
)

__all__ = [
    "EMBEDDED_JSON_CHARS",
    "EMBEDDED_JSON_LEVELS",
    "SECRET_KEY_NAMES",
    "SECRET_VALUE_PATTERNS",
    "check_document",
    "ensure_safe",
    "ensure_safe_text",
    "normalized_key",
    "secret_key",
    "sensitive_text",
]

EMBEDDED_JSON_CHARS = MAX_DOCUMENT_BYTES
"""The longest string that is parsed as JSON to look for secrets inside it. A longer one
cannot be part of an admissible document (its JSON is over the document limit), so no
secret hides behind padding: the bound only caps the work spent on what is refused anyway,
and free text longer than this is searched as text only."""
EMBEDDED_JSON_LEVELS = 3
"""How many strings deep embedded JSON is looked into: JSON in a string, in a string of
that, in a string of that. Each level parses at most the text of the level above, so a
document costs at most this many more parses of its own size."""

# One search for all patterns (each says its own case rule), and one for those a short
# text can hold.
_SECRET_VALUE = re.compile("|".join(f"(?:{p})" for p in SECRET_VALUE_PATTERNS.values()))
_SHORT_SECRET_VALUE = re.compile(
    "|".join(f"(?:{p})" for name, p in SECRET_VALUE_PATTERNS.items() if name in SHORT_TEXT_PATTERNS)
)
_SECRET_KEY_SUFFIXES = tuple(sorted(SECRET_KEY_NAMES - SECRET_KEY_WORDS - WHOLE_SECRET_KEY_NAMES))
_SECRET_KEY_WORD_ENDS = tuple(sorted(SECRET_KEY_WORDS))
_ASCII_NOT_ALNUM = str.maketrans(
    "", "", "".join(c for c in map(chr, range(128)) if not c.isalnum())
)
_JSON_OPENERS = frozenset("{[")
_JSON_WHITE_SPACE = " \t\n\r"
_JSON_FIRST = _JSON_OPENERS | frozenset(_JSON_WHITE_SPACE)
"""What a JSON object or array may start with: one test rules out most text."""
_MEMBER_BOUND = 32
"""Bytes a member may take besides its text: a number's digits, quotes, a colon, a comma."""


@functools.cache
def _format_characters() -> re.Pattern[str]:
    """A pattern matching every Unicode format character (category ``Cf``) of this
    Python's Unicode database: built on the first non-ASCII text (about 50 ms, once), so
    that importing the module costs nothing.
    """
    ranges: list[str] = []
    start = previous = -2
    for point in range(sys.maxunicode + 1):
        if unicodedata.category(chr(point)) != "Cf":
            continue
        if point != previous + 1:
            if start >= 0:
                ranges.append(f"{re.escape(chr(start))}-{re.escape(chr(previous))}")
            start = point
        previous = point
    ranges.append(f"{re.escape(chr(start))}-{re.escape(chr(previous))}")
    return re.compile(f"[{''.join(ranges)}]")


def _without_format_characters(text: str) -> str:
    """``text`` without its Unicode format characters (``Cf``: ``AKIA``, a zero-width space
    and ``IOSF…`` read ``AKIAIOSF…``); ASCII text, which has none, is returned as it is.
    """
    return text if text.isascii() else _format_characters().sub("", text)


def _prepared_key(key: str) -> str:
    """A non-ASCII key as names are compared: NFKC, format characters dropped, look-alike
    letters folded to Latin; case kept, for :func:`_last_word`.
    """
    key = _without_format_characters(unicodedata.normalize("NFKC", key))
    return key.translate(CONFUSABLE_LETTERS)


def normalized_key(key: str) -> str:
    """``key`` as :data:`SECRET_KEY_NAMES` holds names: compatibility-normalized (NFKC, so
    fullwidth letters are letters), look-alike letters of other scripts folded to Latin,
    case-folded, and only its letters and digits kept (no separators, spaces, punctuation
    or invisible format characters).
    """
    if key.isascii():
        return key.lower().translate(_ASCII_NOT_ALNUM)
    return "".join(c for c in _prepared_key(key).casefold() if c.isalnum())


def _last_word(key: str) -> str:
    """The last word of ``key``: its last run of letters and digits, cut again where a
    capital starts a word (``dbPass`` and ``DBPass`` end in ``Pass``, ``userPW`` in
    ``PW``; ``BYPASS`` and ``bypass`` are one word).
    """
    end = len(key)
    while end and not key[end - 1].isalnum():
        end -= 1
    start = end
    while start and key[start - 1].isalnum():
        start -= 1
    run = key[start:end]
    for at in range(len(run) - 1, 0, -1):
        if run[at].isupper() and (
            not run[at - 1].isupper() or (at + 1 < len(run) and run[at + 1].islower())
        ):
            return run[at:]
    return run


REFUSED: Final = 2
"""A key refused whatever its value."""
REFUSED_WITH_TEXT: Final = 1
"""A key refused only with text for its value: a short name (``pass``, ``pw``, ``jwt``,
``dsn``, ``tokens``) also names counts and flags (``{"pass": 3}``, ``{"tokens": 1234}``)."""


def secret_key(key: str) -> bool:
    """Whether an object key names a secret (``apiKey``, ``client_secret``, ``passwd``,
    ``db_password``, ``db_pass``, ``раssword`` in Cyrillic…) by the rule of the module's
    docstring.
    """
    return _key_name(key) > 0


def _key_name(key: str) -> int:
    """:data:`REFUSED` for a key naming a secret, :data:`REFUSED_WITH_TEXT` for one whose
    short name names one only when it holds text, else 0.
    """
    name = normalized_key(key)
    if name in WHOLE_SECRET_KEY_NAMES or name in SECRET_KEY_WORDS:
        return REFUSED_WITH_TEXT
    if name in SECRET_KEY_NAMES or name.endswith(_SECRET_KEY_SUFFIXES):
        return REFUSED
    if not name.endswith(_SECRET_KEY_WORD_ENDS):
        return 0
    # A short name ends the letters: a secret only if it is the key's last word as written.
    word = _last_word(key if key.isascii() else _prepared_key(key))
    return REFUSED_WITH_TEXT if word.lower() in SECRET_KEY_WORDS else 0


def _refused_key(key: str) -> int:
    """How a document's object key is refused: :data:`REFUSED` when it holds secret
    material as text (:func:`sensitive_text`), else as its name says (:func:`_key_name`).
    """
    return REFUSED if _holds_secret(key, EMBEDDED_JSON_LEVELS) else _key_name(key)


_CACHED_KEYS = 4096
_CACHED_KEY_CHARS = 64
"""Keys of at most this many characters have their answer cached (at most
:data:`_CACHED_KEYS` of them: about 1 MiB at worst); a longer key is checked each time, so
a flood of long keys, refused or not, pins no memory."""

# Cached: documents repeat their keys, and the answer depends on the key alone.
_short_refused_key = functools.lru_cache(maxsize=_CACHED_KEYS)(_refused_key)


def sensitive_text(text: str) -> bool:
    """Whether ``text`` holds secret material: a :data:`SECRET_VALUE_PATTERNS` match once
    format characters are out, or, being a JSON object or array, a secret key or value.
    """
    return _holds_secret(text, EMBEDDED_JSON_LEVELS)


def _holds_secret(text: str, levels: int) -> bool:
    """:func:`sensitive_text`, looking into embedded JSON ``levels`` strings deep."""
    if not text.isascii():
        text = _format_characters().sub("", text)
    if _secret_pattern_in(text):
        return True
    return text[:1] in _JSON_FIRST and _json_holds_secret(text, levels)


def _secret_pattern_in(text: str) -> bool:
    """Whether one of :data:`SECRET_VALUE_PATTERNS` occurs in ``text`` as it is."""
    chars = len(text)
    if chars < SHORTEST_SECRET:
        return False
    pattern = _SECRET_VALUE if chars >= LONG_TEXT_CHARS else _SHORT_SECRET_VALUE
    return pattern.search(text) is not None


def _json_holds_secret(text: str, levels: int) -> bool:
    """Whether ``text`` is a JSON object or array, short enough to be parsed, that holds a
    secret key or value (embedded JSON looked into ``levels`` strings deep).
    """
    if levels <= 0 or len(text) > EMBEDDED_JSON_CHARS:
        return False
    if text.lstrip(_JSON_WHITE_SPACE)[:1] not in _JSON_OPENERS:
        return False
    return _embedded_secret(text, levels - 1)


def _embedded_secret(text: str, levels: int) -> bool:
    """Whether ``text``, parsed as JSON, holds a secret key or a value that
    :func:`_holds_secret` (``levels`` deep) refuses; text that is not JSON holds none here.

    The parsed value is walked with a stack, so its depth costs no recursion; its size is
    bounded by the text's.
    """
    try:
        parsed = json.loads(text)
    except (ValueError, RecursionError):  # not JSON, or nested past the parser's limit
        return False
    stack: list[Any] = [parsed]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            for key, value in item.items():
                if secret_key(key) or _holds_secret(key, levels):  # rare: not cached
                    return True
                stack.append(value)
        elif isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, str) and _holds_secret(item, levels):
            return True
    return False


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
        text = _format_characters().sub("", text)
    # _holds_secret written out, two calls fewer: this is every string of every document,
    # and most end at the first test that fails.
    chars = len(text)
    if chars >= SHORTEST_SECRET and (
        _SECRET_VALUE if chars >= LONG_TEXT_CHARS else _SHORT_SECRET_VALUE
    ).search(text):
        raise _secret(field)
    if text[:1] in _JSON_FIRST and _json_holds_secret(text, EMBEDDED_JSON_LEVELS):
        raise _secret(field)


def _check_key(key: Any, field: str, value: Any) -> None:
    """Refuse an object key that is not a string, not valid Unicode, or secret-like (a
    short secret name only when ``value``, what it holds, is text).
    """
    if type(key) is not str:
        raise _invalid(field, "must be JSON: object keys must be strings")
    if len(key) > MAX_KEY_CHARS:
        raise _invalid(
            field,
            f"holds an object key of {len(key):,} characters, over the limit of {MAX_KEY_CHARS:,}",
        )
    if not key.isascii():
        problem = text_problem(key, len(key), identifier=False)
        if problem is not None:
            raise _invalid(field, f"holds a string that {problem}")
    refused = _short_refused_key(key) if len(key) <= _CACHED_KEY_CHARS else _refused_key(key)
    if refused == REFUSED or (refused == REFUSED_WITH_TEXT and isinstance(value, str)):
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
                _check_key(key, field, item)
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
