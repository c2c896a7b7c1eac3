"""storage/canonical.py's stored_json: canonical_json's text, byte for byte, made faster."""

from __future__ import annotations

import dataclasses
import datetime
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from feltdb.storage.canonical import (
    canonical_json,
    content_hash,
    float_free_json,
    sha256_hex,
    stored_json,
)

SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(alphabet=st.characters(exclude_categories=["Cs"]))
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(
            st.text(alphabet=st.characters(exclude_categories=["Cs"])), inner, max_size=4
        )
    ),
    max_leaves=20,
)


@settings(max_examples=400, deadline=None)
@given(VALUES)
def test_the_text_is_canonical_json_byte_for_byte(value: Any) -> None:
    assert stored_json(value) == canonical_json(value)


@settings(max_examples=2000, deadline=None)
@given(st.floats(allow_nan=False, allow_infinity=False))
def test_every_float_is_written_as_canonical_json_writes_it(value: float) -> None:
    # orjson writes floats below 1e-4 otherwise (0.00001, 1e-7): those must fall back.
    assert stored_json({"x": [value]}) == canonical_json({"x": [value]})


@pytest.mark.parametrize(
    "value",
    [
        {"b": 1, "a": [1e16, 1e-05, 1e-07, 5e-324, -0.0, 1.5, 2.0, 1.2345678901234568e20]},
        {"a": 9.999999999999999e-05, "b": 0.0001, "c": -2.2250738585072014e-308},
        {"text": "one-e-2 0.00001 and 1e-5, in strings only"},  # floats: orjson writes 1e16
        {"big": 2**64, "small": -(2**63) - 1},  # integers orjson refuses
        {"\uffff": 1, "\U00010000": 2, "\x7f": 3, "\u2028": 4, "é": 5},  # code point order
        {"s": '\x00\x01\x1f"\\/\n\r\t\b\f\u2029😀'},  # escapes
        [{1: "a", 3: "b"}, {None: "x"}, {2.5: "c"}, {True: "d"}],  # keys not strings
        {"x": (1, 2)},
        {"lone": "\ud800"},  # a lone surrogate, which orjson refuses
        {"ratio": "a:1.5,b"},  # looks like a float inside a string
        [],
        "text",
        None,
    ],
)
def test_every_edge_is_canonical_json(value: Any) -> None:
    assert stored_json(value) == canonical_json(value)


@dataclasses.dataclass
class _Point:
    x: int


class _Text(str):
    pass


@pytest.mark.parametrize(
    "value",
    [float("nan"), [float("inf")], {"at": datetime.datetime(2020, 1, 1)}, _Point(1), {1, 2}],
)
def test_what_canonical_json_refuses_is_refused(value: Any) -> None:
    with pytest.raises(ValueError):
        canonical_json(value)
    if isinstance(value, float) or isinstance(value, list):
        return  # NaN and infinity: stored_json's values never hold them (see its docstring)
    with pytest.raises(ValueError):
        stored_json(value)


def test_a_subclass_of_a_json_type_is_written_as_canonical_json_writes_it() -> None:
    assert stored_json({"k": _Text("v")}) == canonical_json({"k": _Text("v")}) == '{"k":"v"}'


FLAT = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.text(alphabet=st.characters(codec="utf-8"))
)


@settings(max_examples=1000, deadline=None)
@given(st.lists(st.text()) | st.dictionaries(st.text(alphabet=st.characters(codec="utf-8")), FLAT))
def test_float_free_text_is_canonical_json_byte_for_byte(value: Any) -> None:
    assert float_free_json(value) == canonical_json(value)


def test_float_free_text_orjson_refuses_is_made_by_canonical_json() -> None:
    for value in (["\ud800"], {"k": "a\udfff"}, {"n": 2**64}, {"n": -(2**63) - 1}):
        assert float_free_json(value) == canonical_json(value)  # type: ignore[arg-type]


@settings(max_examples=400, deadline=None)
@given(VALUES)
def test_a_content_hash_hashes_the_canonical_text(value: Any) -> None:
    assert content_hash(value) == sha256_hex(canonical_json(value))


@pytest.mark.parametrize("value", [float("nan"), {"x": [float("inf")]}, [-float("inf"), None]])
def test_a_content_hash_of_what_is_not_json_is_refused(value: Any) -> None:
    # orjson would write each of these as null: the hash must not pass it as JSON.
    with pytest.raises(ValueError):
        content_hash(value)
