"""The planner's statistics of a store's rows: given once, on a table that never had any.

PostgreSQL plans with the statistics ``ANALYZE`` gathers, which autovacuum takes only once
enough rows changed and a naptime passed. Until then (a new database, its first backlog)
the planner guesses one row for every range, and may serve a claim's walk of the claim
groups from ``rows_by_application``, a read of every row of the application, instead of
one seek of ``rows_ready``. Measured on a new database of 3,000 workloads (EXPLAIN
ANALYZE): the walk's two statements took 3.8 and 1.9 ms, against 0.40 and 0.03 ms once
analyzed; the embedded worker's drain of them ran 1,330/s against 1,482/s. So the rows
are analyzed once, as soon as a table that was never analyzed holds any (PostgreSQL 14
and later mark such a table with ``reltuples = -1``); autovacuum keeps the statistics from
then on.

The one that asks is a claim's selection
(:meth:`StatisticsQueries.statistics_before_selecting`), at most every
:data:`SELECTION_RECHECK_S` until they exist and never after, so a store used as a library,
with no maintenance pass, has them too; the server's maintenance pass asks as well, for the
dashboard's listings and counts may come before any claim. Measured behind 5,000 ready
workloads nobody could claim (``bench/bench_unclaimable.py``, a new database): a claim took
7.0 ms and an idle one 4.2 ms, against 1.3 and 0.4 ms once analyzed (1.2 and 0.1 ms on an
empty store).

SQLite's statements are planned to use their index without statistics (the plan tests in
``tests/unit/storage/test_sqlite.py`` hold them to it), so its statement answers that none
are missing and nothing is run.

:class:`PlannerStatistics` is the part of the :class:`~feltdb.storage.base.Database`
protocol; :class:`StatisticsQueries` implements it over a dialect's named statements, for
:class:`~feltdb.storage.engine.SQLEngine`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping
from typing import ClassVar, Final, LiteralString, Protocol

from feltdb.errors import WorkloadError
from feltdb.storage.dialect import Dialect

__all__ = ["SELECTION_RECHECK_S", "PlannerStatistics", "StatisticsQueries"]

log = logging.getLogger(__name__)

SELECTION_RECHECK_S: Final = 5.0
"""How often, at most, a claim's selection looks whether statistics are still missing (a
catalog read), until they exist: an idle worker's long-polls select every 0.25 s."""


class PlannerStatistics(Protocol):
    """What a claim's selection and the server's maintenance pass ask of a database's
    statistics.
    """

    def refresh_statistics(self) -> bool:
        """Gather the planner's statistics of the rows if they were never gathered and
        there are rows to gather them from; whether it did (not when the database user may
        not: logged, and not tried again). Cheap once they exist (one catalog read per call
        until then, none after).
        """
        ...


class StatisticsQueries:
    """:class:`PlannerStatistics` over a dialect's named statements (a base of
    ``SQLEngine``): ``statistics_missing`` answers whether to run ``gather_statistics``.
    """

    _dialect: Dialect
    _queries: Mapping[str, LiteralString]
    _statistics_known: bool = False
    """Set once the statistics are known to exist: no catalog read after that."""
    _statistics_asked_at: float = float("-inf")
    """When a selection last asked (``time.monotonic()``)."""
    _statistics_asking: ClassVar[threading.Lock] = threading.Lock()
    """Held by the one selection asking: the others go on without waiting for it."""

    def statistics_before_selecting(self) -> None:
        """Before a claim's selection: :meth:`refresh_statistics`, unless a selection asked
        within :data:`SELECTION_RECHECK_S` or is asking now (nothing at all once they are
        known). Never fails the selection: statistics only make its plan better.
        """
        if self._statistics_known:
            return
        now = time.monotonic()
        if now - self._statistics_asked_at < SELECTION_RECHECK_S:
            return
        if not self._statistics_asking.acquire(blocking=False):
            return
        try:
            self._statistics_asked_at = now
            self.refresh_statistics()
        except WorkloadError as error:  # a timeout, a lost connection: asked again later
            log.warning("the planner's statistics were not gathered: %s", error.message)
        finally:
            self._statistics_asking.release()

    def refresh_statistics(self) -> bool:
        """See :meth:`PlannerStatistics.refresh_statistics`."""
        if self._statistics_known:
            return False
        self._dialect.ensure_open()
        [(missing, any_rows)] = self._dialect.read(self._queries["statistics_missing"], {})
        if not missing:
            self._statistics_known = True
            return False
        if not any_rows:
            return False  # nothing to gather from yet: asked again next pass
        gather = self._queries["gather_statistics"]
        self._dialect.transact("gather statistics", lambda session: session.execute(gather, {}))
        self._statistics_known = True  # gathered, or never to be: not asked again
        [(missing, _)] = self._dialect.read(self._queries["statistics_missing"], {})
        if missing:
            # ANALYZE skips, with a warning and no error, a table its user does not own.
            log.warning(
                "the planner's statistics could not be gathered (does the database user "
                "own the tables?): until autovacuum gathers them, claims may read more "
                "than they need"
            )
            return False
        return True
