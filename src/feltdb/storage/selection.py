"""The rows a selecting commit hands its ``choose``, read inside its write transaction.

:meth:`~feltdb.storage.engine.SQLEngine.commit_selected_many` selects either by state (one
index range of the application's rows in a state) or by claim partitions (one range per
accepted group, see :mod:`feltdb.storage.partitions`, merged in index order by
:func:`~feltdb.storage.encoding.merge_ranges`). Each row is locked as the dialect's
statements lock it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, LiteralString

from feltdb.storage.dialect import Session
from feltdb.storage.encoding import SelectedRow, merge_ranges, past_position


@dataclass(frozen=True, slots=True)
class Selection:
    """The selecting statements of one transaction, over ``params`` (the collection, the
    tenant's application, the state and ``now``); ``limit_of`` turns a row count (negative:
    all) into the dialect's ``LIMIT``.
    """

    session: Session
    queries: Mapping[str, LiteralString]
    limit_of: Callable[[int | None], int | None]
    params: Mapping[str, Any]

    def by_state(self) -> Sequence[SelectedRow]:
        """The eligible rows in the state, paged by the parameters' ``limit`` and ``offset``."""
        rows: list[SelectedRow] = self.session.execute(
            self.queries["claimable_rows"], self.params
        ).fetchall()
        return rows

    def in_groups(
        self,
        groups: Sequence[tuple[str, str]],
        offset: int,
        limit: int,
        after: tuple[int, int, str] | None = None,
    ) -> Sequence[SelectedRow]:
        """The eligible rows of the ``(definition, group)`` ranges, merged and paged: past
        ``after`` when given (``offset`` is then not applied), else past ``offset`` rows.
        """

        def fetch(group: tuple[str, str], depth: int) -> list[tuple[Any, ...]]:
            definition, claim_group = group
            ranged = {"definition": definition, "claim_group": claim_group}
            if after is None:
                return self._fetch("claimable_rows_in_group", depth, ranged)
            # The rows before the position are never read again.
            return past_position(self._fetch, "claimable_rows_in_group", ranged, after, depth)

        return merge_ranges(fetch, groups, 0 if after is not None else offset, limit)

    def _fetch(self, name: str, depth: int, range_params: dict[str, Any]) -> list[tuple[Any, ...]]:
        params = {**self.params, **range_params, "limit": self.limit_of(depth)}
        found: list[tuple[Any, ...]] = self.session.execute(self.queries[name], params).fetchall()
        return found
