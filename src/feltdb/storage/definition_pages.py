"""Pages of one definition's work in one state: the index range a reader constrained to
some definitions lists from, instead of reading past the application's other work.

``rows_by_definition`` (``collection, tenant_id, application_id, state, definition_id,
priority DESC, created_at, key``) holds each such range in the list's order, so a page of it
is one keyset seek (two at a priority boundary), as :meth:`Database.page_rows` is for the
whole application. The work layer merges the ranges of the states and definitions a reader
may see (:mod:`feltdb.work.listing`).

:class:`DefinitionPages` is the part of the :class:`~feltdb.storage.base.Database`
protocol; :class:`DefinitionPageQueries` implements it over a dialect's named statements,
for :class:`~feltdb.storage.engine.SQLEngine`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:  # base composes this protocol: the row type is only named here
    from feltdb.storage.base import StoredRow

__all__ = ["DefinitionPageQueries", "DefinitionPages"]


class DefinitionPages(Protocol):
    """What a list constrained to some definitions reads."""

    def page_rows_of_definition(
        self,
        collection: str,
        tenant_id: str,
        application_id: str,
        state: str,
        definition_id: str,
        after: tuple[int, int, str] | None,
        *,
        limit: int,
    ) -> list[StoredRow]:
        """:meth:`~feltdb.storage.base.Database.page_rows` of the application's rows in
        ``state`` of definition ``definition_id`` alone: one index range, in the same order.
        """
        ...


class DefinitionPageQueries:
    """:class:`DefinitionPages` over a dialect's named statements (a base of ``SQLEngine``):
    ``list_rows_of_definition`` for a first page, ``page_rows_of_definition_*`` after one.
    """

    _select: Callable[[str, Mapping[str, Any]], list[StoredRow]]
    """Runs a dialect's statement by name (``SQLEngine``'s)."""

    def page_rows_of_definition(
        self,
        collection: str,
        tenant_id: str,
        application_id: str,
        state: str,
        definition_id: str,
        after: tuple[int, int, str] | None,
        *,
        limit: int,
    ) -> list[StoredRow]:
        """See :meth:`DefinitionPages.page_rows_of_definition`."""
        # Imported here: storage.base composes this module's protocol, and encoding reads base.
        from feltdb.storage.encoding import past_position

        if limit <= 0:
            return []
        ranged = {
            "collection": collection,
            "tenant_id": tenant_id,
            "application_id": application_id,
            "state": state,
            "definition_id": definition_id,
        }
        if after is None:
            return self._select("list_rows_of_definition", {**ranged, "limit": limit})
        return past_position(
            lambda name, more, params: self._select(name, {**params, "limit": more}),
            "page_rows_of_definition",
            ranged,
            after,
            limit,
        )
