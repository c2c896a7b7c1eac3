"""What an application's overview shows: how much work it has in each state, per
definition, and how much of it completed or failed in each recent minute.

Both are read at a bounded cost, whatever the size of the store:

- :func:`summarize` is one ``GROUP BY`` over one index range of the application
  (:meth:`~feltdb.storage.base.Database.count_in_application`) for a reader who sees the
  whole application or some of its definitions. The index does not hold the environment,
  so for a reader narrowed to environments it reads the application's work a page at a
  time, at most :data:`MAX_COUNTED` workloads (seen or not), and says when it stopped short.
- :func:`recent` reads the newest :data:`THROUGHPUT_SCAN` log entries at most (the
  database extracts the audit records' fields), and says how far back that reached when it
  did not cover the whole window.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from feltdb.auth.scope import Scope
from feltdb.records.workload import DURABLE_WORK_COLLECTION
from feltdb.storage.base import Database
from feltdb.work import inputs
from feltdb.work.changes import Operation
from feltdb.work.cursors import cursor_of
from feltdb.work.inputs import Cursor
from feltdb.work.rows import workload_of
from feltdb.work.states import WorkloadState

MAX_COUNTED = 10_000
"""The most workloads :func:`summarize` reads for a reader narrowed to environments."""
COUNTED_PAGE = 500
"""Workloads read per page when counting by reading."""
THROUGHPUT_SCAN = 20_000
"""The most log entries :func:`throughput` reads."""
DEAD = WorkloadState.DEAD_LETTER.value
COMPLETIONS = frozenset({Operation.COMPLETE.value})
"""The operations (the audit record's ``operation``) counted as completions: a worker's
reported result."""
FAILURES = frozenset(
    {Operation.FAIL.value, Operation.DEADLINE.value, Operation.RECOVER.value,
     Operation.EXHAUSTED.value}
)  # fmt: skip
"""The operations counted as failures: a reported failure, a passed deadline, a lease that
expired (its worker presumed lost) and ready work dead-lettered out of attempts."""


@dataclass(frozen=True, slots=True)
class DefinitionCounts:
    """One definition's work: how much is in each state, and since when the oldest READY
    work has waited (``None``: none is READY).
    """

    definition_id: str
    by_state: dict[WorkloadState, int]
    oldest_ready_at: int | None

    @property
    def total(self) -> int:
        """All of the definition's work."""
        return sum(self.by_state.values())

    @property
    def ready(self) -> int:
        """The definition's work that is READY."""
        return self.by_state.get(WorkloadState.READY, 0)


@dataclass(frozen=True, slots=True)
class Summary:
    """An application's work per definition (by id), and whether every workload was
    counted (``False``: counting stopped at :data:`MAX_COUNTED`, so these are lower bounds).
    """

    definitions: list[DefinitionCounts]
    complete: bool = True

    def total(self, state: WorkloadState) -> int:
        """The application's work in ``state``, every definition's."""
        return sum(counts.by_state.get(state, 0) for counts in self.definitions)


def summarize(
    db: Database, tenant_id: str, application_id: str, scope: Scope | None = None
) -> Summary:
    """The work of ``tenant_id``'s ``application_id`` that ``scope`` sees (``None``: all),
    per definition.

    Raises:
        WorkloadError: ``WORKLOAD_INVALID``; ``WORKLOAD_STORAGE_FAILURE``.
    """
    tenant_id = inputs.identifier(tenant_id, "tenant_id")
    application_id = inputs.identifier(application_id, "application_id")
    if scope is not None and scope.environments:
        return _counted_by_reading(db, tenant_id, application_id, scope)
    counted = db.count_in_application(DURABLE_WORK_COLLECTION, tenant_id, application_id)
    grouped: dict[str, dict[WorkloadState, int]] = {}
    oldest: dict[str, int] = {}
    for (state, definition), (count, created_at) in counted.items():
        if scope is not None and not scope.admits_definition(definition):
            continue
        grouped.setdefault(definition, {})[WorkloadState(state)] = count
        if state == WorkloadState.READY.value:
            oldest[definition] = created_at
    return Summary([
        DefinitionCounts(definition, grouped[definition], oldest.get(definition))
        for definition in sorted(grouped)
    ])  # fmt: skip


def _counted_by_reading(db: Database, tenant_id: str, application_id: str, scope: Scope) -> Summary:
    """:class:`Summary` of the work ``scope`` sees, read a page at a time in the list's
    order: at most :data:`MAX_COUNTED` workloads read, seen or not (so a reader who sees
    little of a large application costs no more than one who sees all of it).
    """
    counts: dict[str, Counter[WorkloadState]] = {}
    oldest: dict[str, int] = {}
    read = 0
    after: Cursor | None = None
    while read < MAX_COUNTED:
        rows = db.page_rows(
            DURABLE_WORK_COLLECTION, tenant_id, application_id, None, after,
            limit=min(COUNTED_PAGE, MAX_COUNTED - read),
        )  # fmt: skip
        if not rows:
            return Summary(_definitions(counts, oldest))
        read += len(rows)
        for workload in map(workload_of, rows):
            after = cursor_of(workload)
            if not scope.admits(
                workload.tenant_id, workload.application_id, workload.environment,
                workload.definition_id,
            ):  # fmt: skip
                continue
            definition = workload.definition_id
            counts.setdefault(definition, Counter())[workload.state] += 1
            if workload.state is WorkloadState.READY:
                at = workload.created_at
                oldest[definition] = min(oldest.get(definition, at), at)
    more = bool(
        db.page_rows(DURABLE_WORK_COLLECTION, tenant_id, application_id, None, after, limit=1)
    )
    return Summary(_definitions(counts, oldest), complete=not more)


def _definitions(
    counts: dict[str, Counter[WorkloadState]], oldest: dict[str, int]
) -> list[DefinitionCounts]:
    return [
        DefinitionCounts(definition, dict(counts[definition]), oldest.get(definition))
        for definition in sorted(counts)
    ]


@dataclass(frozen=True, slots=True)
class Minute:
    """One minute's completions and failures (``start``: its first unix second)."""

    start: int
    completions: int = 0
    failures: int = 0


@dataclass(frozen=True, slots=True)
class Throughput:
    """Completions and failures per minute, oldest minute first, and the first second the
    log read reached back to (``covered_since``: the window's start, or later when the
    read stopped at :data:`THROUGHPUT_SCAN` entries).
    """

    minutes: list[Minute] = field(default_factory=list)
    covered_since: int = 0

    @property
    def completions(self) -> int:
        """Completions in the whole window."""
        return sum(minute.completions for minute in self.minutes)

    @property
    def failures(self) -> int:
        """Failures in the whole window."""
        return sum(minute.failures for minute in self.minutes)

    @property
    def peak(self) -> int:
        """The most completions or failures in any one minute (at least 1, a chart's scale)."""
        return max([1, *(max(m.completions, m.failures) for m in self.minutes)])


@dataclass(frozen=True, slots=True)
class Recent:
    """What an application's newest log entries say: completions and failures per minute,
    and the workloads dead-lettered, newest first (each once; some may have been retried
    since).
    """

    throughput: Throughput
    dead_lettered: list[str] = field(default_factory=list)


def recent(
    db: Database,
    tenant_id: str,
    application_id: str,
    now: int,
    *,
    minutes: int = 60,
    scan: int = THROUGHPUT_SCAN,
) -> Recent:
    """``tenant_id``'s ``application_id``'s completions and failures (:data:`COMPLETIONS`,
    :data:`FAILURES`) in each of the ``minutes`` whole minutes up to ``now``, and the work
    it dead-lettered in them, from the audit records of the newest ``scan`` log entries
    (:meth:`~feltdb.storage.base.Database.recent_operations`).

    Raises:
        WorkloadError: ``WORKLOAD_INVALID``; ``WORKLOAD_STORAGE_FAILURE``.
    """
    tenant_id = inputs.identifier(tenant_id, "tenant_id")
    application_id = inputs.identifier(application_id, "application_id")
    minutes = inputs.integer(minutes, "minutes", 1)
    last = now - now % 60
    since = last - (minutes - 1) * 60
    entries, floor = db.recent_operations(
        tenant_id, application_id, since, inputs.integer(scan, "scan", 1)
    )
    done: Counter[int] = Counter()
    failed: Counter[int] = Counter()
    for entry in entries:
        minute = int(entry.committed_at) - int(entry.committed_at) % 60
        if entry.operation in COMPLETIONS:
            done[minute] += 1
        elif entry.operation in FAILURES:
            failed[minute] += 1
    newest_first = sorted(entries, key=lambda entry: entry.committed_at, reverse=True)
    dead = [e.work_id for e in newest_first if e.state == DEAD and e.work_id is not None]
    # The read stopped short of the window when its oldest entry is inside it.
    covered = since if floor is None or floor < since else int(floor)
    minutes_counted = [
        Minute(start, done[start], failed[start]) for start in range(since, last + 1, 60)
    ]
    return Recent(Throughput(minutes_counted, covered), list(dict.fromkeys(dead)))
