"""The server's maintenance loop: deadlines, expired leases and schedules, on a timer.

A pass is :meth:`Maintenance.run_once`, which only calls the store's own
``enforce_deadlines``, ``recover_expired``, ``schedules.run_due`` and ``seal_audit`` (and,
given a retention policy, ``retention.prune``); the timer around it adds nothing but
scheduling. Every decision is the store's and each commit is guarded, so several servers on
one store may all run the loop: a workload another writer settled first is left to it (two
sealers seal the same links, two schedulers admit an occurrence once, and two pruners
delete each workload once).

What a pass commits reaches whoever observes the store (``WorkloadStore.observe``): the
server's metrics count its timeouts and recoveries, and its long-polls wake for recovered
work, without the loop telling anyone.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from feltdb.errors import ErrorCode, WorkloadError
from feltdb.server.ui import sessions
from feltdb.work.pruning import PruneReport
from feltdb.work.retention import RetentionPolicy
from feltdb.work.store import WorkloadStore

log = logging.getLogger("feltdb.server.maintenance")

SEAL_PER_PASS = 10_000
"""The most log entries one maintenance pass seals into the audit chain."""
PRUNE_EVERY_S = 60
"""Seconds between prune passes, unless the last one stopped at its bound, or left a bound's
worth of free pages to return (then the next pass prunes again: a backlog is drained, and a
file shrunk, a bounded pass a second)."""
RETENTION_ACTOR = "system:retention"
"""Who the maintenance loop's prune commits name as their actor."""


class Maintenance:
    """Runs the maintenance pass every ``interval_s`` seconds on a daemon thread."""

    def __init__(
        self,
        store: WorkloadStore,
        clock: Callable[[], int],
        retention: RetentionPolicy | None = None,
    ) -> None:
        """Maintain ``store``, reading the time from ``clock`` (unix seconds); with a
        ``retention`` policy, prune finished work past its age (:meth:`prune_if_due`).
        """
        self.store = store
        self.clock = clock
        self.retention = retention
        self._next_prune: int | None = None
        """When the next prune pass is due (``None``: at the first pass)."""
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def run_once(self, now: int) -> tuple[list[str], list[str]]:
        """One pass at ``now``: time out work past its deadlines, recover work whose lease
        expired, admit the schedules' due occurrences (at most
        :data:`~feltdb.work.scheduler.MAX_PER_PASS`, the rest next pass), then seal the
        log's final entries into the audit chain (at most :data:`SEAL_PER_PASS`, so that
        a long unsealed log is sealed over several passes),
        delete the dashboard's sessions and sign-in tickets past their end, give the
        planner statistics of a store that never had any (:mod:`feltdb.storage.statistics`),
        and prune finished work past its age when retention is on (:meth:`prune_if_due`).
        Returns ``(timed_out_ids, recovered_ids)``.

        Raises:
            WorkloadError: ``WORKLOAD_STORAGE_FAILURE`` when the store cannot be read or
                written (the timer logs it and tries again next interval).
        """
        timed_out = self.store.enforce_deadlines(now)
        recovered = self.store.recover_expired(now)
        self.store.schedules.run_due(now)
        self.store.audit.seal(SEAL_PER_PASS)
        sessions.prune_expired(self.store.db, now)
        self.store.db.refresh_statistics()
        self.prune_if_due(now)
        return timed_out, recovered

    def prune_if_due(self, now: int) -> PruneReport | None:
        """With a retention policy, one bounded prune pass
        (:meth:`~feltdb.work.pruning.Retention.prune`, :data:`RETENTION_ACTOR`) when one is
        due: at the first maintenance pass, :data:`PRUNE_EVERY_S` after the last, or at once
        after one that stopped at its bound or left free pages to return
        (:attr:`~feltdb.work.pruning.PruneReport.again`). Its report (``None``: none ran).

        Raises:
            WorkloadError: ``WORKLOAD_STORAGE_FAILURE``.
        """
        if self.retention is None or (self._next_prune is not None and now < self._next_prune):
            return None
        report = self.store.retention.prune(RETENTION_ACTOR, self.retention, now)
        self._next_prune = now if report.again else now + PRUNE_EVERY_S
        if report.pruned or report.reclaimed_pages:
            log.info(
                "retention pruned %d finished workloads, returned %.1f MB to the file system",
                len(report.pruned), report.reclaimed_bytes / 1e6,
            )  # fmt: skip
        return report

    def start(self, interval_s: float = 1.0) -> None:
        """Start the timer thread (once; a second call does nothing)."""
        if interval_s <= 0:
            raise ValueError("interval_s must be positive")
        if self._thread is not None:
            return
        self._stop.clear()
        self._thread = threading.Thread(
            target=self._loop, args=(interval_s,), name="feltdb-maintenance", daemon=True
        )
        self._thread.start()

    def stop(self, timeout_s: float = 10.0) -> None:
        """Stop the timer and wait up to ``timeout_s`` for a pass in progress to end."""
        self._stop.set()
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.join(timeout_s)

    def _loop(self, interval_s: float) -> None:
        # The interval is measured on the monotonic clock so that a wall-clock jump neither
        # stalls the loop nor runs it in a burst; the pass itself uses the wall clock, since
        # deadlines and leases are committed as unix seconds.
        next_at = time.monotonic()
        outage: str | None = None
        while not self._stop.is_set():
            outage = self._timed_pass(outage)
            next_at += interval_s
            delay = next_at - time.monotonic()
            if delay < 0:  # a pass overran: start the next from now rather than catch up
                next_at, delay = time.monotonic(), 0.0
            self._stop.wait(delay)

    def _timed_pass(self, outage: str | None) -> str | None:
        """Run one pass, and log how it went; returns the store's failure while it lasts
        (``outage``: the one before this pass). A failing store is an outage, not a bug:
        it is said when it starts and whenever its cause changes, not every interval, its
        traceback only at DEBUG; and once when it ends. Any other error is logged with its
        traceback.
        """
        try:
            self.run_once(self.clock())
        except WorkloadError as error:
            if error.code != ErrorCode.WORKLOAD_STORAGE_FAILURE:
                log.exception("maintenance pass failed; retrying next interval")
                return outage
            log.debug("maintenance pass failed", exc_info=True)
            if str(error) != outage:
                log.warning("maintenance paused: %s; retrying every interval", error)
            return str(error)
        except Exception:
            log.exception("maintenance pass failed; retrying next interval")
            return outage
        if outage is not None:
            log.info("maintenance resumed: the store answers again")
        return None
