"""Choosing the work ``claim_next`` claims, inside the transaction that selected it.

The store asks the database to select a batch of ready candidates and hold them
(``Database.commit_selected``); :class:`CandidateChoice` looks through them for the first
this worker may run and plans its commit, or settles one found past a deadline or out of
attempts as ``claim`` would. It runs inside the selecting transaction, so the rows it sees
are the rows it commits against.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from feltdb.errors import WorkloadError
from feltdb.records.workload import (
    DURABLE_WORK_COLLECTION,
    Workload,
    WorkloadClaim,
)
from feltdb.storage.base import Database, PlannedCommit, RowReader, StoredRow
from feltdb.storage.partitions import ClaimPartitions, Group, GroupSample
from feltdb.storage.selecting import SetAside
from feltdb.work import lifecycle, recovery
from feltdb.work.changes import Operation
from feltdb.work.claim_aging import aging_period
from feltdb.work.concurrency import (
    MAX_SLOTS_PER_TRANSACTION,
    SATURATION,
    SlotRows,
    at_limit,
    slot_key,
    take_slot,
)
from feltdb.work.deadlines import deadline_breach
from feltdb.work.eligibility import DependenciesRead, read_dependencies
from feltdb.work.fairness import ROTATION, in_turns
from feltdb.work.partitions import (
    group_accepted,
    group_needs,
    keyed,
)
from feltdb.work.rate_limits import RATE_HELD, StartHeld, next_start_in, take_start, window_key
from feltdb.work.rows import (
    MUTATED,
    LoadedWorkload,
    dependency_row,
    holding,
    planned_commit,
    workload_of,
)
from feltdb.work.scheduling import AWAITED_STATES
from feltdb.work.states import WorkloadState

log = logging.getLogger("feltdb.store")


@dataclass(slots=True)
class CandidateChoice:
    """What ``claim_next`` and ``claim_many`` ask of each batch of candidates, inside the
    transaction that selected them, and what they chose: up to ``wanted`` claims (each
    also started when ``start``), and the candidates settled on the way.
    """

    worker: str
    held: frozenset[str]
    lease_ms: int
    now: int
    definitions: frozenset[str] | None
    environments: frozenset[str] | None
    wanted: int = 1
    start: bool = False
    guard: Callable[[RowReader], None] | None = None
    """Checked first, inside the transaction that claims (a grant's revocation or expiry,
    :func:`~feltdb.work.revocations.grant_in_force`): raising, it claims nothing."""
    examined: int = 0
    aside: int = 0
    """Of the candidates examined, how many were set aside (they left the selection)."""
    chosen: list[tuple[LoadedWorkload, Operation, WorkloadClaim | None, PlannedCommit]] = field(
        default_factory=list
    )
    """Each candidate chosen: as decided on its read, what was done, the claim granted (if
    one was), and its commit."""
    last: tuple[int, int, str] | None = None
    """Where the last candidate examined stands in claim order: (priority, created_at, id)."""
    after: tuple[int, int, str] | None = None
    """Where the next batch starts: past this position (``None``: from the start)."""
    dependency_rows: dict[tuple[str, str, str], StoredRow | None] = field(default_factory=dict)
    """The dependencies' rows read in this batch's transaction: many candidates waiting on
    one workload read it once."""
    slots: SlotRows = field(default_factory=set)
    """The concurrency slots this batch's transaction took (:func:`take_slot`)."""
    deferred: bool = False
    """Whether a candidate was left for the next batch: its key's slot is taken once in
    this one (one a transaction, :func:`take_slot`)."""
    scope: tuple[str, str] = ("", "")
    """The tenant and application claimed from (:meth:`bind`)."""
    saturated: Callable[[str, int], bool] | None = None
    """Whether a concurrency key (a slot row's key) is at a limit, as committed now: asked,
    outside the transaction, of keys a claim lately found full (:data:`SATURATION`)."""
    starts: SlotRows = field(default_factory=set)
    """The rate limits' windows this batch's transaction took a start of (:func:`take_start`)."""
    held_windows: dict[str, int] = field(default_factory=dict)
    """The windows found at their limit in this batch, and the seconds until each allows a
    start (each read once a batch)."""
    rate_wait: Callable[[tuple[str, str]], int | None] | None = None
    """Seconds until a rate limit's key (name, key) allows a start, as committed now
    (``None``: now): asked, outside the transaction, of windows lately found at their limit
    (:data:`~feltdb.work.rate_limits.RATE_HELD`)."""
    key_of: dict[Group, str] = field(default_factory=dict)
    """The fairness key of each group the walk accepted whose work names one."""
    turn: int = 0
    """Where this claim starts in its keys' turns (:mod:`feltdb.work.fairness`)."""
    fair: bool = True
    """Whether this claim's selections take keys in turns (until a whole page in turns
    was found it cannot take: it then reads on in claim order, which pages by position)."""
    turned: bool = False
    """Whether the last selection took several keys' rows in turns."""
    aging_s: int | None = None
    """The application's aging period (:mod:`feltdb.work.claim_aging`), applied to this
    claim's first selection only: if it finds nothing there, the next reads from the top."""
    next_start_s: int | None = None
    """The fewest seconds until a window found at its limit allows a start, over every
    batch of the claim: when the claim found nothing else, how long until rate-limited work
    may start (set by the claim, never by :meth:`reset`)."""

    def bind(self, db: Database, scope: tuple[str, str]) -> None:
        """Claim from ``scope`` (tenant, application) of ``db``: its limits' hints read there,
        and no start yet found held.
        """
        self.scope = scope
        self.saturated = functools.partial(at_limit, db)
        self.rate_wait = lambda rate: next_start_in(db, scope, rate, self.now)
        self.next_start_s = None
        self.turn, self.fair = ROTATION.advance(scope), True
        self.aging_s = aging_period(db, scope)

    def reset(self) -> None:
        """Forget the last batch: none examined, none chosen (a selection that finds no
        partition to read never calls :meth:`choose`).
        """
        self.examined, self.aside, self.chosen = 0, 0, []
        self.dependency_rows.clear()
        self.slots.clear()
        self.starts.clear()
        self.held_windows.clear()
        self.deferred = False

    def partitions(self) -> ClaimPartitions:
        """The ready work's partitions this claim reads: of its definitions, only the
        groups whose needs it meets (the rest is never read, nor locked).
        """
        self.key_of.clear()
        self.turned = False
        # Turns are read from the top only: a position (after) is one in claim order.
        turns = self._turns if self.fair and self.after is None else None
        aging_s, self.aging_s = self.aging_s, None  # the first selection only
        return ClaimPartitions(self._accepts, self.definitions, self.after, turns, aging_s)

    def _turns(self, groups: Sequence[Group]) -> list[list[Group]]:
        split = in_turns(groups, self.key_of, self.turn)
        self.turned = len(split) > 1
        return split

    def _accepts(self, definition: str, group: str, sample: GroupSample) -> bool:
        if not group_accepted(group, sample, self.held, self.environments):
            return False
        needs = group_needs(group, sample) if keyed(group) else None
        if needs is None:
            return True  # unlimited work naming no key's groups: no second look
        _, _, concurrency, rate, fairness = needs
        if fairness is not None:
            self.key_of[(definition, group)] = fairness
        # A key found at its limit lately is checked before its backlog is read: passed
        # over while still full (a hint: the choice decides on the rows it holds).
        if concurrency is not None and self.saturated is not None:
            key = slot_key(*self.scope, concurrency[0])
            if SATURATION.suspected(key):
                if self.saturated(key, concurrency[1]):
                    return False
                SATURATION.forget(key)
        if rate is not None and self.rate_wait is not None:
            key = window_key(*self.scope, *rate)
            if RATE_HELD.suspected(key):
                wait = self.rate_wait(rate)
                if wait is not None:
                    self._start_held(wait)
                    return False
                RATE_HELD.forget(key)
        return True

    def _start_held(self, wait_s: int) -> None:
        """Note that rate-limited work may start in ``wait_s`` seconds."""
        if self.next_start_s is None or wait_s < self.next_start_s:
            self.next_start_s = wait_s

    def choose(self, rows: Sequence[StoredRow], read: RowReader) -> list[PlannedCommit | SetAside]:
        """The commits of the first candidates this worker may run, claimed, until
        ``wanted`` are; and of each found past a deadline or out of attempts on the way,
        settled as ``claim`` would settle it. Empty when no candidate will do. Each
        candidate found waiting on a dependency that is not yet in the state it awaits is
        set aside until it is (:func:`set_aside`), so no claim reads it again meanwhile.
        """
        # It may run again if the backend retries the transaction, so it starts afresh.
        self.reset()
        if self.guard is not None:
            self.guard(read)
        self.examined = len(rows)
        plans: list[PlannedCommit | SetAside] = []
        claimed = 0
        for row in rows:
            if claimed >= self.wanted:
                break
            loaded = LoadedWorkload.of(workload_of(row), row.version)
            read_at = loaded.workload
            self.last = (read_at.priority, read_at.created_at, read_at.workload_id)
            if not self._candidate(loaded.workload):
                continue
            dependencies = self._dependencies(loaded.workload, read)
            if dependencies.awaited is not None and dependencies.ended is None:
                aside = set_aside(loaded.workload, row.version, dependencies)
                if aside is not None:
                    plans.append(aside)
                    self.aside += 1
                continue
            settled = self._settle(loaded.workload, dependencies)
            if settled is None:
                continue  # not claimable after all: never fail the whole search
            operation, decided, granted = settled
            try:
                plan = planned_commit(decided, MUTATED, row.version, operation.value)
                # On PostgreSQL the dependencies were read in this transaction unlocked:
                # the commit holds them as read (SQLite's write lock already does).
                plan = holding(plan, dependencies.held)
            except WorkloadError as error:
                # A record too large to change (written before records had a bound): never
                # fail the whole search for one candidate.
                log.warning("claim: %s skipped: %s", row.key, error.message)
                continue
            if granted is not None:
                limited_plan = self._within_limits(decided, granted.claim_id, read, plan)
                if limited_plan is None:
                    continue  # at a limit: other work, if any
                plan = limited_plan
            claimed += granted is not None
            self.chosen.append((loaded.decided(decided), operation, granted, plan))
            plans.append(plan)
        return plans

    def _within_limits(
        self, decided: Workload, claim_id: str, read: RowReader, plan: PlannedCommit
    ) -> PlannedCommit | None:
        """``plan`` (the claim of ``decided``) with the start of its rate limit and the slot
        of its concurrency key it takes, if any; ``None`` when either is at its limit (or
        taken once in this transaction: the next takes it).
        """
        window = None
        if decided.rate_limit is not None:
            window = window_key(*self.scope, decided.rate_limit, decided.rate_key or "")
            if window in self.held_windows:
                return None
            start = take_start(decided, self.now, read, self.starts)
            if isinstance(start, StartHeld):
                if start.wait_s == 0:
                    self.deferred = True
                    return None
                RATE_HELD.note(window)
                self.held_windows[window] = start.wait_s
                self._start_held(start.wait_s)
                return None
            if start is None:
                window = None  # no limit set: nothing taken
            else:
                plan = holding(plan, [start.guard], [start.mutation])
        if decided.concurrency_key is not None:
            key = slot_key(*self.scope, decided.concurrency_key)
            taking = key not in self.slots and len(self.slots) < MAX_SLOTS_PER_TRANSACTION
            # Found full a moment ago (here, or by another claim): not read again yet.
            fresh = taking and SATURATION.fresh(key)
            slot = None if fresh else take_slot(decided, claim_id, read, self.slots)
            if slot is None:
                if taking and not fresh:
                    SATURATION.note(key)
                self.deferred = self.deferred or not taking
                if window is not None:  # its start is not taken after all
                    self.starts.discard(window)
                return None
            plan = holding(plan, [slot.guard], [slot.mutation])
        return plan

    def _candidate(self, workload: Workload) -> bool:
        # The definitions, the environment and the state are guards only: the selection
        # holds nothing else, but for rows an older release's writer left in a group (their
        # group column is not written by it), which must not be timed out from here.
        if workload.state is not WorkloadState.READY:
            return False
        if (self.definitions is not None and workload.definition_id not in self.definitions) or (
            self.environments is not None and workload.environment not in self.environments
        ):
            return False
        return workload.capability_snapshot <= self.held

    def _dependencies(self, workload: Workload, read: RowReader) -> DependenciesRead:
        """``workload``'s dependencies, read in this transaction (each row once a search)."""
        row_of = functools.partial(self._dependency_row, read, workload)
        return read_dependencies(workload.dependencies, row_of)

    def _dependency_row(
        self, read: RowReader, dependent: Workload, workload_id: str
    ) -> StoredRow | None:
        key = (dependent.tenant_id, dependent.application_id, workload_id)
        if key not in self.dependency_rows:
            self.dependency_rows[key] = dependency_row(read, dependent, workload_id)
        return self.dependency_rows[key]

    def _settle(
        self, workload: Workload, dependencies: DependenciesRead
    ) -> tuple[Operation, Workload, WorkloadClaim | None] | None:
        now = self.now
        if dependencies.awaited is not None and dependencies.ended is not None:
            ended = recovery.dead_letter_unmet(
                workload, dependencies.awaited, dependencies.ended, now
            )
            return Operation.DEPENDENCY, ended, None
        breach = deadline_breach(workload, now)
        if breach is not None:
            timed_out = recovery.time_out_past_deadline(workload, breach[0], breach[1], now)
            return Operation.DEADLINE, timed_out, None
        if recovery.budget_exhausted(workload):
            return Operation.EXHAUSTED, recovery.dead_letter_exhausted(workload, now), None
        try:
            claimed = lifecycle.claim(workload, self.worker, self.held, now, self.lease_ms)
            granted, decided = claimed.answer, claimed.workload
            if self.start:
                decided = lifecycle.start(
                    decided, granted.claim_id, self.worker, granted.fencing_token, now
                )
        except WorkloadError:
            return None
        return Operation.CLAIM, decided, granted


def set_aside(workload: Workload, version: int, read: DependenciesRead) -> SetAside | None:
    """``workload`` (read at ``version``) set aside until the dependency it awaits
    (``read.awaited``, read at ``read.awaited_version``) comes to rest, if it awaits a state
    work rests in (:data:`AWAITED_STATES`: a commit into one releases it); ``None`` for one
    it only passes through (checked at each claim instead) or for no such workload.
    """
    awaited, seen = read.awaited, read.awaited_version
    if awaited is None or seen is None or awaited.required_state not in AWAITED_STATES:
        return None
    return SetAside(
        DURABLE_WORK_COLLECTION,
        workload.workload_id,
        version,
        awaited.workload_id,
        awaited.required_state.value,
        seen,
    )
