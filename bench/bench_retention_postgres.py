"""Retention on PostgreSQL 15 with autovacuum on (``bench_retention.py --backend postgres``).

Against the cluster at ``$FELTDB_TEST_PG``, in a database of its own: N finished workloads
and a ready backlog loaded as on SQLite; ``claim_next`` latency before pruning; every
finished workload pruned a pass at a time as on SQLite (500 a pass; a pass returns no space
here), ``pg_stat_user_tables`` of the ``rows`` table (live and dead tuples, autovacuum's
runs) and its size (``pg_total_relation_size``: heap, TOAST and indexes) sampled every
:data:`SAMPLE_EVERY` passes; claims
after pruning; then waiting for autovacuum to have run after the last pass (polled, its
progress sampled), and claims again; then N/10 fresh workloads admitted, to see whether
they take the space the pruned ones left or grow the table.

The cluster must run with autovacuum on, as a production server does: start the
throwaway one with ``FELTDB_PG_SETTINGS=autovacuum=on scripts/with-postgres …``
(``tests/support/pg_cluster.py`` turns it off for the tests' determinism, and takes
settings after its own). The benchmark refuses a server where it is off. Every other
setting is PostgreSQL's default (``autovacuum_naptime`` 1 min, scale factor 0.2,
``autovacuum_vacuum_cost_delay`` 2 ms), recorded with the results.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
from bench_claim_next import load_backlog, time_claims
from bench_retention import load_finished, prune_all, summary

from feltdb import Workload, WorkloadStore
from feltdb.work.pruning import RECLAIM_PAGES

DATABASE = "feltdb_retention_bench"
SETTINGS = (
    "server_version",
    "autovacuum",
    "autovacuum_naptime",
    "autovacuum_vacuum_scale_factor",
    "autovacuum_vacuum_threshold",
    "autovacuum_vacuum_cost_delay",
    "autovacuum_vacuum_cost_limit",
    "maintenance_work_mem",
    "shared_buffers",
    "fsync",
)
SAMPLE_EVERY = 100
"""Passes between samples of the table's statistics while pruning."""
AUTOVACUUM_WAIT_S = 900
"""How long to wait for autovacuum to run after the last pass."""
TABLE = """
SELECT n_live_tup, n_dead_tup, autovacuum_count, autoanalyze_count,
       extract(epoch FROM last_autovacuum), pg_total_relation_size(relid),
       pg_relation_size(relid)
FROM pg_stat_user_tables WHERE relname = 'rows'
"""


def bench_database(url: str) -> tuple[str, dict[str, str]]:
    """A fresh database of the cluster at ``url`` for the benchmark: its URL, and the
    server's settings."""
    with psycopg.connect(url, autocommit=True) as connection:
        settings = {name: connection.execute(f"SHOW {name}").fetchone()[0] for name in SETTINGS}
        if settings["autovacuum"] != "on":
            sys.exit(
                "autovacuum is off on this server: run the benchmark with "
                "FELTDB_PG_SETTINGS=autovacuum=on scripts/with-postgres …"
            )
        connection.execute(f"DROP DATABASE IF EXISTS {DATABASE}")
        connection.execute(f"CREATE DATABASE {DATABASE}")
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path=f"/{DATABASE}")), settings


