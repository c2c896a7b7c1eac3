"""The index columns of a row, declared once: the fields of
:class:`~feltdb.storage.base.RowIndex`.

Every statement that writes them names them through a marker that :func:`expand` fills in
when the dialect's ``queries.sql`` is loaded, so a new indexed field is its ``RowIndex``
field and a migration per dialect (the column and its index), and no statement to edit:

========================== =====================================================
marker                     becomes (SQLite; PostgreSQL casts integers to bigint)
========================== =====================================================
``/*index_columns*/``      ``tenant_id, application_id, …``
``/*index_columns:u*/``    ``u.tenant_id, u.application_id, …``
``/*index_values*/``       ``:tenant_id, :application_id, …``
``/*index_set*/``          ``tenant_id = :tenant_id, …``
``/*index_set:excluded*/`` ``tenant_id = excluded.tenant_id, …``
``/*index_arrays*/``       (PostgreSQL) ``%(tenant_id)s::text[], …``
========================== =====================================================
"""

from __future__ import annotations

import re
from dataclasses import fields
from operator import attrgetter
from typing import Any, Final

from feltdb.storage.base import RowIndex

IndexColumn = tuple[str, str]
"""A column's name and its SQL type: ``"text"`` or ``"bigint"``."""

_SQL_TYPES: Final = {"int | None": "bigint", "str | None": "text"}
"""The SQL type of each field type an index column may have (optional, as every one is)."""


def _column(name: str, annotation: object) -> IndexColumn:
    kind = _SQL_TYPES.get(str(annotation))
    if kind is None:
        raise TypeError(f"RowIndex.{name}: an index column is int | None or str | None")
    return name, kind


INDEX_COLUMNS: Final[tuple[IndexColumn, ...]] = tuple(
    _column(field.name, field.type) for field in fields(RowIndex)
)
"""Every index column, in ``RowIndex``'s order: an integer field is a ``bigint``."""

INDEX_NAMES: Final = tuple(name for name, _ in INDEX_COLUMNS)
INTEGER_COLUMNS: Final = tuple(name for name, kind in INDEX_COLUMNS if kind == "bigint")
TEXT_COLUMNS: Final = tuple(name for name, kind in INDEX_COLUMNS if kind == "text")

_values_of = attrgetter(*INDEX_NAMES)

_MARKER = re.compile(r"/\*index_(?P<what>columns|values|set|arrays)(?::(?P<source>\w+))?\*/")


def index_params(index: RowIndex) -> dict[str, Any]:
    """The index columns of a row as query parameters, by column name."""
    return dict(zip(INDEX_NAMES, _values_of(index), strict=True))


def expand(statement: str, dialect: str, columns: tuple[IndexColumn, ...] = INDEX_COLUMNS) -> str:
    """``statement`` with each index marker (see the module) written out for ``dialect``
    (``"sqlite"`` or ``"postgres"``) over ``columns``.

    Raises:
        ValueError: a marker this dialect has no form of (arrays on SQLite), or an unknown
            dialect.
    """
    if dialect not in ("sqlite", "postgres"):
        raise ValueError(f"no index columns for SQL dialect {dialect!r}")

    def parameter(name: str, kind: str) -> str:
        if dialect == "sqlite":
            return f":{name}"
        return f"%({name})s::bigint" if kind == "bigint" else f"%({name})s"

    def written(marker: re.Match[str]) -> str:
        what, source = marker["what"], marker["source"]
        if what == "columns":
            return ", ".join(f"{source}.{name}" if source else name for name, _ in columns)
        if what == "values":
            return ", ".join(parameter(name, kind) for name, kind in columns)
        if what == "set":
            return ",\n    ".join(
                f"{name} = {source}.{name}" if source else f"{name} = {parameter(name, kind)}"
                for name, kind in columns
            )
        if dialect == "sqlite":
            raise ValueError("SQLite binds no arrays: /*index_arrays*/ is PostgreSQL's")
        return ", ".join(f"%({name})s::{kind}[]" for name, kind in columns)

    return _MARKER.sub(written, statement)
