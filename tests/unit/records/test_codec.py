"""The records' codec: a workload's stored text is its canonical JSON, byte for byte,
and reading it back gives the same workload, whatever JSON its input holds."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from support.factories import make_request

from feltdb.records.codec import stored_document, stored_workload
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
