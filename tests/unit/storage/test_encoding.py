"""storage/encoding.py: what both backends share, tested without a database."""

from __future__ import annotations

import pytest

from feltdb.errors import ErrorCode, WorkloadError
from feltdb.storage.encoding import RowsDecodedOnRead

FETCHED = [
    ("work", "a", 1, 10, '{"n": "a"}'),
    ("work", "b", 2, 11, "not json"),  # decoding this one would fail
    ("work", "c", 3, 12, '{"n": "c"}'),
]


def test_rows_are_decoded_only_when_read() -> None:
    rows = RowsDecodedOnRead(FETCHED)
    assert len(rows) == 3
    first = rows[0]
    assert (first.key, first.version, first.revision) == ("a", 1, 10)
    assert first.document == {"n": "a", "__version": 1}
    assert rows[-1].key == "c"  # row b, which is not JSON, was never decoded
    assert rows[0] is first  # decoded once, then kept
    corrupt = rows[1]  # a row's document is decoded when it is asked for
    with pytest.raises(WorkloadError) as raised:
        _ = corrupt.document
    assert raised.value.code == ErrorCode.WORKLOAD_STORAGE_FAILURE
    assert "work/b is not JSON" in raised.value.message


def test_rows_behave_as_a_sequence() -> None:
    rows = RowsDecodedOnRead(FETCHED[::2])
    assert [row.key for row in rows] == ["a", "c"]
    assert [row.key for row in rows[1:]] == ["c"]
    with pytest.raises(IndexError):
        rows[2]
    assert list(RowsDecodedOnRead([])) == []
