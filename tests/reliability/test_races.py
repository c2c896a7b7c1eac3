"""Races between writers of one store, across processes and across two servers.

What is raced (each on a SQLite file shared by the processes and on one PostgreSQL
database, unless said otherwise; every child opens its own ``WorkloadStore``, so every
race is decided by the store's compare-and-set, never by a process's memory):

1. **claim_next / claim_many**: 4 processes drain M workloads, each call chosen at random
   (``claim_many`` sometimes with ``start=True``); a third of the workloads fail their first
   attempt and are retried at once, so they are claimed again under fence 2.
2. **recover_expired / enforce_deadlines against a write in their read-to-write window**
   (riverqueue/river#1302: River's rescuer overwrote a job that had completed, or had been
   claimed again, after its stale read). Forced deterministically: the sweep is held after
   its read (:class:`support.race_window.SweepPausedAfterRead`) while the holder completes,
   heartbeats, or another writer recovers and re-claims the work; and, on PostgreSQL, a row
   lock queues a completion and a recovery behind each other in a known order. With more
   due work than one page of a sweep reads, a completion in the window must not make the
   sweep miss another due workload. Then statistically across processes: a completer, two
   recoverers and a re-claimer, many rounds.
3. **decide against claim**: two deciders (approving or rejecting at random) and two
   claimers (``claim_next`` and ``claim`` by id) over work awaiting approval.
4. **admit of one idempotency key** from 4 processes (``admit`` and ``admit_many``), the
   same request, and conflicting requests under one key.
5. **complete against fail against cancel against timeout against enforce_deadlines
   against recover_expired** on one running workload, one process each.
6. **two ``feltdb serve`` processes on one PostgreSQL database**, four HTTP clients racing
   single and batch claims through both, completing or failing through either.

What is checked: every workload claimed by exactly one process per fence, fences 1, 2...
without a gap, the store's attempts naming the process that was answered the claim;
every acknowledged completion committed once and never overwritten; a stale sweep commits
nothing (the completed work stays ``SUCCEEDED``, the re-claimed work keeps its new claim and
its holder completes it); no claim before an approval, none after a rejection, one
decision per workload; one workload and one ``created=True`` per key; exactly one
terminal outcome per running attempt, every loser refused with a conflict-like code (or,
for the two legal follow-ups, acting on the state the winner left); every history
gap-free, chained and legal. Each case records its measured counts
(:func:`support.soak.record`) before asserting the bad ones (``duplicated``, ``lost``,
``illegal``) are zero.

What is NOT covered: clock skew beyond the ``now`` each racer passes (each passes its own,
as writers on different machines would); a crash in the middle of a race (see
``test_kill_during_batches.py``); network partitions between a server and PostgreSQL;
SQLite on a network file system; the worker SDK's own retry loops; lease renewal by
heartbeat under load (only one heartbeat, in the forced window); more than two servers.

Sizes: :func:`support.soak.scaled` (bounded in ``make test``, long in ``make soak``).
"""

from __future__ import annotations

import multiprocessing
import os
import random
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest
from support import race_children as children
from support.concurrency import run_threads
from support.factories import CAPABILITIES, make_request
from support.race_window import SweepPausedAfterRead, row_locked, wait_for_lock_waiters
from support.server import WORK_CAPABILITY, Server, start_server, stop, wait_until_healthy
from support.soak import SOAK, record, scaled

import feltdb.work.sweeps
from feltdb import (
    DURABLE_WORK_COLLECTION,
    ApprovalOutcome,
    ApprovalPolicy,
    AttemptStatus,
    Subject,
    Workload,
    WorkloadError,
    WorkloadRetryPolicy,
    WorkloadState,
    WorkloadStore,
    WorkloadTimeouts,
    can_transition,
    open_database,
)
from feltdb.auth.policy import CLAIM, READ, SUBMIT
from feltdb.auth.tokens import Keyring

CTX = multiprocessing.get_context("spawn")
TESTS = Path(__file__).resolve().parents[1]
ROUND_TIMEOUT_S = 180
"""Upper bound on one round of children: a hang fails instead of blocking CI."""
SUITE = "races"
COMMAND = "make soak"
RETRY_AT_ONCE = WorkloadRetryPolicy(initial_delay_ms=0)
"""Failed work is claimable again at the same ``now``: the second fence comes at once."""
S = WorkloadState

# ------------------------------------------------------------------------------ helpers


POOL_SIZE = 6
"""Children in the module's pool: the most any round races (case 5)."""


class Racers:
    """A spawn pool of :data:`POOL_SIZE` children sharing a start-line barrier and four
    flags, made once for the module (a child's start-up costs more than most rounds).

    Each round submits one task per child (padded with ``"idle"`` ones): each waits at the
    barrier, so every child takes exactly one. The children inherit a clean environment:
    no ``FELTDB_*`` variable, and a ``PYTHONPATH`` that holds ``tests/``. A round that
    fails (or times out) kills the pool; the next round starts a new one.
    """

    def __init__(self) -> None:
        self.pool: Any = None
        self.barrier: Any = None
        self.flags: list[Any] = []

    def _start(self) -> None:
        with pytest.MonkeyPatch.context() as environment:
            for name in list(os.environ):
                if name.startswith("FELTDB_"):
                    environment.delenv(name)
            paths = [str(TESTS), os.environ.get("PYTHONPATH", "")]
            environment.setenv("PYTHONPATH", os.pathsep.join(filter(None, paths)))
            self.barrier = CTX.Barrier(POOL_SIZE)
            self.flags = [CTX.Event() for _ in range(4)]
            self.pool = CTX.Pool(
                POOL_SIZE, initializer=children.init_worker, initargs=(self.barrier, self.flags)
            )

    def run(self, role: str, arguments: Sequence[tuple[Any, ...]]) -> list[Any]:
        """Run ``children.<role>`` once per argument tuple, all at once; their answers."""
        assert len(arguments) <= POOL_SIZE
        if self.pool is None:
            self._start()
        for flag in self.flags:
            flag.clear()
        tasks = [(role, tuple(a)) for a in arguments]
        tasks += [("idle", ())] * (POOL_SIZE - len(tasks))
        try:
            answers: list[Any] = self.pool.starmap_async(children.dispatch, tasks, chunksize=1).get(
                timeout=ROUND_TIMEOUT_S
            )
        except BaseException:
            self.kill()
            raise
        return answers[: len(arguments)]

    def kill(self) -> None:
        if self.pool is not None:
            self.barrier.abort()
            self.pool.terminate()
            self.pool.join()
            self.pool = None


