"""``/metrics``: the server's Prometheus counters, and the access log of every request.

Each app has its own :class:`Metrics` (a private ``CollectorRegistry``, never the global
default one), so several apps in one process do not clash and a test's app starts at zero.

What is counted, and where:

- ``feltdb_admissions_total``, ``feltdb_claims_total``, ``feltdb_completions_total``,
  ``feltdb_failures_total{kind}`` and ``feltdb_dead_letters_total`` count the outcomes of
  this server's store calls, through :class:`MeteredStore` (the store the routes and the
  maintenance loop call): an admission that created work (a replay is not counted), a
  claim granted (``claim`` and ``claim_next`` when it found work), a result recorded, a
  failure report by the worker's ``kind`` (one of :data:`FAILURE_KIND_LABELS`, any
  other counted as ``other``), and work this server moved to
  ``DEAD_LETTER`` by a failure report, a recovery or a timeout.
- ``feltdb_timeouts_total`` and ``feltdb_recoveries_total``: what the maintenance passes
  timed out and recovered.
- ``feltdb_request_seconds{method,route,status}``: latency of every request, labelled by
  the route's template (``/v1/workloads/{workload_id}``), never the raw path, so the
  label set stays bounded; a path no route matches is ``route="unmatched"``.

Caveats: counters are this process's (sum them over servers); a failure report or a
result repeated by a worker replays its outcome in the store without committing, and is
counted again; a workload that ``claim_next`` itself settles (past a deadline, out of
attempts) on its way to a claimable one is not counted.

Work by state is a gauge, ``feltdb_workloads{state}``: every tenant's workloads in each
state (every state is listed, 0 when none), read from the store at scrape time by one
``GROUP BY`` over the scheduling index (:meth:`WorkloadStore.count_by_state`), never by
listing rows. Unlike the counters it is the store's, not this process's: every server on
one database answers the same counts (do not sum them). The answer is cached for
:data:`STATE_COUNT_TTL_S` per app, so frequent scrapes (or several scrapers) cost one query
per period, and a count may be that much older than the scrape; a count that fails is
logged and leaves the gauge without samples until the next period.
"""

from __future__ import annotations

import builtins
import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.exposition import generate_latest
from prometheus_client.registry import Collector
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from feltdb.errors import WorkloadError
from feltdb.work.models import (
    DEFAULT_RETRY_ON,
    CreateWorkload,
    Workload,
    WorkloadClaim,
    WorkloadResult,
)
from feltdb.work.states import WorkloadState
from feltdb.work.store import DEFAULT_LEASE_MS, WorkloadStore

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

StateCounter = Callable[[], dict[WorkloadState, int]]


