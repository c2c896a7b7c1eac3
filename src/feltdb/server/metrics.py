"""``/metrics``: the server's Prometheus counters, and the access log of every request.

Each app has its own :class:`Metrics` (a private ``CollectorRegistry``, never the global
default one), so several apps in one process do not clash and a test's app starts at zero.

What is counted, and where:

- The counters count this server's durable commits: :meth:`Metrics.observe` is subscribed
  to the app's store (``WorkloadStore.observe``), which calls it after each commit with
  the :class:`~feltdb.work.changes.WorkloadChange` (a route's, a maintenance pass's, or
  one ``claim_next`` made on its way). ``feltdb_admissions_total``: work admitted (a
  replay commits nothing, so is not counted); ``feltdb_claims_total``: claims granted
  (``claim`` and ``claim_next``); ``feltdb_completions_total``: results recorded;
  ``feltdb_failures_total{kind}``: failure reports by the kind the worker gave (one of
  :data:`FAILURE_KIND_LABELS`, any other counted as ``other``);
  ``feltdb_dead_letters_total``: every commit that moved work to ``DEAD_LETTER`` (a
  failure report, a recovery, a deadline, a spent budget); ``feltdb_timeouts_total``:
  work timed out by a passed deadline; ``feltdb_recoveries_total``: expired leases
  recovered.
- ``feltdb_wakeup_hints_total``: wake-up hints this server's long-polls received from the
  other processes of its database (PostgreSQL's ``NOTIFY``, see
  :mod:`feltdb.storage.postgres_wakeups`); 0 on SQLite.
- ``feltdb_request_seconds{method,route,status}``: latency of every request, labelled by
  the route's template (``/v1/workloads/{workload_id}``), never the raw path, so the
  label set stays bounded; a path no route matches is ``route="unmatched"``.

Caveats: counters are this process's (sum them over servers); a report repeated by a
worker (a lost answer) replays its outcome without committing, and is not counted again.

Work by state is a gauge, ``feltdb_workloads{state}``: every tenant's workloads in each
state (every state is listed, 0 when none), read from the store at scrape time by one
``GROUP BY`` over the scheduling index (:meth:`WorkloadStore.count_by_state`), never by
listing rows. Unlike the counters it is the store's, not this process's: every server on
one database answers the same counts (do not sum them). The answer is cached for
:data:`STATE_COUNT_TTL_S` per app (:class:`CachedQuery`), so frequent scrapes (or several
scrapers) cost one query per period, and a count may be that much older than the scrape; a
count that fails is logged and leaves the gauge without samples until the next period. The
ready-work gauges (:class:`ReadyByDefinition`) are read and cached the same way.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Generic, TypeVar

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.exposition import generate_latest
from prometheus_client.registry import Collector
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from feltdb.errors import WorkloadError
from feltdb.records.workload import DEFAULT_RETRY_ON
from feltdb.server.logs import loggable_path
from feltdb.work.changes import Operation, WorkloadChange
from feltdb.work.events import attempt_failed
from feltdb.work.states import WorkloadState
from feltdb.work.store import WorkloadStore

access_log = logging.getLogger("feltdb.access")
log = logging.getLogger(__name__)

FAILURE_KIND_LABELS = DEFAULT_RETRY_ON | {"permanent", "no_handler", "invalid_output"}
"""The ``kind`` label values of ``feltdb_failures_total``: the default retry policy's kinds
and those the worker runtime reports. Workers choose kinds freely, and ``/metrics`` needs
no token, so any other kind is counted as ``other``: a label never shows what a worker
wrote (a secret, a 100 KB string)."""

REQUEST_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
"""Seconds; up to 30 s, the longest long-poll of ``POST /v1/claims``."""

UNMATCHED = "unmatched"

HTTP_METHODS = frozenset(
    {"GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH"}
)
"""The ``method`` label values of ``feltdb_request_seconds``; any other method is ``other``."""

STATE_COUNT_TTL_S = 5.0
"""How long one app reuses a ``feltdb_workloads{state}`` count before querying again."""

K = TypeVar("K")
V = TypeVar("V")


class CachedQuery(Generic[K, V]):
    """A store query behind a gauge, answered at most once per :attr:`ttl_s` (on the
    monotonic :attr:`clock`), whatever the scrape rate.

    Until :meth:`bind` gives it a query it answers nothing (so registering a gauge queries
    nothing). Concurrent scrapes share one query: the lock is held across it. A query that
    fails is logged, and answers nothing until the next period.
    """

    WHAT = "a gauge's query"
    """What the query counts, for the log."""

    def __init__(
        self, ttl_s: float = STATE_COUNT_TTL_S, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.ttl_s = ttl_s
        self.clock = clock
        self._query: Callable[[], dict[K, V]] | None = None
        self._answer: dict[K, V] = {}
        self._answered_at: float | None = None
        self._lock = threading.Lock()

    def bind(self, query: Callable[[], dict[K, V]]) -> None:
        """Ask ``query`` from now on (forgetting any cached answer)."""
        with self._lock:
            self._query, self._answer, self._answered_at = query, {}, None

    def cached(self) -> dict[K, V]:
        """The cached answer, asked again first if it is :attr:`ttl_s` old (empty when it
        could not be read).
        """
        with self._lock:
            now = self.clock()
            fresh = self._answered_at is not None and now - self._answered_at < self.ttl_s
            if self._query is not None and not fresh:
                try:
                    self._answer = self._query()
                except WorkloadError as error:
                    log.warning("counting %s failed: %s", self.WHAT, error)
                    self._answer = {}
                self._answered_at = now
            return dict(self._answer)


class WorkloadsByState(CachedQuery[WorkloadState, int], Collector):
    """The ``feltdb_workloads{state}`` gauge: ``WorkloadStore.count_by_state``, cached."""

    NAME = "feltdb_workloads"
    HELP = "Workloads in each state, every tenant's (the store's count, cached up to 5 s)"
    WHAT = "workloads by state"

    def describe(self) -> Iterable[GaugeMetricFamily]:  # noqa: D102
        return [GaugeMetricFamily(self.NAME, self.HELP, labels=["state"])]

    def collect(self) -> Iterator[GaugeMetricFamily]:  # noqa: D102
        family = GaugeMetricFamily(self.NAME, self.HELP, labels=["state"])
        for state, count in self.cached().items():
            family.add_metric([state.value], count)
        yield family


MAX_DEFINITION_LABELS = 50
"""The most ``definition`` label values of the ready-work gauges: the definitions with the
oldest READY work; the rest are summed as ``other`` (definition ids are requesters' to
choose, so the label set is bounded)."""


class ReadyByDefinition(CachedQuery[str, tuple[int, int]], Collector):
    """``feltdb_ready_workloads{definition}`` and ``feltdb_oldest_ready_age_seconds
    {definition}``: how much work waits READY per definition and for how long (work no
    worker serves shows here), from ``WorkloadStore.ready_by_definition``, cached.
    """

    COUNT = "feltdb_ready_workloads"
    AGE = "feltdb_oldest_ready_age_seconds"
    WHAT = "ready work by definition"

    def __init__(
        self,
        ttl_s: float = STATE_COUNT_TTL_S,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        super().__init__(ttl_s, clock)
        self.wall = wall

    def _families(self) -> tuple[GaugeMetricFamily, GaugeMetricFamily]:
        return (
            GaugeMetricFamily(self.COUNT, "READY workloads per definition", labels=["definition"]),
            GaugeMetricFamily(
                self.AGE,
                "Seconds the oldest READY workload of a definition has waited",
                labels=["definition"],
            ),
        )

    def describe(self) -> Iterable[GaugeMetricFamily]:  # noqa: D102
        return self._families()

    def collect(self) -> Iterator[GaugeMetricFamily]:  # noqa: D102
        counts, ages = self._families()
        ready = list(self.cached().items())  # oldest first
        now = self.wall()
        shown, rest = ready[:MAX_DEFINITION_LABELS], ready[MAX_DEFINITION_LABELS:]
        if rest:
            shown.append(("other", (sum(n for _, (n, _) in rest), rest[0][1][1])))
        for definition, (count, oldest) in shown:
            counts.add_metric([definition], count)
            ages.add_metric([definition], max(0.0, now - oldest))
        yield counts
        yield ages


class WakeupHints(Collector):
    """``feltdb_wakeup_hints_total``: the wake-up hints the database's other processes sent
    that this process received (:attr:`Wakeups.received <feltdb.storage.base.Wakeups>`),
    read at scrape time; 0 without hints (SQLite).
    """

    NAME = "feltdb_wakeup_hints"
    HELP = "Wake-up hints received from the database's other processes (PostgreSQL NOTIFY)"

    def __init__(self) -> None:
        self._read: Callable[[], int] = lambda: 0

    def bind(self, read: Callable[[], int]) -> None:
        """Count what ``read`` answers."""
        self._read = read

    def describe(self) -> Iterable[CounterMetricFamily]:  # noqa: D102
        return [CounterMetricFamily(self.NAME, self.HELP)]

    def collect(self) -> Iterator[CounterMetricFamily]:  # noqa: D102
        yield CounterMetricFamily(self.NAME, self.HELP, value=self._read())


class Metrics:
    """The counters, the latency histogram and the gauges of one app, in a registry of its
    own. The counters move once :meth:`observe` is subscribed to a store's commits, the
    gauges once :meth:`bind` gives them a store (``create_app`` does both).
    """

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.admissions = Counter(
            "feltdb_admissions", "Workloads admitted (created, not replayed)", registry=r
        )
        self.claims = Counter("feltdb_claims", "Claims granted to workers", registry=r)
        self.completions = Counter("feltdb_completions", "Results recorded", registry=r)
        self.failures = Counter(
            "feltdb_failures", "Failure reports by workers, by kind", ["kind"], registry=r
        )
        self.dead_letters = Counter(
            "feltdb_dead_letters", "Workloads moved to DEAD_LETTER by this server", registry=r
        )
        self.recoveries = Counter(
            "feltdb_recoveries",
            "Expired leases recovered (their workers presumed lost)",
            registry=r,
        )
        self.timeouts = Counter(
            "feltdb_timeouts", "Workloads timed out by a passed deadline", registry=r
        )
        self.request_seconds = Histogram(
            "feltdb_request_seconds",
            "HTTP request latency in seconds, by method, route template and status",
            ["method", "route", "status"],
            buckets=REQUEST_BUCKETS,
            registry=r,
        )
        self.workloads = WorkloadsByState()
        r.register(self.workloads)
        self.ready = ReadyByDefinition()
        r.register(self.ready)
        self.wakeup_hints = WakeupHints()
        r.register(self.wakeup_hints)
        self._by_operation = {
            Operation.ADMIT: self.admissions,
            Operation.CLAIM: self.claims,
            Operation.COMPLETE: self.completions,
            Operation.RECOVER: self.recoveries,
            Operation.DEADLINE: self.timeouts,
        }

    def bind(self, store: WorkloadStore) -> None:
        """Read the gauges from ``store`` (at scrape time, cached)."""
        self.workloads.bind(store.count_by_state)
        self.ready.bind(store.ready_by_definition)
        hints = store.db.wakeups
        if hints is not None:
            self.wakeup_hints.bind(lambda: hints.received)

    def observe(self, change: WorkloadChange) -> None:
        """Count one durable commit (a store's commit observer: quick, never calls back)."""
        counter = self._by_operation.get(change.operation)
        if counter is not None:
            counter.inc()
        elif change.operation is Operation.FAIL:
            self.failure(_failure_kind(change))
        if change.entered(WorkloadState.DEAD_LETTER):
            self.dead_letters.inc()

    def failure(self, kind: str) -> None:
        """Count a failure report of ``kind`` (``other`` unless in
        :data:`FAILURE_KIND_LABELS`).
        """
        self.failures.labels(kind=kind if kind in FAILURE_KIND_LABELS else "other").inc()

    def render(self) -> tuple[bytes, str]:
        """The exposition (Prometheus text format) and its content type."""
        return generate_latest(self.registry), CONTENT_TYPE_LATEST


def _failure_kind(change: WorkloadChange) -> str:
    """The kind a failure report gave (its ``FAILED`` event's, :func:`attempt_failed`)."""
    for event in change.events:
        failed = attempt_failed(event)
        if failed is not None:
            return failed.kind
    return "other"


class RequestMetrics:
    """ASGI middleware: times every HTTP request into ``feltdb_request_seconds`` and writes
    one access-log record (logger ``feltdb.access``) with ``method``, ``path``, ``status``
    and ``duration_ms`` as record attributes.

    A plain ASGI middleware (not ``BaseHTTPMiddleware``), so long-polls and disconnects
    pass through untouched. A request that raised before answering is recorded ``500``,
    as the server answers it.
    """

    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:  # noqa: D102
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500

        async def recording(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, recording)
        finally:
            elapsed = time.perf_counter() - started
            method = str(scope.get("method", ""))
            # The method is the client's to choose, so a label holds only the ones HTTP
            # defines (a 200-character verb is "other", never a label value).
            labelled = method if method in HTTP_METHODS else "other"
            self.metrics.request_seconds.labels(
                method=labelled, route=_route_template(scope), status=str(status)
            ).observe(elapsed)
            path = str(scope.get("path", ""))
            duration_ms = round(elapsed * 1000, 3)
            # An idle worker's long-poll answered "no work" every few seconds is not news
            # (a batch claim that found none marks its request so).
            idle = (status == 204 and path == "/v1/claims") or bool(
                scope.get("state", {}).get("idle_poll")
            )
            path = loggable_path(scope)
            access_log.log(
                logging.DEBUG if idle else logging.INFO,
                "%s %s %d %.1f ms",
                method,
                path,
                status,
                duration_ms,
                extra={
                    "method": method,
                    "path": path,
                    "status": status,
                    "duration_ms": duration_ms,
                },
            )


def _route_template(scope: Scope) -> str:
    """The matched route's path template (the router records it in the scope)."""
    route = scope.get("route")
    path = getattr(route, "path_format", None) or getattr(route, "path", None)
    return path if isinstance(path, str) and path else UNMATCHED