@pytest.fixture(scope="module")
def racers() -> Iterator[Racers]:
    """The module's pool of racing children (see :class:`Racers`)."""
    pool = Racers()
    yield pool
    pool.kill()


def history_problems(w: Workload) -> list[str]:
    """What is wrong with ``w``'s history: a gap in its sequence, an event that does not
    start where the previous one ended, an illegal transition, a state it does not end in.
    """
    history = w.execution_history
    problems: list[str] = []
    sequences = [event.sequence for event in history]
    if sequences != list(range(1, len(history) + 1)):
        problems.append(f"{w.workload_id}: sequence {sequences} is not gap-free")
    previous: WorkloadState | None = S.CREATED
    for event in history:
        if event.from_state != previous:
            problems.append(
                f"{w.workload_id}: event {event.sequence} leaves {event.from_state}, "
                f"the history was in {previous}"
            )
        if event.from_state is None or not can_transition(event.from_state, event.to):
            problems.append(f"{w.workload_id}: illegal {event.from_state} -> {event.to}")
        previous = event.to
    if history and history[-1].to != w.state:
        problems.append(f"{w.workload_id}: state {w.state} but history ends in {previous}")
    return problems


def states(w: Workload) -> list[WorkloadState]:
    return [event.to for event in w.execution_history]


def version_of(store: WorkloadStore, workload_id: str) -> int:
    row = store.db.get_row(DURABLE_WORK_COLLECTION, workload_id)
    assert row is not None
    return row.version


def claimed_and_started(
    store: WorkloadStore, keys: Sequence[str], *, now: int, lease_ms: int, **request: Any
) -> list[list[Any]]:
    """Admit one workload per key and claim and start each as ``w-old``: their
    ``[id, claim_id, fence]``.
    """
    answers = store.admit_many(
        [make_request(idempotency_key=key, input={"key": key}, **request) for key in keys]
    )
    ids = set()
    for answer in answers:
        assert not isinstance(answer, WorkloadError), answer
        ids.add(answer[0].workload_id)
    held: list[list[Any]] = []
    while len(held) < len(ids):
        claims = store.claim_many("t", "app", "w-old", CAPABILITIES, 100, now, lease_ms, start=True)
        assert claims, "admitted work was not claimable"
        held.extend([c.workload_id, c.claim_id, c.fencing_token] for c in claims)
    assert {id for id, _, _ in held} == ids
    return held


def report(case: str, backend: str, figures: dict[str, Any], problems: list[str]) -> None:
    """Record the case's measured figures, print them, then fail on any problem."""
    record(SUITE, case, backend, command=COMMAND, **figures)
    shown = ", ".join(f"{name}={value}" for name, value in figures.items())
    print(f"\n{SUITE}/{case} on {backend} ({'soak' if SOAK else 'bounded'}): {shown}")
    assert not problems, f"{len(problems)} problems, the first: " + "\n".join(problems[:20])


# ---------------------------------------------------------------- 1: claim_next/claim_many


@pytest.mark.multiprocess
def test_racing_claim_next_and_claim_many_claim_each_workload_once_per_fence(
    new_target: Callable[..., str], backend: str, racers: Racers
) -> None:
    processes, rounds, size = 4, scaled(2, 15), scaled(45, 300)
    target = new_target("claims")
    problems: list[str] = []
    totals = Counter[str]()
    seed = random.randrange(2**32)
    print(f"\nseed {seed}")
    with WorkloadStore.open(target) as store:
        for round in range(rounds):
            answers = store.admit_many(
                [
                    make_request(
                        idempotency_key=f"c{round}-{n}",
                        input={"n": n},
                        priority=n % 4,
                        retry_policy=RETRY_AT_ONCE,
                    )
                    for n in range(size)
                ]
            )
            ids = {a[0].workload_id for a in answers if not isinstance(a, WorkloadError)}
            assert len(ids) == size, answers
            reports = racers.run(
                "claim_and_finish",
                [(target, i, seed + round, 100) for i in range(processes)],
            )
            claimers: dict[tuple[str, int], list[str]] = defaultdict(list)
            completed: Counter[str] = Counter()
            for i, child in enumerate(reports):
                problems.extend(f"round {round} w{i}: {error}" for error in child["errors"])
                totals["refused"] += len(child["errors"])
                for id, fence, _, how in child["claims"]:
                    claimers[(id, fence)].append(f"w{i}")
                    totals[how] += 1
                for id, _ in child["completed"]:
                    completed[id] += 1
            expected = {id: 2 if children.fails_first_attempt(id) else 1 for id in ids}
            claims = sum(len(who) for who in claimers.values())
            totals["attempted"] += size
            totals["claims"] += claims
            if claims != sum(expected.values()):
                problems.append(f"round {round}: {claims} claims, {sum(expected.values())} due")
            for (id, fence), who in claimers.items():
                if len(who) > 1:
                    totals["duplicated"] += len(who) - 1
                    problems.append(f"round {round}: {id} fence {fence} claimed by {who}")
                if id not in ids:
                    problems.append(f"round {round}: {id} was not this round's")
            for id in ids:
                w = store.get(id)
                fences = sorted(fence for (i, fence) in claimers if i == id)
                if fences != list(range(1, expected[id] + 1)):
                    problems.append(f"{id}: claimed at fences {fences}")
                if w.state != S.SUCCEEDED or completed[id] != 1:
                    totals["lost"] += 1
                    problems.append(f"{id}: {w.state}, completed {completed[id]} times")
                    continue
                statuses = [a.status for a in w.attempts]
                if statuses != [AttemptStatus.FAILED] * (expected[id] - 1) + [
                    AttemptStatus.SUCCEEDED
                ]:
                    problems.append(f"{id}: attempts {statuses}")
                holders = [claimers.get((id, a.fencing_token), ["?"])[0] for a in w.attempts]
                if [a.worker_id for a in w.attempts] != holders:
                    problems.append(f"{id}: attempts held by {holders} in the store's words")
                result_id = w.result.result_id if w.result is not None else None
                if result_id != children.result_id_of(id, expected[id]):
                    problems.append(f"{id}: result {result_id}")
                if states(w).count(S.CLAIMED) != expected[id]:
                    problems.append(f"{id}: {states(w).count(S.CLAIMED)} claims in history")
                problems.extend(history_problems(w))
            if store.claim_next("t", "app", "late", CAPABILITIES, 100) is not None:
                problems.append(f"round {round}: work was left claimable")
    report(
        "claim_next_claim_many",
        backend,
        {
            "processes": processes,
            "rounds": rounds,
            "attempted": totals["attempted"],
            "claims": totals["claims"],
            "via_claim_next": totals["claim_next"],
            "via_claim_many": totals["claim_many"] + totals["claim_many_started"],
            "conflicts": totals["refused"],
            "duplicated": totals["duplicated"],
            "lost": totals["lost"],
        },
        problems,
    )


