"""The index columns of a row are declared once (feltdb.storage.index_columns): every write
statement of both dialects names them through markers filled in from RowIndex's fields."""

from __future__ import annotations

import re
from dataclasses import fields
from importlib import resources

import pytest

from feltdb.storage.base import RowIndex
from feltdb.storage.index_columns import INDEX_COLUMNS, expand, index_params
from feltdb.storage.sql import load_queries, parse_queries

WRITES = {
    "sqlite": ("insert_row_if_absent", "update_row_if_version", "upsert_row", "update_index"),
    "postgres": (
        "insert_row_if_absent",
        "update_row_if_version",
        "upsert_row",
        "update_index",
        "insert_batch_rows_if_absent",
        "update_batch_rows_if_version",
    ),
}


def raw_queries(dialect: str) -> dict[str, str]:
    text = resources.files("feltdb.storage.sql").joinpath(dialect, "queries.sql").read_text()
    return parse_queries(text)


def test_the_columns_are_row_index_s_fields_an_integer_one_a_bigint() -> None:
    assert [name for name, _ in INDEX_COLUMNS] == [field.name for field in fields(RowIndex)]
    kinds = dict(INDEX_COLUMNS)
    assert kinds["priority"] == kinds["deadline_at"] == "bigint"
    assert kinds["tenant_id"] == kinds["claim_group"] == "text"
    index = RowIndex("t", "a", "ready", 3, 10, None, 20, 30, "r", "d", "g")
    assert index_params(index) == {
        field.name: getattr(index, field.name) for field in fields(index)
    }


@pytest.mark.parametrize("dialect", sorted(WRITES))
def test_every_write_statement_names_every_index_column(dialect: str) -> None:
    queries = load_queries(dialect)
    for name in WRITES[dialect]:
        statement = queries[name]
        assert "/*index" not in statement, name
        for column, _ in INDEX_COLUMNS:
            assert re.search(rf"\b{column}\b", statement), (name, column)
    # No other statement is left with a marker, and none writes the columns by hand.
    assert not any("/*index" in statement for statement in queries.values())
    assigned = re.compile(r"^\s*claim_group = ", re.MULTILINE)  # in a SET, not a WHERE
    by_hand = [name for name, text in raw_queries(dialect).items() if assigned.search(text)]
    assert by_hand == [], by_hand


@pytest.mark.parametrize("dialect", sorted(WRITES))
def test_a_new_field_is_written_by_every_write_statement_without_editing_one(
    dialect: str,
) -> None:
    # What declaring one more RowIndex field does: each write statement names it, with its
    # parameter (cast on PostgreSQL) and, in the batch statements, its array.
    more = (*INDEX_COLUMNS, ("shard", "bigint"))
    raw = raw_queries(dialect)
    for name in WRITES[dialect]:
        statement = expand(raw[name], dialect, more)
        assert statement.count("shard") >= 2, (name, statement)
    upsert = expand(raw["upsert_row"], dialect, more)
    assert "shard = excluded.shard" in upsert
    if dialect == "postgres":
        assert "%(shard)s::bigint" in upsert
        assert "%(shard)s::bigint[]" in expand(raw["update_batch_rows_if_version"], dialect, more)
    else:
        assert ":shard" in upsert


def test_sqlite_binds_no_arrays_and_an_unknown_dialect_is_refused() -> None:
    with pytest.raises(ValueError, match="PostgreSQL's"):
        expand("SELECT /*index_arrays*/", "sqlite")
    with pytest.raises(ValueError, match="dialect"):
        expand("SELECT /*index_columns*/", "oracle")


def test_an_index_column_of_another_type_is_refused_when_declared() -> None:
    from feltdb.storage.index_columns import _column

    assert _column("shard", "int | None") == ("shard", "bigint")
    for annotation in ("float | None", "bool | None", "Checkpoint | None", "int"):
        with pytest.raises(TypeError, match=re.escape("int | None or str | None")):
            _column("shard", annotation)
