"""The records' codec: a workload's stored text is its canonical JSON, byte for byte,
and reading it back gives the same workload, whatever JSON its input holds."""

from __future__ import annotations

from typing import Any

import msgspec
import msgspec.inspect as mi
from hypothesis import given, settings
from hypothesis import strategies as st
from support.factories import make_request

from feltdb.records.codec import (
    JSON_VALUED,
    stored_document,
    stored_workload,
    stored_workload_text,
)
from feltdb.records.workload import Workload, WorkloadCheckpoint, WorkloadResult
from feltdb.storage.canonical import canonical_json
from feltdb.work.admission import new_workload

# Text a request may hold (no lone surrogates: admission refuses them before any encode).
TEXT = st.text(st.characters(exclude_categories=("Cs",)), max_size=12)

JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**80), max_value=2**80)
    | st.floats(allow_nan=False, allow_infinity=False)
    | TEXT,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TEXT, inner, max_size=4),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None)
@given(value=JSON_VALUES)
def test_a_workload_s_stored_text_is_its_canonical_json_and_reads_back_to_it(value: Any) -> None:
    workload = new_workload(make_request(input=value), "workload_1")
    document, text = stored_document(workload)
    assert text == canonical_json(document)
    read = stored_workload("workload_1", text)
    assert read == workload
    assert stored_document(read)[1] == text, "read and written again, the same bytes"


def _holding(input: Any, state: Any, output: Any) -> Workload:
    workload = new_workload(make_request(input=input), "workload_1")
    checkpoint = WorkloadCheckpoint(
        checkpoint_id="c1", workload_id="workload_1", attempt_id="a1", sequence=1,
        state=state, state_hash="h", created_at=11, produced_by="w",
    )  # fmt: skip
    result = WorkloadResult(
        result_id="r1", workload_id="workload_1", attempt_id="a1", status="succeeded",
        output=output, output_hash="h", produced_by="w", created_at=12, schema_version=1,
    )  # fmt: skip
    return msgspec.structs.replace(workload, checkpoints=[checkpoint], result=result)


@settings(max_examples=500, deadline=None)
@given(input=JSON_VALUES, state=JSON_VALUES, output=JSON_VALUES)
def test_a_workload_s_text_made_from_the_struct_is_its_canonical_json(
    input: Any, state: Any, output: Any
) -> None:
    workload = _holding(input, state, output)
    assert stored_workload_text(workload) == canonical_json(workload.to_json())


def test_floats_msgspec_writes_otherwise_are_written_as_canonical_json_writes_them() -> None:
    for value in (1e16, -1.5e22, 1e-05, 2.5e-07, 0.00001234, 1.0, 5e-324, 1e300):
        workload = _holding({"x": [value]}, {"y": value}, value)
        assert stored_workload_text(workload) == canonical_json(workload.to_json())
    long = _holding({"n": "x" * 5000, "f": 1e16}, None, None)  # not looked at: the slow path
    assert stored_workload_text(long) == canonical_json(long.to_json())


def _json_valued_paths(kind: mi.Type, path: str, found: list[str], floats: list[str]) -> None:
    if isinstance(kind, mi.AnyType):
        found.append(path)
    elif isinstance(kind, mi.FloatType):
        floats.append(path)
    elif isinstance(kind, mi.StructType):
        for field in kind.fields:
            _json_valued_paths(field.type, f"{path}.{field.name}".lstrip("."), found, floats)
    elif isinstance(kind, mi.UnionType):
        for member in kind.types:
            _json_valued_paths(member, path, found, floats)
    elif isinstance(kind, (mi.ListType, mi.SetType, mi.FrozenSetType, mi.VarTupleType)):
        _json_valued_paths(kind.item_type, f"{path}[]", found, floats)
    elif isinstance(kind, mi.DictType):
        _json_valued_paths(kind.key_type, f"{path}{{key}}", found, floats)
        _json_valued_paths(kind.value_type, f"{path}{{}}", found, floats)
    elif isinstance(kind, mi.TupleType):
        for place, member in enumerate(kind.item_types):
            _json_valued_paths(member, f"{path}[{place}]", found, floats)
    elif isinstance(kind, mi.Metadata):
        _json_valued_paths(kind.type, path, found, floats)
    else:  # a kind the walk does not know could hide a float: it must be taught it
        assert isinstance(kind, _SCALARS), f"{path}: {kind!r}"


_SCALARS = (mi.StrType, mi.IntType, mi.BoolType, mi.NoneType, mi.EnumType, mi.LiteralType)


def test_only_the_places_the_codec_looks_at_can_hold_a_float() -> None:
    # The fast text is exact only if every float is in JSON_VALUED: a new field typed Any
    # (or float) must be added there, or this fails.
    found: list[str] = []
    floats: list[str] = []
    _json_valued_paths(mi.type_info(Workload), "", found, floats)
    assert sorted(found) == sorted(JSON_VALUED)
    assert floats == []