class WorkloadsByState(Collector):
    """The ``feltdb_workloads{state}`` gauge, counted by the store at most once per
    :attr:`ttl_s` (on the monotonic :attr:`clock`), whatever the scrape rate.

    Registering it queries nothing (:meth:`describe` answers the family without samples);
    until :meth:`bind` gives it a counter, it answers no samples either.
    """

    NAME = "feltdb_workloads"
    HELP = "Workloads in each state, every tenant's (the store's count, cached up to 5 s)"

    def __init__(
        self, ttl_s: float = STATE_COUNT_TTL_S, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.ttl_s = ttl_s
        self.clock = clock
        self._count: StateCounter | None = None
        self._counted: dict[WorkloadState, int] | None = None
        self._counted_at: float | None = None
        self._lock = threading.Lock()

    def bind(self, count: StateCounter) -> None:
        """Count with ``count`` from now on (forgetting any cached answer)."""
        with self._lock:
            self._count = count
            self._counted = None
            self._counted_at = None

    def describe(self) -> Iterable[GaugeMetricFamily]:  # noqa: D102
        return [GaugeMetricFamily(self.NAME, self.HELP, labels=["state"])]

    def collect(self) -> Iterator[GaugeMetricFamily]:  # noqa: D102
        family = GaugeMetricFamily(self.NAME, self.HELP, labels=["state"])
        for state, count in self.counts().items():
            family.add_metric([state.value], count)
        yield family

    def counts(self) -> dict[WorkloadState, int]:
        """The cached count, refreshed first if it is :attr:`ttl_s` old (empty when none
        could be read). Concurrent scrapes share one query: the lock is held across it.
        """
        with self._lock:
            now = self.clock()
            fresh = self._counted_at is not None and now - self._counted_at < self.ttl_s
            if self._count is not None and not fresh:
                try:
                    self._counted = self._count()
                except WorkloadError as error:
                    log.warning("counting workloads by state failed: %s", error)
                    self._counted = None
                self._counted_at = now
            return dict(self._counted or {})


MAX_DEFINITION_LABELS = 50
"""The most ``definition`` label values of the ready-work gauges: the definitions with the
oldest READY work; the rest are summed as ``other`` (definition ids are requesters' to
choose, so the label set is bounded)."""

ReadyCounter = Callable[[], dict[str, tuple[int, int]]]


class ReadyByDefinition(Collector):
    """``feltdb_ready_workloads{definition}`` and ``feltdb_oldest_ready_age_seconds
    {definition}``: how much work waits READY per definition and for how long (work no
    worker serves shows here), from one index query cached for :attr:`ttl_s`.
    """

    COUNT = "feltdb_ready_workloads"
    AGE = "feltdb_oldest_ready_age_seconds"

    def __init__(
        self,
        ttl_s: float = STATE_COUNT_TTL_S,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self.ttl_s, self.clock, self.wall = ttl_s, clock, wall
        self._count: ReadyCounter | None = None
        self._counted: dict[str, tuple[int, int]] = {}
        self._counted_at: float | None = None
        self._lock = threading.Lock()

    def bind(self, count: ReadyCounter) -> None:
        """Count with ``count`` (``WorkloadStore.ready_by_definition``) from now on."""
        with self._lock:
            self._count, self._counted, self._counted_at = count, {}, None

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
        ready = list(self.ready().items())  # oldest first
        now = self.wall()
        shown, rest = ready[:MAX_DEFINITION_LABELS], ready[MAX_DEFINITION_LABELS:]
        if rest:
            shown.append(("other", (sum(n for _, (n, _) in rest), rest[0][1][1])))
        for definition, (count, oldest) in shown:
            counts.add_metric([definition], count)
            ages.add_metric([definition], max(0.0, now - oldest))
        yield counts
        yield ages

    def ready(self) -> dict[str, tuple[int, int]]:
        """The cached answer, refreshed first when :attr:`ttl_s` old (empty on failure)."""
        with self._lock:
            now = self.clock()
            fresh = self._counted_at is not None and now - self._counted_at < self.ttl_s
            if self._count is not None and not fresh:
                try:
                    self._counted = self._count()
                except WorkloadError as error:
                    log.warning("counting ready work by definition failed: %s", error)
                    self._counted = {}
                self._counted_at = now
            return dict(self._counted)


class Metrics:
    """The counters, the latency histogram and the work-by-state gauge of one app, in a
    registry of its own (the gauge counts once a :class:`MeteredStore` binds it).
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
            "feltdb_recoveries", "Expired leases recovered by maintenance", registry=r
        )
        self.timeouts = Counter(
            "feltdb_timeouts", "Workloads timed out by maintenance (deadlines)", registry=r
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

    def failure(self, kind: str) -> None:
        """Count a failure report of ``kind`` (``other`` unless in
        :data:`FAILURE_KIND_LABELS`).
        """
        self.failures.labels(kind=kind if kind in FAILURE_KIND_LABELS else "other").inc()

    def render(self) -> tuple[bytes, str]:
        """The exposition (Prometheus text format) and its content type."""
        return generate_latest(self.registry), CONTENT_TYPE_LATEST


class MeteredStore(WorkloadStore):
    """The app's store, counting outcomes into :class:`Metrics`.

    A second :class:`WorkloadStore` over the same database (it holds no state of its own
    beyond the database), so every method the routes call is the store's own; the counted
    ones call it and then count what it answered. It never closes the database.
    """

    def __init__(self, store: WorkloadStore, metrics: Metrics) -> None:
        """Act on ``store``'s database, counting into ``metrics``."""
        super().__init__(store.db, max_lease_ms=store.max_lease_ms)
        self.metrics = metrics
        metrics.workloads.bind(self.count_by_state)
        metrics.ready.bind(self.ready_by_definition)

    def admit(self, request: CreateWorkload) -> tuple[Workload, bool]:  # noqa: D102
        workload, created = super().admit(request)
        if created:
            self.metrics.admissions.inc()
        return workload, created

    def claim(  # noqa: D102
        self,
        workload_id: str,
        worker: str,
        capabilities: Iterable[str],
        now: int | None = None,
        lease_ms: int = DEFAULT_LEASE_MS,
    ) -> WorkloadClaim:
        granted = super().claim(workload_id, worker, capabilities, now, lease_ms)
        self.metrics.claims.inc()
        return granted

    def claim_next(  # noqa: D102
        self,
        tenant_id: str,
        application_id: str,
        worker: str,
        capabilities: Iterable[str],
        now: int | None = None,
        lease_ms: int = DEFAULT_LEASE_MS,
        *,
        definitions: Iterable[str] | None = None,
        environments: Iterable[str] | None = None,
    ) -> WorkloadClaim | None:
        granted = super().claim_next(
            tenant_id,
            application_id,
            worker,
            capabilities,
            now,
            lease_ms,
            definitions=definitions,
            environments=environments,
        )
        if granted is not None:
            self.metrics.claims.inc()
        return granted

    def complete(  # noqa: D102
        self,
        workload_id: str,
        claim_id: str,
        worker: str,
        fencing_token: int,
        result_id: str,
        output: Any,
        artifacts: Iterable[str] = (),
        schema_version: int = 1,
        now: int | None = None,
    ) -> WorkloadResult:
        result = super().complete(
            workload_id,
            claim_id,
            worker,
            fencing_token,
            result_id,
            output,
            artifacts,
            schema_version,
            now,
        )
        self.metrics.completions.inc()
        return result

    def fail(  # noqa: D102
        self,
        workload_id: str,
        claim_id: str,
        worker: str,
        fencing_token: int,
        kind: str,
        error: str,
        now: int | None = None,
        effect: str | None = None,
    ) -> WorkloadState:
        state = super().fail(workload_id, claim_id, worker, fencing_token, kind, error, now, effect)
        self.metrics.failure(kind)
        if state == WorkloadState.DEAD_LETTER:
            self.metrics.dead_letters.inc()
        return state

    def enforce_deadlines(self, now: int | None = None) -> builtins.list[str]:  # noqa: D102
        timed_out = super().enforce_deadlines(now)
        self.metrics.timeouts.inc(len(timed_out))
        self._count_dead_letters(timed_out)
        return timed_out

    def recover_expired(self, now: int | None = None) -> builtins.list[str]:  # noqa: D102
        recovered = super().recover_expired(now)
        self.metrics.recoveries.inc(len(recovered))
        self._count_dead_letters(recovered)
        return recovered

    def _count_dead_letters(self, workload_ids: builtins.list[str]) -> None:
        # The sweeps answer ids only: one keyed read per workload acted on (none on a pass
        # that did nothing) tells which of them the policy dead-lettered.
        for workload_id in workload_ids:
            try:
                if self.get(workload_id).state == WorkloadState.DEAD_LETTER:
                    self.metrics.dead_letters.inc()
            except WorkloadError:
                continue  # unreadable now: not counted rather than failing the pass


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
            # An idle worker's long-poll answered "no work" every few seconds is not news.
            idle = status == 204 and path == "/v1/claims"
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
