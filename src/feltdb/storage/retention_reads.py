"""What retention needs of a database: the keys of a collection's rows in one state created
before an instant, oldest first, a page at a time (:mod:`feltdb.work.retention` prunes
from them).

The statement reads the index ``rows_by_state`` alone (it holds ``collection``, ``state``,
``created_at`` and ``key``), never a document: the caller reads the few rows a page names
by key. No index leads with the state, so the read walks the collection's index entries
and keeps the oldest ``limit`` (a top-N sort of keys, in bounded memory): its cost grows
with the collection, not with the page, which is why retention runs it once a pass of
many deletions, not per row. After its deletions a pass gives a bounded part of the space
they freed back to the file system (:mod:`feltdb.storage.reclaiming`).

:class:`RetentionReads` is the part of the :class:`~feltdb.storage.base.Database`
protocol; :class:`RetentionQueries` implements it over a dialect's named statements, for
:class:`~feltdb.storage.engine.SQLEngine`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import LiteralString, Protocol

from feltdb.storage.dialect import Dialect
from feltdb.storage.reclaiming import ReclaimQueries, SpaceReclaiming

__all__ = ["RetentionQueries", "RetentionReads"]


class RetentionReads(SpaceReclaiming, Protocol):
    """What a retention pass reads from a database, and how it gives space back."""

    def keys_created_before(
        self,
        collection: str,
        state: str,
        created_before: int,
        after: tuple[int, str] | None,
        *,
        limit: int,
    ) -> list[tuple[int, str]]:
        """The ``(created_at, key)`` of at most ``limit`` rows of ``collection`` whose index
        ``state`` is ``state`` and ``created_at`` at most ``created_before``, in that order,
        after the position ``after`` (``None``: from the oldest). Read from the index.
        """
        ...


class RetentionQueries(ReclaimQueries):
    """:class:`RetentionReads` over a dialect's statement ``keys_created_before`` (a base
    of ``SQLEngine``), and :class:`~feltdb.storage.reclaiming.ReclaimQueries`.
    """

    _dialect: Dialect
    _queries: Mapping[str, LiteralString]

    def keys_created_before(
        self,
        collection: str,
        state: str,
        created_before: int,
        after: tuple[int, str] | None,
        *,
        limit: int,
    ) -> list[tuple[int, str]]:
        """See :meth:`RetentionReads.keys_created_before`."""
        if limit <= 0:
            return []
        # A position before every row: created_at is an Instant (at least -2**53), and
        # "" sorts before every key.
        created_at, key = after if after is not None else (-(2**62), "")
        params = {
            "collection": collection,
            "state": state,
            "created_before": created_before,
            "after_created_at": created_at,
            "after_key": key,
            "limit": limit,
        }
        found = self._dialect.read(self._queries["keys_created_before"], params)
        return [(int(created), str(name)) for created, name in found]
