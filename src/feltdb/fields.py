"""Field types shared by the records of several layers."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Annotated, Any

from annotated_types import Ge
from pydantic import BeforeValidator, PlainSerializer, StrictInt


def as_frozenset(value: Any) -> Any:
    """Accept any iterable but a string, bytes or mapping as the members of a set.

    The members are handed on as a list, so that validation turns each into its type
    (a subject from ``{"kind", "id"}``) before they are hashed; a bare string is passed on
    unchanged, so validation refuses it rather than splitting it into characters.
    """
    if isinstance(value, str | bytes | dict | set | frozenset):
        return value
    if isinstance(value, Iterable):
        return list(value)
    return value


def sorted_list(value: frozenset[Any]) -> list[Any]:
    """A set's members in order, which is how sets serialize (like the reference's BTreeSet)."""
    return sorted(value)


StringSet = Annotated[
    frozenset[str],
    BeforeValidator(as_frozenset),
    PlainSerializer(sorted_list, return_type=list[str]),
]
"""A set of strings: accepts any iterable, compares as a set, serializes sorted."""

Instant = StrictInt
"""Unix time in whole seconds."""

Count = Annotated[StrictInt, Ge(0)]
"""A non-negative integer: counts, versions, tokens, durations in milliseconds."""