# ------------------------------------------- 2: a sweep's read-to-write window (forced)

SWEEPS = {"recover_expired": "lease_expires_at", "enforce_deadlines": "deadline_at"}
WINDOW_TIMEOUT_S = 30
PAGE = 8
"""The sweeps' page (``feltdb.work.sweeps.MAINTENANCE_BATCH``) in the paging test."""


def sweep(store: WorkloadStore, name: str, now: int) -> list[str]:
    if name == "recover_expired":
        return store.recover_expired(now)
    return store.enforce_deadlines(now)


def finish(
    store: WorkloadStore, id: str, claim_id: str, worker: str, fence: int, expected: str
) -> list[str]:
    """Complete at 111 as ``worker``; what is wrong if the answer is not ``expected``
    (``"ok"`` or a code).
    """
    try:
        store.complete(id, claim_id, worker, fence, f"r-{worker}", {"by": worker}, now=111)
        answer = "ok"
    except WorkloadError as error:
        answer = error.code
    return [] if answer == expected else [f"{worker} completing: {answer}, not {expected}"]


@pytest.mark.parametrize("intruder", ["complete", "heartbeat", "reclaim"])
@pytest.mark.parametrize("swept", sorted(SWEEPS))
def test_a_write_inside_a_sweeps_read_to_write_window_is_never_overwritten(
    new_target: Callable[..., str], backend: str, swept: str, intruder: str
) -> None:
    """The sweep reads the workload due (lease expired at 110, heartbeat deadline at 110),
    is held there, and meanwhile: the holder completes it (``complete``), or heartbeats it
    (``heartbeat``: lease and deadline move on), or another writer runs the same sweep and
    ``w-new`` claims and starts it (``reclaim``). Let go, the stale sweep must commit
    nothing and answer ``[]``.
    """
    target = new_target("window")
    with WorkloadStore.open(target) as store:
        [[id, claim_id, fence]] = claimed_and_started(
            store,
            ["window"],
            now=100,
            lease_ms=10_000,
            timeouts=WorkloadTimeouts(heartbeat_ms=10_000),
            retry_policy=RETRY_AT_ONCE,
        )
        held_db = SweepPausedAfterRead(open_database(target), SWEEPS[swept])
        stale = WorkloadStore(held_db)  # a Database by delegation
        answers: list[list[str]] = []
        sweeper = threading.Thread(target=lambda: answers.append(sweep(stale, swept, 110)))
        sweeper.start()
        problems: list[str] = []
        try:
            assert held_db.paused.wait(WINDOW_TIMEOUT_S), "the sweep never read"
            [read] = held_db.read
            assert (read.key, read.version) == (id, version_of(store, id))
            if intruder == "complete":
                store.complete(id, claim_id, "w-old", fence, "r-w-old", {"by": "w-old"}, now=109)
            elif intruder == "heartbeat":
                store.heartbeat(id, claim_id, "w-old", fence, now=109, extend_ms=30_000)
            else:
                assert sweep(store, swept, 110) == [id]
                new = store.claim(id, "w-new", CAPABILITIES, now=110, lease_ms=30_000)
                store.start(id, new.claim_id, "w-new", new.fencing_token, now=110)
            version = version_of(store, id)
        finally:
            held_db.resume.set()
            sweeper.join(WINDOW_TIMEOUT_S)
            assert not sweeper.is_alive()
            held_db.inner.close()
        if answers != [[]]:
            problems.append(f"the stale {swept} answered {answers}")
        if version_of(store, id) != version:
            problems.append(f"the stale {swept} committed: version {version_of(store, id)}")
        w = store.get(id)
        problems.extend(history_problems(w))
        lost_or_timed = states(w).count(S.RECOVERING) + states(w).count(S.TIMED_OUT)
        if intruder == "complete":
            if w.state != S.SUCCEEDED or w.result is None or w.result.result_id != "r-w-old":
                problems.append(f"the completion was overwritten: {w.state}, {w.result}")
            if lost_or_timed or [a.status for a in w.attempts] != [AttemptStatus.SUCCEEDED]:
                problems.append(f"history {states(w)}, attempts {w.attempts}")
        elif intruder == "heartbeat":
            claim = w.current_claim
            if w.state != S.RUNNING or claim is None or claim.expires_at != 139 or lost_or_timed:
                problems.append(f"the heartbeat was overwritten: {w.state}, {claim}")
            problems.extend(finish(store, id, claim_id, "w-old", fence, "ok"))
        else:
            claim = w.current_claim
            if w.state != S.RUNNING or claim is None or claim.worker_id != "w-new":
                problems.append(f"the new claim was clobbered: {w.state}, {claim}")
            if lost_or_timed != 1:
                problems.append(f"the work was swept {lost_or_timed} times: {states(w)}")
            stale_fence = "WORKLOAD_STALE_FENCE"
            problems.extend(finish(store, id, claim_id, "w-old", fence, stale_fence))
            if claim is not None:
                problems.extend(
                    finish(store, id, claim.claim_id, "w-new", claim.fencing_token, "ok")
                )
        if store.get(id).state != S.SUCCEEDED:
            problems.append(f"the holder could not complete it: {states(store.get(id))}")
    stale_acted = answers != [[]]
    report(
        f"window_{swept}_{intruder}",
        backend,
        {
            "rounds": 1,
            "attempted": 1,
            "conflicts": int(not stale_acted),
            "duplicated": int(stale_acted),
            "lost": int(bool(problems)),
        },
        problems,
    )


