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

from feltdb.storage.aging import aged_start
from feltdb.storage.dialect import Session
from feltdb.storage.encoding import SelectedRow, merge_ranges, past_position
from feltdb.storage.partitions import ClaimPartitions


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

    def rows(
        self,
        groups: Sequence[tuple[str, str]] | None,
        offset: int,
        limit: int,
        partitions: ClaimPartitions | None,
    ) -> Sequence[SelectedRow]:
        """The rows selected: by state (``groups`` ``None``: no partitions, or too many
        groups to walk), else of the accepted ``groups``, in turns if ``partitions`` splits
        them into several (:meth:`in_turns`), else merged (:meth:`in_groups`).
        """
        if groups is None or partitions is None:
            return self.by_state()
        turns = partitions.turns(groups) if partitions.turns is not None else [groups]
        if len(turns) > 1:
            return self.in_turns(turns, offset, limit, partitions.aging_s)
        return self.in_groups(groups, offset, limit, partitions.after, partitions.aging_s)

    def in_turns(
        self,
        turns: Sequence[Sequence[tuple[str, str]]],
        offset: int,
        limit: int,
        aging_s: int | None = None,
    ) -> Sequence[SelectedRow]:
        """The eligible rows of several turns of ``(definition, group)`` ranges, one row of
        each turn's merged rows in turn (round robin, a turn with no more skipped), paged by
        ``offset``. Only the turns that give a row of the page are read: a claim of one row
        reads the first turn alone. Each turn's rows start at an aged level, with
        ``aging_s``, from the first page (:mod:`~feltdb.storage.aging`).
        """
        wanted = max(offset, 0) + limit
        count = len(turns)
        # Position p of the round robin is the turn p % count's (p // count)th row, while
        # every turn has rows; each turn is read first to the depth that needs.
        depths = [len(range(n, wanted, count)) for n in range(count)]
        rows: list[Sequence[SelectedRow]] = [
            self.in_groups(turn, 0, depth, None, aging_s) if depth else []
            for turn, depth in zip(turns, depths, strict=True)
        ]
        ended = [len(got) < depth for got, depth in zip(rows, depths, strict=True)]
        taken: list[SelectedRow] = []
        at = [0] * count
        done = lambda n: ended[n] and at[n] == len(rows[n])  # noqa: E731
        while len(taken) < wanted and not all(map(done, range(count))):
            for n in range(count):
                if len(taken) < wanted and at[n] == len(rows[n]) and not ended[n]:
                    # A turn ran out before: the next ones fill its places, each read on
                    # only when reached (never every key's range for one missing row).
                    depth = at[n] + wanted - len(taken)
                    rows[n] = self.in_groups(turns[n], 0, depth, None, aging_s)
                    ended[n] = len(rows[n]) < depth
                if at[n] < len(rows[n]) and len(taken) < wanted:
                    taken.append(rows[n][at[n]])
                    at[n] += 1
        return taken[max(offset, 0) :]

    def in_groups(
        self,
        groups: Sequence[tuple[str, str]],
        offset: int,
        limit: int,
        after: tuple[int, int, str] | None = None,
        aging_s: int | None = None,
    ) -> Sequence[SelectedRow]:
        """The eligible rows of the ``(definition, group)`` ranges, merged and paged: past
        ``after`` when given (``offset`` is then not applied), else past ``offset`` rows;
        from the first page, with ``aging_s``, from an aged level on (:mod:`~feltdb.storage.aging`).
        """
        if aging_s is not None and after is None and offset <= 0:
            after = aged_start(self._fetch, groups, self.params["now"], aging_s)

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
