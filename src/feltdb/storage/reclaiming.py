"""Space given back after deletions: the free pages of a SQLite file returned to the file
system, a bounded number at a time (retention calls it after each prune pass:
:mod:`feltdb.work.pruning`).

A SQLite file keeps the pages its deleted rows held on a free list, and later writes reuse
them; the file shrinks only if it was made ``auto_vacuum = INCREMENTAL`` (every store file
this release creates is: :func:`~feltdb.storage.sqlite_file.open_schema`) and
``PRAGMA incremental_vacuum`` is run. That statement moves the file's last used pages into
free ones and cuts the file after them, all in one write transaction: unbounded, it holds
the write lock until the whole free list is gone (437 s for 4.4 GB, measured), so here it
is run a page a step, at most ``max_pages`` steps in one transaction. (One step a page is
also how the driver runs it: ``sqlite3``'s ``execute`` steps a statement once.) A file made
without it (by an earlier release) is left as it is: converting one needs a ``VACUUM``
of the whole file, an operator's one-off step (docs/reliability.md, "Space after pruning").

PostgreSQL has nothing to do here: autovacuum makes the space of deleted rows reusable, and
the dialect names no statement for it, so :meth:`SpaceReclaiming.reclaim_space` answers
nothing returned without touching the database.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final, LiteralString, Protocol

from feltdb.errors import ErrorCode, WorkloadError
from feltdb.storage.dialect import Dialect, Session

__all__ = ["MAX_RECLAIM_PAGES", "ReclaimQueries", "SpaceReclaiming", "SpaceReturned"]

MAX_RECLAIM_PAGES: Final = 100_000
"""The most pages one call returns (400 MB of 4 KB pages): a bound on one write transaction."""


@dataclass(frozen=True, slots=True)
class SpaceReturned:
    """What one call gave back to the file system."""

    pages: int
    """How many pages the file lost (its page count before, less after)."""
    bytes: int
    """``pages`` times the file's page size."""
    left: int
    """Free pages still to return (0 where none can be: see :class:`SpaceReclaiming`)."""


NOTHING: Final = SpaceReturned(0, 0, 0)


class SpaceReclaiming(Protocol):
    """What a database does with the space its deleted rows held."""

    def reclaim_space(self, max_pages: int) -> SpaceReturned:
        """Return at most ``max_pages`` of the database's free pages to the file system
        (with the pages of the file's page map that served them, one in about 800), in one
        write transaction taken as every write takes it; what was returned. Nothing, without
        taking the write lock, where there is nothing to return: no free page, a file not
        made ``auto_vacuum = INCREMENTAL``, or a backend whose own vacuum does it
        (PostgreSQL).

        Raises:
            WorkloadError: ``WORKLOAD_INVALID`` for ``max_pages`` outside 0 to
                :data:`MAX_RECLAIM_PAGES`; ``WORKLOAD_STORAGE_FAILURE``.
        """
        ...


class ReclaimQueries:
    """:class:`SpaceReclaiming` over a dialect's statements ``space_reclaimable`` and
    ``reclaim_page``, or nothing where it names none (a base of ``SQLEngine``).
    """

    _dialect: Dialect
    _queries: Mapping[str, LiteralString]

    def reclaim_space(self, max_pages: int) -> SpaceReturned:
        """See :meth:`SpaceReclaiming.reclaim_space`."""
        if not isinstance(max_pages, int) or not 0 <= max_pages <= MAX_RECLAIM_PAGES:
            raise WorkloadError(
                ErrorCode.WORKLOAD_INVALID,
                f"max_pages must be an integer from 0 to {MAX_RECLAIM_PAGES}, not {max_pages!r}",
            )
        self._dialect.ensure_open()
        measure = self._queries.get("space_reclaimable")
        if measure is None or max_pages == 0:
            return NOTHING
        # Read first, off the write lock: most passes find nothing to return.
        [(incremental, free, _, _)] = self._dialect.read(measure, {})
        if not incremental or not free:
            return NOTHING
        step = self._queries["reclaim_page"]

        def reclaim(session: Session) -> SpaceReturned:
            [(_, free, before, page_size)] = session.execute(measure, {}).fetchall()
            for _ in range(min(max_pages, free)):
                session.execute(step, {}).fetchall()
            [(_, left, after, _)] = session.execute(measure, {}).fetchall()
            return SpaceReturned(before - after, (before - after) * page_size, left)

        return self._dialect.transact("reclaim space", reclaim)