@pytest.mark.parametrize("swept", sorted(SWEEPS))
def test_a_completion_in_a_sweeps_window_makes_it_miss_no_other_due_work(
    new_target: Callable[..., str], backend: str, swept: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """More work is due than one page of a sweep (``MAINTENANCE_BATCH``, made 8 here so
    that the test is quick) reads. The sweep is held after reading its first page while
    the holder completes the first workload of it; let go, the sweep loses that one
    (rightly) and must still act on every other due workload, on its first page and on
    the next: losing a race may leave the lost workload to the next pass, never an
    innocent one.
    """
    monkeypatch.setattr(feltdb.work.sweeps, "MAINTENANCE_BATCH", PAGE)
    size = 2 * PAGE
    target = new_target("pages")
    with WorkloadStore.open(target) as store:
        held = claimed_and_started(
            store,
            [f"p{n}" for n in range(size)],
            now=100,
            lease_ms=10_000,
            timeouts=WorkloadTimeouts(heartbeat_ms=10_000),
        )
        fences = {id: (claim_id, fence) for id, claim_id, fence in held}
        held_db = SweepPausedAfterRead(open_database(target), SWEEPS[swept])
        stale = WorkloadStore(held_db)  # a Database by delegation
        answers: list[list[str]] = []
        sweeper = threading.Thread(target=lambda: answers.append(sweep(stale, swept, 110)))
        sweeper.start()
        try:
            assert held_db.paused.wait(WINDOW_TIMEOUT_S), "the sweep never read"
            assert len(held_db.read) == PAGE
            done = held_db.read[0].key
            claim_id, fence = fences[done]
            store.complete(done, claim_id, "w-old", fence, "r-done", {"by": "w-old"}, now=109)
        finally:
            held_db.resume.set()
            sweeper.join(WINDOW_TIMEOUT_S)
            assert not sweeper.is_alive()
            held_db.inner.close()
        [acted] = answers
        missed = sorted(set(fences) - {done} - set(acted))
        left = sweep(store, swept, 110)
        states_now = Counter(store.get(id).state for id in fences)
    problems: list[str] = []
    if missed:
        problems.append(
            f"the sweep lost {done} to the completion and also missed {len(missed)} other due "
            f"workloads ({missed[:3]}); the next pass acted on {len(left)}"
        )
    if done in acted or set(acted) & set(left):
        problems.append(f"acted twice: {sorted(set(acted) & set(left))}, or on {done}")
    report(
        f"window_{swept}_next_page",
        backend,
        {
            "rounds": 1,
            "attempted": size,
            "conflicts": 1,
            "acted": len(acted),
            "missed": len(missed),
            "duplicated": int(done in acted) + len(set(acted) & set(left)),
            "lost": 0 if states_now[S.SUCCEEDED] == 1 else 1,
        },
        problems,
    )


@pytest.mark.postgres
@pytest.mark.parametrize("first", ["completion", "recovery"])
def test_writers_queued_on_a_row_lock_are_decided_on_the_committed_version(
    new_pg_url: Callable[..., str], first: str
) -> None:
    """On PostgreSQL, the workload's row is held ``FOR UPDATE``; a completion (lease still
    valid at 109) and a recovery (lease expired at 110) each read it and block on their
    guarded write, ``first`` first. Let go, the first commits; the second's ``UPDATE``
    re-checks the row as committed (READ COMMITTED) and loses: a recovery that queued
    behind a completion recovers nothing, a completion that queued behind a recovery is
    refused ``WORKLOAD_CONFLICT``.
    """
    url = new_pg_url("locked")
    problems: list[str] = []
    with WorkloadStore.open(url) as store, WorkloadStore.open(url) as other:
        [[id, claim_id, fence]] = claimed_and_started(store, ["locked"], now=100, lease_ms=10_000)
        outcomes: dict[str, Any] = {}

        def complete() -> None:
            try:
                other.complete(id, claim_id, "w-old", fence, "r-old", {"by": "w-old"}, now=109)
                outcomes["completion"] = "ok"
            except WorkloadError as error:
                outcomes["completion"] = error.code

        def recover() -> None:
            outcomes["recovery"] = store.recover_expired(110)

        bodies = {"completion": complete, "recovery": recover}
        second = "recovery" if first == "completion" else "completion"
        threads = [threading.Thread(target=bodies[name]) for name in (first, second)]
        with row_locked(url, id):
            threads[0].start()
            wait_for_lock_waiters(url, 1)
            threads[1].start()
            wait_for_lock_waiters(url, 2)
            assert outcomes == {}, "a writer got past the row lock"
        for thread in threads:
            thread.join(WINDOW_TIMEOUT_S)
            assert not thread.is_alive()
        w = store.get(id)
        problems.extend(history_problems(w))
        if first == "completion":
            expected: dict[str, Any] = {"completion": "ok", "recovery": []}
            if w.state != S.SUCCEEDED or S.RECOVERING in states(w):
                problems.append(f"the completion was overwritten: {states(w)}")
        else:
            expected = {"completion": "WORKLOAD_CONFLICT", "recovery": [id]}
            if w.state != S.READY or w.result is not None or states(w).count(S.RECOVERING) != 1:
                problems.append(f"the recovery was overwritten: {states(w)}, {w.result}")
        if outcomes != expected:
            problems.append(f"answered {outcomes}, expected {expected}")
    report(
        f"row_lock_{first}_first",
        "postgres",
        {
            "rounds": 1,
            "attempted": 2,
            "conflicts": int(outcomes.get("completion") != "ok")
            + int(not outcomes.get("recovery")),
            "duplicated": int(
                outcomes.get("completion") == "ok" and bool(outcomes.get("recovery"))
            ),
            "lost": int(bool(problems)),
        },
        problems,
    )


# ---------------------------------------- 2: recovery against completion, statistically


@pytest.mark.multiprocess
def test_recovery_racing_completion_and_reclaim_across_processes_never_overwrites(
    new_target: Callable[..., str], backend: str, racers: Racers
) -> None:
    """Per round, M workloads held by ``w-old`` (leases expire at 110): process 0 completes
    them at 109 in a random order, processes 1 and 2 ``recover_expired(110)`` over and
    over, process 3 claims (as ``w-new``) and completes what was recovered. Each workload
    is then either completed by ``w-old`` and never recovered, or recovered exactly once,
    refused to ``w-old``, and completed by ``w-new`` under fence 2.
    """
    rounds, size = scaled(3, 40), scaled(30, 120)
    target = new_target("recovery")
    roles = ["complete", "recover", "recover", "reclaim"]
    problems: list[str] = []
    totals = Counter[str]()
    seed = random.randrange(2**32)
    print(f"\nseed {seed}")
    with WorkloadStore.open(target) as store:
        for round in range(rounds):
            held = claimed_and_started(
                store, [f"r{round}-{n}" for n in range(size)], now=100, lease_ms=10_000
            )
            ids = {id for id, _, _ in held}
            reports = racers.run(
                "recovery_round",
                [
                    (target, i, role, held, seed + round, [109, 110, 111])
                    for i, role in enumerate(roles)
                ],
            )
            for i, child in enumerate(reports):
                problems.extend(f"round {round} {roles[i]}: {e}" for e in child["errors"])
            completer = reports[0]
            recovered = Counter(id for child in reports[1:3] for id in child["recovered"])
            reclaimed = Counter(id for id, _ in reports[3]["reclaimed"])
            completed_new = Counter(reports[3]["completed_new"])
            refusals = set(completer["refused"].values())
            if not refusals <= {
                "WORKLOAD_CONFLICT",
                "WORKLOAD_CLAIM_INVALID",
                "WORKLOAD_STALE_FENCE",
            }:
                problems.append(f"round {round}: the completer was refused {refusals}")
            totals["attempted"] += size
            totals["conflicts"] += len(completer["refused"])
            totals["completed_first"] += len(completer["ok"])
            totals["recovered"] += sum(recovered.values())
            totals["recovery_conflicts"] += sum(1 for id in completer["ok"] if id in recovered)
            if sweep(store, "recover_expired", 110):
                problems.append(f"round {round}: expired work was left unrecovered")
            for id in ids:
                w = store.get(id)
                problems.extend(history_problems(w))
                swept = states(w).count(S.RECOVERING)
                by_old = id in completer["ok"]
                if by_old + recovered[id] != 1 or swept != recovered[id]:
                    totals["duplicated" if by_old + recovered[id] > 1 else "lost"] += 1
                    problems.append(
                        f"{id}: completed by w-old {by_old}, recovered {recovered[id]} times "
                        f"({swept} in history)"
                    )
                if w.state != S.SUCCEEDED or w.result is None:
                    totals["lost"] += 1
                    problems.append(f"{id}: {w.state} after the round")
                    continue
                if by_old:
                    if w.result.produced_by != "w-old" or len(w.attempts) != 1 or swept:
                        totals["lost"] += 1
                        problems.append(f"{id}: w-old's completion was overwritten: {states(w)}")
                else:
                    if (reclaimed[id], completed_new[id]) != (1, 1):
                        problems.append(f"{id}: reclaimed {reclaimed[id]}, {completed_new[id]}")
                    statuses = [a.status for a in w.attempts]
                    if statuses != [AttemptStatus.WORKER_LOST, AttemptStatus.SUCCEEDED]:
                        problems.append(f"{id}: attempts {statuses}")
                    if w.result.produced_by != "w-new" or w.current_claim is not None:
                        problems.append(f"{id}: the new claim was clobbered: {w.result}")
    print(
        f"\nrecovery race: w-old completed {totals['completed_first']}, recovery won "
        f"{totals['recovered']} of {totals['attempted']}"
    )
    report(
        "recover_expired_vs_complete",
        backend,
        {
            "processes": 4,
            "rounds": rounds,
            "attempted": totals["attempted"],
            "completed_first": totals["completed_first"],
            "recovered": totals["recovered"],
            "conflicts": totals["conflicts"],
            "duplicated": totals["duplicated"],
            "lost": totals["lost"],
        },
        problems,
    )


# --------------------------------------------------------------- 3: decide against claim


@pytest.mark.multiprocess
def test_decisions_racing_claims_never_let_unapproved_or_rejected_work_run(
    new_target: Callable[..., str], backend: str, racers: Racers
) -> None:
    """Per round, K workloads await approval; two deciders decide each (at random, and
    against each other), two claimers try to claim them all along. Exactly one decision
    per workload commits; approved work is claimed exactly once, after its decision;
    rejected work is never claimed.
    """
    rounds, size = scaled(3, 40), scaled(16, 60)
    target = new_target("approval")
    roles = ["decide", "decide", "claim", "claim"]
    problems: list[str] = []
    totals = Counter[str]()
    seed = random.randrange(2**32)
    print(f"\nseed {seed}")
    decider_answers = {"ok", "replayed", "WORKLOAD_APPROVAL_DECIDED", "WORKLOAD_CONFLICT"}
    claim_refusals = {
        "WORKLOAD_APPROVAL_PENDING",
        "WORKLOAD_REJECTED",
        "WORKLOAD_NOT_READY",
        "WORKLOAD_CONFLICT",
    }
    with WorkloadStore.open(target) as store:
        for round in range(rounds):
            pending = []
            for n in range(size):
                w = store.create(
                    make_request(
                        idempotency_key=f"a{round}-{n}", input={"n": n}, approval=ApprovalPolicy()
                    )
                )
                assert w.state == S.AWAITING_APPROVAL
                pending.append([w.workload_id, w.input_hash])
            reports = racers.run(
                "decide_or_claim",
                [(target, i, role, pending, seed + round) for i, role in enumerate(roles)],
            )
            claims: dict[str, list[tuple[str, int]]] = defaultdict(list)
            for i, child in enumerate(reports):
                problems.extend(f"round {round} {roles[i]}: {e}" for e in child["errors"])
                for code, count in child["refusals"].items():
                    totals[f"refused {code}"] += count
                    totals["conflicts"] += count
                    if code not in claim_refusals:
                        problems.append(f"round {round}: a claim was refused {code}")
                for id, fence in child["claims"]:
                    claims[id].append((f"w{i}", fence))
                totals["claim_tries"] += child["tries"]
            totals["attempted"] += size
            for id, _ in pending:
                w = store.get(id)
                problems.extend(history_problems(w))
                answers = [reports[d]["decided"].get(id) for d in (0, 1)]
                committed = [d for d in (0, 1) if answers[d] and answers[d][1] == "ok"]
                if {answer[1] for answer in answers if answer} - decider_answers or None in answers:
                    problems.append(f"{id}: deciders answered {answers}")
                totals["conflicts"] += sum(1 for a in answers if a and a[1] != "ok")
                decision = w.approval.decision if w.approval is not None else None
                if len(committed) != 1 or decision is None:
                    totals["duplicated" if len(committed) > 1 else "lost"] += 1
                    problems.append(f"{id}: decisions {answers}, committed {decision}")
                    continue
                decided_by = "ada" if committed[0] == 0 else "bob"
                if (decision.outcome.value, decision.decided_by.id) != (
                    answers[committed[0]][0],
                    decided_by,
                ):
                    problems.append(f"{id}: committed {decision}, answered {answers}")
                history = states(w)
                if decision.outcome is ApprovalOutcome.REJECTED:
                    totals["rejected"] += 1
                    if claims[id] or w.attempts or w.state != S.REJECTED or S.CLAIMED in history:
                        totals["illegal"] += 1
                        problems.append(f"{id}: rejected, yet claimed {claims[id]}: {history}")
                    continue
                totals["approved"] += 1
                if len(claims[id]) != 1:
                    totals["duplicated" if claims[id] else "lost"] += 1
                    problems.append(f"{id}: approved, claimed {claims[id]}")
                    continue
                [(worker, fence)] = claims[id]
                ready = history.index(S.READY)
                if (
                    w.state != S.CLAIMED
                    or history.count(S.CLAIMED) != 1
                    or history.index(S.CLAIMED) < ready
                    or [(a.worker_id, a.fencing_token) for a in w.attempts] != [(worker, fence)]
                ):
                    totals["illegal"] += 1
                    problems.append(f"{id}: claimed before approval or twice: {history}")
            if store.claim_next("t", "app", "late", CAPABILITIES, 11) is not None:
                problems.append(f"round {round}: approved work was left unclaimed")
    print(
        f"\napproval race: {totals['approved']} approved, {totals['rejected']} rejected, "
        f"{totals['refused WORKLOAD_APPROVAL_PENDING']} claims refused while pending, "
        f"{totals['claim_tries']} claim tries"
    )
    report(
        "decide_vs_claim",
        backend,
        {
            "processes": 4,
            "rounds": rounds,
            "attempted": totals["attempted"],
            "approved": totals["approved"],
            "rejected": totals["rejected"],
            "refused_pending": totals["refused WORKLOAD_APPROVAL_PENDING"],
            "conflicts": totals["conflicts"],
            "duplicated": totals["duplicated"],
            "lost": totals["lost"],
            "illegal": totals["illegal"],
        },
        problems,
    )


# --------------------------------------------------------------- 4: admission of one key


@pytest.mark.multiprocess
def test_admissions_of_one_key_from_four_processes_create_one_workload(
    new_target: Callable[..., str], backend: str, racers: Racers
) -> None:
    """Per round, K keys, each admitted by all 4 processes at once: for the same request,
    one workload, one ``created=True`` and every answer its id; for conflicting requests
    under one key (``conflict-``), one admitted and every other told the key was reused.
    """
    processes, rounds, size = 4, scaled(4, 60), scaled(12, 40)
    target = new_target("admission")
    WorkloadStore.open(target).close()
    problems: list[str] = []
    totals = Counter[str]()
    seed = random.randrange(2**32)
    print(f"\nseed {seed}")
    with WorkloadStore.open(target) as store:
        for round in range(rounds):
            keys = [f"{'conflict-' if n % 4 == 3 else 'same-'}{round}-{n}" for n in range(size)]
            reports = racers.run(
                "admit_keys", [(target, i, keys, seed + round) for i in range(processes)]
            )
            by_key: dict[str, list[tuple[int, str | None, bool, str]]] = defaultdict(list)
            for i, child in enumerate(reports):
                problems.extend(f"round {round} p{i}: {e}" for e in child["errors"])
                for key, id, created, code in child["answers"]:
                    by_key[key].append((i, id, created, code))
            totals["attempted"] += size * processes
            kept: dict[str, list[Workload]] = defaultdict(list)
            for w in store.list("t", "app"):
                kept[w.idempotency_key].append(w)
            for key in keys:
                answers = by_key[key]
                created = [i for i, _, made, _ in answers if made]
                if len(answers) != processes or len(created) != 1:
                    totals["duplicated" if len(created) > 1 else "lost"] += 1
                    problems.append(f"{key}: {answers}")
                    continue
                [winner] = created
                stored = kept[key]
                if len(stored) != 1:
                    totals["duplicated" if stored else "lost"] += 1
                    problems.append(f"{key}: {len(stored)} workloads stored")
                    continue
                losers = [code for i, _, _, code in answers if i != winner]
                if key.startswith("conflict-"):
                    totals["conflicts"] += losers.count("IDEMPOTENCY_KEY_REUSED")
                    if losers != ["IDEMPOTENCY_KEY_REUSED"] * (processes - 1):
                        problems.append(f"{key}: the others were answered {losers}")
                    if stored[0].priority != winner:
                        totals["illegal"] += 1
                        problems.append(
                            f"{key}: stored p{stored[0].priority}, created by p{winner}"
                        )
                else:
                    totals["conflicts"] += losers.count("ok")  # replays of the winner's
                    ids = {id for _, id, _, _ in answers}
                    if losers != ["ok"] * (processes - 1) or ids != {stored[0].workload_id}:
                        problems.append(f"{key}: answered {answers}")
        total = len(store.list("t", "app"))
        if total != rounds * size:
            problems.append(f"{total} workloads stored, {rounds * size} keys admitted")
    report(
        "admit_one_key",
        backend,
        {
            "processes": processes,
            "rounds": rounds,
            "keys": rounds * size,
            "attempted": totals["attempted"],
            "conflicts": totals["conflicts"],
            "duplicated": totals["duplicated"],
            "lost": totals["lost"],
            "illegal": totals["illegal"],
        },
        problems,
    )


# ------------------------------------------------------- 5: finishers of one running attempt

FINISHERS = ["complete", "fail", "cancel", "timeout", "deadline", "recover"]
FIRST_EVENT = {
    (S.SUCCEEDED, "w-old"): "complete",
    (S.FAILED, "w-old"): "fail",
    (S.CANCELLATION_REQUESTED, "operator:canceller"): "cancel",
    (S.TIMED_OUT, "operator:timer"): "timeout",
    (S.TIMED_OUT, "feltdb.deadline"): "deadline",
    (S.RECOVERING, "feltdb.recovery"): "recover",
}
"""Which racer a first event after the start was committed by."""
EVENTS_OF = {
    "complete": [S.SUCCEEDED],
    "fail": [S.FAILED, S.DEAD_LETTER],
    "cancel": [S.CANCELLATION_REQUESTED],
    "timeout": [S.TIMED_OUT, S.DEAD_LETTER],
    "deadline": [S.TIMED_OUT, S.DEAD_LETTER],
    "recover": [S.RECOVERING, S.DEAD_LETTER],
}
"""What each winner commits (one attempt allowed: every failure dead-letters)."""
FOLLOW_UPS = {
    S.DEAD_LETTER: ("cancel", "operator:canceller"),
    S.CANCELLATION_REQUESTED: ("recover", "feltdb.recovery"),
}
"""The one legal act after the winner's, on the state it left: a cancel of dead-lettered
work, or the recovery of an expired lease under a requested cancellation (both end
``CANCELLED``)."""
LOSER_CODES = {
    "WORKLOAD_CONFLICT",
    "WORKLOAD_CLAIM_INVALID",
    "WORKLOAD_STALE_FENCE",
    "WORKLOAD_TRANSITION_DENIED",
}


@pytest.mark.multiprocess
def test_complete_fail_cancel_timeout_and_sweeps_racing_leave_one_outcome(
    new_target: Callable[..., str], backend: str, racers: Racers
) -> None:
    """Per round, one workload running under ``w-old`` (lease to 160, execution deadline
    at 150, one attempt allowed), and six processes: ``complete`` and ``fail`` at 120,
    ``cancel`` and ``timeout`` at 120, ``enforce_deadlines(150)`` and ``recover_expired(160)``.
    Exactly one moves it out of ``RUNNING``; every other is refused with a conflict-like
    code, finds nothing to do, or is the one legal follow-up.
    """
    rounds = scaled(16, 400)
    target = new_target("finish")
    problems: list[str] = []
    totals = Counter[str]()
    seed = random.randrange(2**32)
    print(f"\nseed {seed}")
    with WorkloadStore.open(target) as store:
        for round in range(rounds):
            [fenced] = claimed_and_started(
                store,
                [f"f{round}"],
                now=100,
                lease_ms=60_000,
                timeouts=WorkloadTimeouts(execution_ms=50_000),
                retry_policy=WorkloadRetryPolicy(max_attempts=1),
            )
            id = fenced[0]
            started = len(store.get(id).execution_history)
            answers = racers.run(
                "finish_one",
                [
                    (target, i, op, fenced, seed + round, [120, 150, 160])
                    for i, op in enumerate(FINISHERS)
                ],
            )
            w = store.get(id)
            if w.state == S.CANCELLATION_REQUESTED:
                # Its holder confirms: no later round's sweep may find this lease (every
                # other state a round ends in has no lease and no deadline).
                store.confirm_cancel(id, fenced[1], "w-old", fenced[2], now=120)
            problems.extend(history_problems(w))
            after = w.execution_history[started:]
            totals["attempted"] += len(FINISHERS)
            if not after or after[0].from_state != S.RUNNING:
                totals["lost"] += 1
                problems.append(f"round {round}: nothing left RUNNING: {states(w)}")
                continue
            winner = FIRST_EVENT.get((after[0].to, after[0].actor))
            if winner is None:
                problems.append(f"round {round}: unknown first event {after[0]}")
                continue
            totals[f"won {winner}"] += 1
            expected = [*EVENTS_OF[winner]]
            follower = None
            follow_up = FOLLOW_UPS.get(expected[-1])
            if follow_up is not None and len(after) > len(expected):
                follower = follow_up[0]
                expected.append(S.CANCELLED)
                if after[-1].actor != follow_up[1]:
                    totals["illegal"] += 1
                    problems.append(f"round {round}: {after[-1]} is not {follower}'s")
            acts = {op: (outcome, answer) for op, outcome, answer in answers}
            if [event.to for event in after] != expected:
                totals["duplicated"] += 1
                problems.append(f"round {round}: {winner} won, then {states(w)[started:]}")
            moved_out = sum(1 for event in after if event.from_state in (S.RUNNING, S.CLAIMED))
            if moved_out != 1:
                totals["duplicated"] += moved_out - 1
                problems.append(f"round {round}: {moved_out} transitions out of the attempt")
            for op, (outcome, answer) in acts.items():
                acted = outcome == "ok" and (op not in ("deadline", "recover") or answer == id)
                if op in (winner, follower):
                    if not acted:
                        totals["illegal"] += 1
                        problems.append(f"round {round}: {op} committed, yet answered {answer}")
                    continue
                if acted:
                    totals["lost"] += 1  # acknowledged, not in the history
                    problems.append(f"round {round}: {op} answered {answer}, not committed")
                elif outcome == "refused":
                    totals["conflicts"] += 1
                    totals[f"refused {answer}"] += 1
                    if answer not in LOSER_CODES:
                        totals["illegal"] += 1
                        problems.append(f"round {round}: {op} refused {answer}")
                else:
                    totals["conflicts"] += 1  # a sweep that found its work already taken
            if winner == "complete":
                result = w.result
                if result is None or result.produced_by != "w-old" or w.state != S.SUCCEEDED:
                    totals["lost"] += 1
                    problems.append(f"round {round}: completion answered, result {result}")
            elif w.result is not None:
                totals["illegal"] += 1
                problems.append(f"round {round}: {winner} won, yet a result was recorded")
            if w.current_claim is not None and w.state != S.CANCELLATION_REQUESTED:
                problems.append(f"round {round}: {w.state} still holds {w.current_claim}")
    won = {op: totals[f"won {op}"] for op in FINISHERS}
    print(f"\nwinners over {rounds} rounds: {won}")
    report(
        "complete_fail_cancel_timeout_deadline_recover",
        backend,
        {
            "processes": len(FINISHERS),
            "rounds": rounds,
            "attempted": totals["attempted"],
            "winners": won,
            "conflicts": totals["conflicts"],
            "duplicated": totals["duplicated"],
            "lost": totals["lost"],
            "illegal": totals["illegal"],
        },
        problems,
    )


# ------------------------------------------------------- 6: two servers on one PostgreSQL

CLIENTS = 4
CLIENT_TIMEOUT_S = 300
"""The longest one client drains for before the test fails."""


@pytest.fixture
def two_servers(new_pg_url: Callable[..., str], tmp_path: Path) -> Iterator[list[Server]]:
    """Two ``feltdb serve`` processes on one new PostgreSQL database, one keyring."""
    url = new_pg_url("servers")
    keyring = Keyring.generate()
    keyring_path = tmp_path / "keyring.json"
    keyring.save(keyring_path)
    started: list[Server] = []
    try:
        for name in ("one", "two"):
            home = tmp_path / name
            home.mkdir()
            process, base, log = start_server(home, "--db", url, "--keyring", str(keyring_path))
            started.append(Server(base, keyring, process, log, "postgres", url))
        for server in started:
            wait_until_healthy(server.url, server.process, server.log)
        yield started
    finally:
        for server in started:
            stop(server.process)


def serve_as_client(
    servers: list[Server], index: int, seed: int, out: dict[str, Any]
) -> Callable[[], None]:
    """A client ``worker:w{index}`` that claims (``/v1/claims`` or ``/v1/batches/claims``,
    through either server at random) until nothing is claimable, starting each claim and
    failing or completing it through either server at random.
    """
    rng = random.Random(seed * 31 + index)
    headers = servers[0].headers(
        "app", subject=Subject.worker(f"w{index}"), capabilities=[CLAIM, WORK_CAPABILITY]
    )
    out.update(claims=[], completed=[], failed=[], errors=[])

    def run() -> None:
        clients = [httpx.Client(base_url=s.url, timeout=30.0, headers=headers) for s in servers]
        try:
            stop_at = time.monotonic() + CLIENT_TIMEOUT_S
            while time.monotonic() < stop_at:
                via = rng.choice(clients)
                if rng.random() < 0.5:
                    answer = via.post("/v1/claims", json={"lease_ms": 600_000})
                    if answer.status_code == 204:
                        return
                    got = [(answer.json(), False)] if answer.status_code == 200 else []
                else:
                    body: dict[str, Any] = {"limit": 3, "lease_ms": 600_000, "start": True}
                    answer = via.post("/v1/batches/claims", json=body)
                    got = (
                        [(item["claim"], True) for item in answer.json()["items"]]
                        if answer.status_code == 200
                        else []
                    )
                    if answer.status_code == 200 and not got:
                        return
                if answer.status_code != 200:
                    out["errors"].append(f"claim: {answer.status_code} {answer.text}")
                    return
                for claim, started in got:
                    id, fence = claim["workload_id"], claim["fencing_token"]
                    out["claims"].append((id, fence))
                    fenced: dict[str, Any] = {"claim_id": claim["claim_id"], "fencing_token": fence}
                    base = f"/v1/workloads/{id}"
                    if not started:
                        done = rng.choice(clients).post(f"{base}/start", json=fenced)
                        if done.status_code != 204:
                            out["errors"].append(f"start {id}@{fence}: {done.text}")
                            continue
                    if fence == 1 and children.fails_first_attempt(id):
                        body = {**fenced, "kind": "transient_connection", "error": "injected"}
                        done = rng.choice(clients).post(f"{base}/fail", json=body)
                        what = "failed"
                    else:
                        body = {
                            **fenced,
                            "result_id": children.result_id_of(id, fence),
                            "output": {"by": index},
                        }
                        done = rng.choice(clients).post(f"{base}/complete", json=body)
                        what = "completed"
                    if done.status_code != 200:
                        out["errors"].append(f"{what} {id}@{fence}: {done.text}")
                        continue
                    out[what].append((id, fence))
            out["errors"].append(f"still claiming after {CLIENT_TIMEOUT_S} s")
        finally:
            for client in clients:
                client.close()

    return run


@pytest.mark.multiprocess
@pytest.mark.postgres
def test_clients_racing_through_two_servers_on_one_postgresql_claim_once_per_fence(
    two_servers: list[Server],
) -> None:
    """M workloads submitted through both servers; four clients drain them through both
    (a third failed once and retried at once). Each (workload, fence) is claimed by one
    client, fences run 1, 2 without a gap, each completion is accepted once, and the
    store agrees with what the clients were answered.
    """
    size, rounds = scaled(60, 600), 1
    one, two = two_servers
    requester = one.headers("app", subject=Subject.agent("a1"), capabilities=[SUBMIT, READ])
    problems: list[str] = []
    ids: set[str] = set()
    with httpx.Client(timeout=30.0, headers=requester) as http:
        for n in range(size):
            server = (one, two)[n % 2]
            answer = http.post(
                f"{server.url}/v1/workloads",
                json={
                    "environment": "production",
                    "definition_id": "send",
                    "definition_revision": "r1",
                    "trigger": "manual",
                    "input": {"n": n},
                    "capability_snapshot": [WORK_CAPABILITY],
                    "idempotency_key": f"s-{n}",
                    "retry_policy": {"initial_delay_ms": 0},
                },
            )
            assert answer.status_code == 201, answer.text
            ids.add(answer.json()["workload_id"])
    seed = random.randrange(2**32)
    print(f"\nseed {seed}")
    outs: list[dict[str, Any]] = [{} for _ in range(CLIENTS)]
    began = time.perf_counter()
    run_threads([serve_as_client(two_servers, i, seed, outs[i]) for i in range(CLIENTS)])
    took = time.perf_counter() - began
    claimers: dict[tuple[str, int], list[int]] = defaultdict(list)
    completed = Counter[str]()
    for i, out in enumerate(outs):
        problems.extend(f"client {i}: {error}" for error in out["errors"])
        for id, fence in out["claims"]:
            claimers[(id, fence)].append(i)
        completed.update(id for id, _ in out["completed"])
    duplicated = sum(len(who) - 1 for who in claimers.values())
    problems.extend(
        f"{key} claimed by clients {who}" for key, who in claimers.items() if len(who) > 1
    )
    lost = 0
    with WorkloadStore.open(one.target) as store:
        for id in ids:
            w = store.get(id)
            problems.extend(history_problems(w))
            due = 2 if children.fails_first_attempt(id) else 1
            fences = sorted(fence for (i, fence) in claimers if i == id)
            if fences != list(range(1, due + 1)):
                problems.append(f"{id}: claimed at fences {fences}")
            if w.state != S.SUCCEEDED or completed[id] != 1 or w.result is None:
                lost += 1
                problems.append(f"{id}: {w.state}, completed {completed[id]} times")
                continue
            holders = [
                f"worker:w{claimers.get((id, a.fencing_token), ['?'])[0]}" for a in w.attempts
            ]
            if [a.worker_id for a in w.attempts] != holders:
                problems.append(f"{id}: the store's attempts name {w.attempts}, not {holders}")
            if w.result.result_id != children.result_id_of(id, due):
                problems.append(f"{id}: result {w.result.result_id}")
    claims = sum(len(who) for who in claimers.values())
    print(f"\ntwo servers: {claims} claims of {size} workloads in {took:.1f} s")
    report(
        "two_servers_claim_next",
        "postgres",
        {
            "servers": 2,
            "clients": CLIENTS,
            "rounds": rounds,
            "attempted": size,
            "claims": claims,
            "conflicts": len([e for out in outs for e in out["errors"]]),
            "duplicated": duplicated,
            "lost": lost,
        },
        problems,
    )
