"""The request fields of the HTTP API, typed so that the OpenAPI schema says what the
authority accepts.

The store checks every argument itself (:mod:`feltdb.work.inputs`); these types repeat its
bounds in the schema (lengths, "not blank", no NUL, enumerations), so that a client
generated from ``/openapi.json`` (or a fuzzer such as schemathesis) never builds a request
the schema calls valid and the server refuses. They validate the same way, so a request
that breaks them is refused ``422 WORKLOAD_INVALID`` before the store is called.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BeforeValidator, Field

from feltdb.fields import (
    MAX_ID_CHARS,
    MAX_LIST_ITEMS,
    MAX_PATH_CHARS,
    MAX_SAFE_INTEGER,
    MAX_TEXT_CHARS,
)

WHITESPACE = (
    "\\u0009-\\u000d\\u001c-\\u0020\\u0085\\u00a0\\u1680"
    "\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000"
)
"""Every character Python's ``str.strip`` removes (what the store calls blank), as a
regular-expression class body that JSON Schema, Python and pydantic's engine all read."""

NOT_BLANK = f"^[^\\u0000]*[^\\u0000{WHITESPACE}][^\\u0000]*$"
"""A pattern for an identifier: some character that is not whitespace, and no NUL."""

NO_NUL = "^[^\\u0000]*$"
"""A pattern for text that may be blank but holds no NUL."""


def whole_number(value: Any) -> Any:
    """A JSON number with a zero fraction (``1861.0``) as the integer it is: JSON Schema
    counts it an integer, and so does every JavaScript client. Anything else is left for
    the strict integer check (so ``"5"``, ``true`` and ``1.5`` are still refused).
    """
    if isinstance(value, float) and value.is_integer() and abs(value) <= MAX_SAFE_INTEGER:
        return int(value)
    return value


JsonInteger = Annotated[int, BeforeValidator(whole_number)]
"""An integer as JSON writes it: ``5`` or ``5.0``."""

Identifier = Annotated[str, Field(min_length=1, max_length=MAX_ID_CHARS, pattern=NOT_BLANK)]
"""An id, kind or key: 1 to 256 characters, not blank, no NUL."""

ArtifactPath = Annotated[str, Field(min_length=1, max_length=MAX_PATH_CHARS, pattern=NOT_BLANK)]
"""An artifact's path or URI: 1 to 1,024 characters, not blank, no NUL."""

SecretReference = Annotated[
    str, Field(min_length=10, max_length=MAX_ID_CHARS, pattern="^secret://[^\\u0000]*$")
]
"""A ``secret://`` reference (the only secrets an execution context accepts)."""

ErrorText = Annotated[str, Field(min_length=1, max_length=MAX_TEXT_CHARS)]
"""An error message: 1 to 4,096 characters."""

Reason = Annotated[str, Field(max_length=MAX_TEXT_CHARS)]
"""A reason: up to 4,096 characters (blank is taken as none)."""

Artifacts = Annotated[list[ArtifactPath], Field(max_length=MAX_LIST_ITEMS)]
"""At most 1,024 artifact paths."""


def integers_as_declared(value: Any, schema: dict[str, Any]) -> Any:
    """``value`` with each whole-number float that ``schema`` (an inlined JSON Schema)
    declares an integer turned into that integer (:func:`whole_number`), and nothing else
    changed: a field the schema leaves free (a workload's ``input``) keeps its numbers
    exactly as sent, since they are hashed.
    """
    options = schema.get("anyOf", [schema])
    if isinstance(value, float):
        declared = {option.get("type") for option in options}
        return whole_number(value) if "integer" in declared and "number" not in declared else value
    if isinstance(value, dict):
        for option in options:
            properties = option.get("properties")
            if isinstance(properties, dict):
                return {
                    key: integers_as_declared(item, properties[key]) if key in properties else item
                    for key, item in value.items()
                }
        return value
    if isinstance(value, list):
        for option in options:
            items = option.get("items")
            if isinstance(items, dict):
                return [integers_as_declared(item, items) for item in value]
    return value
