"""Pages of one definition's, or one environment's, work in one state: the index ranges a
reader constrained to some definitions or environments lists from, instead of reading past
the application's other work.

``rows_by_definition`` (``collection, tenant_id, application_id, state, definition_id,
priority DESC, created_at, key``) and ``rows_by_environment`` (the environment first, then
the state) hold each such range in the list's order, so a page of it is one keyset seek (two
at a priority boundary), as :meth:`Database.page_rows` is for the whole application. The
work layer merges the ranges of the states and definitions (or environments) a reader may
see (:mod:`feltdb.work.listing`).

:class:`DefinitionPages` is the part of the :class:`~feltdb.storage.base.Database`
protocol; :class:`DefinitionPageQueries` implements it over a dialect's named statements,
for :class:`~feltdb.storage.engine.SQLEngine`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Final, Literal, Protocol

if TYPE_CHECKING:  # base composes this protocol: the row type is only named here
    from feltdb.storage.base import StoredRow

__all__ = ["DefinitionPageQueries", "DefinitionPages", "RangeColumn"]

RangeColumn = Literal["definition_id", "environment"]
"""The index column a list's range is of."""

_STATEMENTS: Final[dict[str, str]] = {
    "definition_id": "rows_of_definition",
    "environment": "rows_of_environment",
}
"""The statements (``list_…``, ``page_…_same_priority``, ``page_…_lower_priority``) of
each range."""


class DefinitionPages(Protocol):
    """What a list constrained to some definitions or environments reads."""

    def page_rows_in_range(
        self,
        collection: str,
        tenant_id: str,
        application_id: str,
        state: str,
        ranged: tuple[RangeColumn, str],
        after: tuple[int, int, str] | None,
        *,
        limit: int,
    ) -> list[StoredRow]:
        """:meth:`~feltdb.storage.base.Database.page_rows` of the application's rows in
        ``state`` whose column ``ranged[0]`` (the definition id, or the environment) is
        ``ranged[1]``: one index range, in the same order.
        """
        ...


class DefinitionPageQueries:
    """:class:`DefinitionPages` over a dialect's named statements (a base of ``SQLEngine``):
    ``list_rows_of_definition`` (``…_of_environment``) for a first page,
    ``page_rows_of_definition_*`` (``…_of_environment_*``) after one.
    """

    _select: Callable[[str, Mapping[str, Any]], list[StoredRow]]
    """Runs a dialect's statement by name (``SQLEngine``'s)."""

    def page_rows_in_range(
        self,
        collection: str,
        tenant_id: str,
        application_id: str,
        state: str,
        ranged: tuple[RangeColumn, str],
        after: tuple[int, int, str] | None,
        *,
        limit: int,
    ) -> list[StoredRow]:
        """See :meth:`DefinitionPages.page_rows_in_range`."""
        # Imported here: storage.base composes this module's protocol, and encoding reads base.
        from feltdb.storage.encoding import past_position

        if limit <= 0:
            return []
        column, value = ranged
        statements = _STATEMENTS[column]
        where = {
            "collection": collection,
            "tenant_id": tenant_id,
            "application_id": application_id,
            "state": state,
            column: value,
        }
        if after is None:
            return self._select(f"list_{statements}", {**where, "limit": limit})
        return past_position(
            lambda name, more, params: self._select(name, {**params, "limit": more}),
            f"page_{statements}",
            where,
            after,
            limit,
        )