class Table:
    """Samples of the ``rows`` table's statistics and size, each at seconds since start."""

    def __init__(self, url: str) -> None:
        self.connection = psycopg.connect(url, autocommit=True)
        self.started = time.time()
        self.samples: list[dict[str, Any]] = []

    def sample(self, phase: str, pruned: int) -> dict[str, Any]:
        # The statistics a backend counts reach the view when it reports them (at most
        # once a second, and at the end of its transactions): a sample may lag by that.
        row = self.connection.execute(TABLE).fetchone()
        assert row is not None
        live, dead, vacuums, analyzes, last_vacuum, total, heap = row
        sample = {
            "at_s": round(time.time() - self.started, 1),
            "phase": phase,
            "pruned": pruned,
            "n_live_tup": live,
            "n_dead_tup": dead,
            "autovacuum_count": vacuums,
            "autoanalyze_count": analyzes,
            "last_autovacuum_at_s": None
            if last_vacuum is None
            else round(float(last_vacuum) - self.started, 1),
            "total_mb": round(total / 1e6, 1),
            "heap_mb": round(heap / 1e6, 1),
        }
        self.samples.append(sample)
        return sample

    def every_pass(self, passes: int, pruned: int) -> None:
        """A sample every :data:`SAMPLE_EVERY` prune passes."""
        if passes % SAMPLE_EVERY == 0:
            self.sample("pruning", pruned)

    def database_mb(self) -> float:
        row = self.connection.execute("SELECT pg_database_size(current_database())").fetchone()
        assert row is not None
        return round(row[0] / 1e6, 1)

    def close(self) -> None:
        self.connection.close()


def wait_for_autovacuum(table: Table, since_count: int) -> dict[str, Any]:
    """Poll until an autovacuum of ``rows`` has ended after the last pass, and its dead
    tuples are gone; how long that took (``None``: not within the wait)."""
    started = time.monotonic()
    while time.monotonic() - started < AUTOVACUUM_WAIT_S:
        sample = table.sample("waiting for autovacuum", -1)
        if sample["autovacuum_count"] > since_count and sample["n_dead_tup"] < 1000:
            return {"seconds": round(time.monotonic() - started, 1), "sample": sample}
        time.sleep(5)
    return {"seconds": None, "waited_s": AUTOVACUUM_WAIT_S, "sample": table.samples[-1]}


def measure_postgres(template: Workload, finished: int, ready: int, claims: int) -> dict[str, Any]:
    url, settings = bench_database(os.environ["FELTDB_TEST_PG"])
    table = Table(url)
    try:
        with WorkloadStore.open(url) as store:
            empty = table.sample("empty", 0)
            load_s = load_finished(store, template, finished)
            time.sleep(2)  # the statistics view catches up
            per_workload = (
                table.sample("finished loaded", 0)["total_mb"] - empty["total_mb"]
            ) / finished
            load_backlog(store, ready)
            store.db.refresh_statistics()  # as a server's first maintenance pass would
            loaded = table.sample("loaded", 0)
            before = summary(time_claims(store, claims))
            pruning = prune_all(store, finished, table.every_pass)
            assert store.db.reclaim_space(RECLAIM_PAGES).pages == 0  # autovacuum's work here
            pruned = table.sample("pruned", finished)
            after_prune = summary(time_claims(store, claims))
            vacuumed = wait_for_autovacuum(table, pruned["autovacuum_count"])
            after_vacuum = summary(time_claims(store, claims))
            fresh = finished // 10
            before_fresh = table.sample("before admitting fresh work", finished)
            load_finished(store, template, fresh, prefix="n")
            time.sleep(2)  # the statistics view catches up
            after_fresh = table.sample("after admitting fresh work", finished)
            database_mb = table.database_mb()
    finally:
        table.close()
    grown = after_fresh["total_mb"] - before_fresh["total_mb"]
    return {
        "finished": finished,
        "ready": ready,
        "settings": settings,
        "load_seconds": round(load_s, 1),
        "claim_ms_before": before,
        "claim_ms_after_prune": after_prune,
        "claim_ms_after_autovacuum": after_vacuum,
        "prune": pruning,
        "autovacuum_after_pruning": vacuumed,
        "rows_table_mb": {
            "empty": empty["total_mb"],
            "loaded": loaded["total_mb"],
            "pruned": pruned["total_mb"],
            "after_autovacuum": before_fresh["total_mb"],
            "after_fresh": after_fresh["total_mb"],
        },
        "fresh": {
            "admitted": fresh,
            "their_size_at_load_mb": round(fresh * per_workload, 1),
            "table_grew_mb": round(grown, 1),
        },
        "database_mb_at_end": database_mb,
        "samples": table.samples,
    }
