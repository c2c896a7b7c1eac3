"""Claim partitions: ready rows grouped by what a claim filters on, one index range each.

A row the caller marks claimable carries a *claim group* in its :class:`RowIndex`
(``claim_group``): an opaque label the caller derives from the row (the work layer: a
digest of the workload's environment and capability set). The backend keeps such rows in
one partial index, ordered by ``(tenant, application, definition, claim group)`` and then
in :meth:`~feltdb.storage.base.Database.list_rows`'s order, so every distinct
``(definition, group)`` of an application is one index range.

A selection by partitions (:meth:`~feltdb.storage.base.Database.commit_selected_many`'s
``partitions``) first walks the distinct groups, one index seek each, and asks
:attr:`ClaimPartitions.accepts` about each; then it reads only the accepted groups' ranges.
So ready work that the caller can never take (a capability it does not hold, an
environment outside its grant) costs it one seek per group, however many rows the group
holds, and is never read, decoded or locked.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from feltdb.storage.base import StoredRow
from feltdb.storage.encoding import invalid

GroupSample = Callable[[], "StoredRow | None"]
Group = tuple[str, str]
"""A ``(definition, claim group)`` range."""
"""Reads the first committed row of a group (``None`` if it has gone since)."""


@dataclass(frozen=True, slots=True)
class ClaimPartitions:
    """Which partitions of claimable rows a selection reads.

    ``definitions`` (``None``: every definition) names the definitions whose groups are
    walked; ``accepts(definition, group, sample)`` answers whether a group's range is read
    at all. It may call ``sample`` to read one row of the group (a group label it cannot
    interpret alone); it runs outside the write transaction, so what it sees is a hint: the
    choice made on the selected rows still decides.
    """

    accepts: Callable[[str, str, GroupSample], bool]
    definitions: Collection[str] | None = None
    after: tuple[int, int, str] | None = None
    """Read only the rows past this ``(priority, created_at, key)`` in claim order (a
    claim's next page, found by two seeks a range, never by reading past the rows before
    it); ``None``: from each range's start, paged by the selection's ``offset``."""
    turns: Callable[[Sequence[Group]], Sequence[Sequence[Group]]] | None = None
    """The accepted groups split into *turns*, in the order they take them (``None``, or
    one turn: the groups' rows merged in claim order). With several, the selection takes
    one row of each turn's merged rows in turn, round robin, skipping a turn that has no
    more (a claim fair to several keys: :func:`~feltdb.storage.selection.in_turns`); it is
    then paged by ``offset`` alone, ``after`` unused."""
    aging_s: int | None = None
    """With a period, the first page of each range of groups read (a turn's, or all of
    them merged) starts at a priority level whose oldest row has waited long enough to go
    first (:mod:`~feltdb.storage.aging`); ``None``: claim order."""


GROUPS_A_READ = 128
"""The most claim groups one statement of the walk finds (each one index seek)."""
MAX_GROUPS_WALKED = 4096
"""The most index seeks one selection's walk makes (one per definition with ready work, one
per group, one to find where each ends). A walk that would need more is abandoned, and that
selection reads the application's ready rows in claim order instead, paged, as a selection
by state does (:func:`accepted_groups` answers ``None``): slower past that many groups, but
it never leaves claimable work unread."""


NamedRead = Callable[[str, Mapping[str, Any]], list[Any]]
"""Runs a dialect's named statement as a read of its own and answers the fetched rows."""


def accepted_groups(
    read: NamedRead,
    sample: Callable[[str], StoredRow | None],
    scope: Mapping[str, Any],
    partitions: ClaimPartitions,
) -> list[tuple[str, str]] | None:
    """The ``(definition, group)`` ranges of one tenant's application (``scope``: its
    ``collection``, ``tenant_id`` and ``application_id``) that ``partitions`` accepts, in
    index order; ``None`` when that takes more than :data:`MAX_GROUPS_WALKED` seeks. Each
    definition with claimable rows (unless ``partitions`` names them) is found by one seek
    (``next_claim_definition``), and each of its groups by one more, up to
    :data:`GROUPS_A_READ` in one statement (``claim_groups_after``).
    ``sample(key)`` reads a group's first row by key.
    """
    accepted: list[tuple[str, str]] = []
    seeks = 0

    def seek(name: str, params: Mapping[str, Any]) -> list[Any]:
        nonlocal seeks
        seeks += 1
        if seeks > MAX_GROUPS_WALKED:
            raise _TooMany
        return read(name, {**scope, **params})

    try:
        for definition in _definitions(seek, partitions.definitions):
            group = ""
            while True:
                # One statement finds the next groups, a seek each: one round trip.
                ranged = {"definition": definition, "claim_group": group}
                found = seek("claim_groups_after", {**ranged, "limit": GROUPS_A_READ})
                seeks += max(len(found) - 1, 0)
                if seeks > MAX_GROUPS_WALKED:
                    raise _TooMany
                for _, group, key in sorted(found, key=lambda each: each[1]):
                    if partitions.accepts(definition, group, functools.partial(sample, key)):
                        accepted.append((definition, group))
                if len(found) < GROUPS_A_READ:
                    break
    except _TooMany:
        return None
    return accepted


class _TooMany(Exception):
    """The walk needs more than :data:`MAX_GROUPS_WALKED` seeks."""


def _definitions(seek: NamedRead, named: Collection[str] | None) -> Iterator[str]:
    """The definitions whose groups are walked: ``named`` in order, or, when ``None``, each
    definition that has claimable rows, one seek each.
    """
    if named is not None:
        if isinstance(named, str):
            raise invalid("definitions must be a collection of definition ids, not one string")
        yield from sorted(set(named))
        return
    definition = ""
    while found := seek("next_claim_definition", {"definition": definition}):
        definition = found[0][0]
        yield definition
