"""SIGKILL at random moments, of writers, workers and servers, loses nothing acknowledged.

What is killed, per case (each on both backends: a SQLite file, and the PostgreSQL of
``FELTDB_TEST_PG``), :data:`KILLS` times (``scaled(4, 60)``: 17 kills per backend in
``make test``, 241 in ``make soak``), each kill a SIGKILL at a random moment:

- ``single``: an embedded writer and worker making single calls only
  (:mod:`support.crash_single_child`: ``admit`` with replays, ``claim_next``, ``start``,
  ``heartbeat``, ``execution_context``, ``checkpoint``, ``complete``, retryable ``fail``);
  each child first re-admits the key its predecessor may have had in flight;
- ``batch``: the embedded batch worker of :mod:`support.batch_child` (``admit_many``,
  ``claim_many(start=True)``, ``complete_many``), unchanged;
- ``client``: a client child (:mod:`support.crash_client_child`: ``feltdb.Client`` over
  HTTP, single and batch calls) of a real ``feltdb serve`` process on the store; the client
  is killed, the server keeps running;
- ``server``: the same client child, running throughout, while the *server* is killed
  under its load and restarted on the same store and port; the client sends its idempotent
  and replayable calls again until a restarted server answers them. The client is killed
  at the end.

One kill in ten (:data:`EARLY_KILL_RATE`) comes during start-up, before the process
acknowledged anything (for the server: before it is healthy); the others come a random
delay after it acknowledged something new.

Acknowledged means a child got the answer and appended it to its log
(:mod:`support.crash_log`) before doing anything else; for the HTTP cases, an HTTP answer
the client got. What is checked:

- after each kill, the store opens (SQLite's recovery of a killed writer, a fresh pool on
  PostgreSQL), and for a sample of what was acknowledged since the previous kill, every
  check below that does not need the whole store;
- at the end, on the whole store: every acknowledged admission is there exactly once (one
  workload per requester and key, the acknowledged id; a key acknowledged once is never
  answered "created" again); every acknowledged completion is ``SUCCEEDED`` with the
  acknowledged result id; every acknowledged checkpoint is there with its state hash;
  every acknowledged failure left its attempt ``FAILED``; at most one succeeded attempt and
  one completion event per workload; every history gap-free, each event a legal transition
  from the previous event's state, the workload in its last event's state; no call was
  refused;
- recovery: ``recover_expired`` past every lease, then a drain (``claim_many`` and
  ``complete_many``), leaves every workload ``SUCCEEDED`` (acknowledged results unchanged)
  and every check above still holding.

The counts are measured, recorded (``record("crash", case, backend, ...)``), then asserted
zero; :func:`test_the_audit_finds_what_it_looks_for` plants each kind of finding to show the
checks can fail. Printed per case: the seed (of the kill moments and the samples; the
children's timing makes no run repeatable), what was acknowledged, recovered and drained.

NOT covered: kills of PostgreSQL itself or of the machine (power loss: SQLite's and
PostgreSQL's fsync guarantees are taken as given, and page caches survive a SIGKILL);
several children at once on one store (``tests/reliability`` has other suites for
contention); leases that expire while their worker is alive (every lease here outlives the
run); deadlines, cancellation, approvals and dependencies; a server killed while a
long-poll waits.
"""

from __future__ import annotations

import os
import random
import re
import signal
import subprocess
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import msgspec
import pytest
from support import batch_child, crash_client_child, crash_single_child
from support.crash_log import whole_lines
from support.factories import CAPABILITIES, make_request
from support.server import WORK_CAPABILITY, free_port, serve_command, stop, wait_until_healthy
from support.soak import record, scaled

from feltdb import (
    AttemptStatus,
    Completion,
    Grant,
    ResourceScope,
    ResourceScopeKind,
    Subject,
    Workload,
    WorkloadError,
    WorkloadState,
    WorkloadStore,
    can_transition,
)
from feltdb.auth.policy import ALL_CAPABILITIES
from feltdb.auth.tokens import Keyring

pytestmark = pytest.mark.multiprocess

KILLS = scaled(4, 60)
"""SIGKILLs per case (the ``server`` case adds one of its client at the end)."""
KINDS = ("single", "batch", "client", "server")
KILL_DELAY_S = (0.0, 0.6)
"""How long after its next acknowledgement a process is killed: uniform in this."""
EARLY_KILL_RATE = 0.1
"""How often a process is killed during start-up instead, uniform in :data:`EARLY_DELAY_S`."""
EARLY_DELAY_S = (0.0, 0.5)
SERVER_EARLY_DELAY_S = (0.2, 2.0)
"""A server's start-up (imports, binding, opening the store) is longer: its early kills."""
PROGRESS_TIMEOUT_S = 60.0
"""A process that acknowledges nothing new for this long fails the test."""
SAMPLE = 100
"""At most this many workloads acknowledged since the previous kill are read after each."""
LEASE_MS = 600_000
TESTS = Path(batch_child.__file__).resolve().parents[1]
FAR = 10 * 365 * 24 * 3600
"""Recovery runs this far in the future: past every lease and every backoff."""

Problem = tuple[str, str, str]
"""A finding: its category (a figure's name), what it is about (a workload id, a key…: one
finding per category and subject, however many checks saw it), and what was seen."""

CATEGORIES = (
    "lost_admissions",
    "lost_completions",
    "lost_checkpoints",
    "lost_failures",
    "duplicated_admissions",
    "duplicated_successes",
    "illegal_histories",
    "refusals",
    "not_completed",
    "log_errors",
)
LOST = ("lost_admissions", "lost_completions", "lost_checkpoints", "lost_failures")


# --------------------------------------------------------------------------------- the log


@dataclass
class Ledger:
    """What the children's log says was acknowledged, and what it contradicts itself on."""

    admitted: dict[str, str] = field(default_factory=dict)
    """Idempotency key → the workload id its first acknowledgement answered."""
    completed: dict[str, str] = field(default_factory=dict)
    """Workload id → the acknowledged result id."""
    checkpoints: dict[str, dict[str, str]] = field(default_factory=lambda: defaultdict(dict))
    """Workload id → checkpoint id → state hash."""
    failures: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))
    """Workload id → the claim ids whose failure was acknowledged."""
    problems: set[Problem] = field(default_factory=set)
    unanswered: int = 0
    """Requests that got no answer (sent again, or abandoned, by the client)."""

    @classmethod
    def read(cls, log: Path) -> tuple[Ledger, list[list[str]]]:
        """The ledger of ``log``, and its whole lines."""
        ledger = cls()
        lines = whole_lines(log)
        for fields in lines:
            ledger.add(fields)
        return ledger, lines

    def add(self, fields: list[str]) -> None:
        kind = fields[0]
        if kind == "admitted":
            workload_id, key = fields[1], fields[2]
            how = fields[3] if len(fields) > 3 else None
            known = self.admitted.get(key)
            if known is None:
                self.admitted[key] = workload_id
            elif known != workload_id:
                self.problems.add(
                    ("duplicated_admissions", key, f"answered {known}, then {workload_id}")
                )
            elif how == "created":
                self.problems.add(("lost_admissions", key, "acknowledged, then created again"))
        elif kind == "completed":
            workload_id, result_id = fields[1], fields[2]
            known = self.completed.setdefault(workload_id, result_id)
            if known != result_id:
                self.problems.add(
                    ("duplicated_successes", workload_id, f"answered {known}, then {result_id}")
                )
        elif kind == "checkpointed":
            self.checkpoints[fields[1]][fields[2]] = fields[3]
        elif kind == "failed":
            self.failures[fields[1]].add(fields[2])
        elif kind == "refused":
            self.problems.add(("refusals", " ".join(fields[1:]), "refused"))
        elif kind == "unanswered":
            self.unanswered += 1
        else:
            self.problems.add(("log_errors", " ".join(fields), "a line of no known kind"))


def workload_ids(lines: Iterable[list[str]]) -> set[str]:
    """The workload ids the acknowledgements of ``lines`` name."""
    named = ("admitted", "completed", "checkpointed", "failed")
    return {fields[1] for fields in lines if fields[0] in named and fields[1] != "-"}


# --------------------------------------------------------------------------------- checks


def history_problem(workload: Workload) -> str | None:
    """What is wrong with ``workload``'s history, if anything."""
    events = workload.execution_history
    sequences = [event.sequence for event in events]
    if sequences != list(range(1, len(events) + 1)):
        return f"sequences {sequences}"
    previous: WorkloadState | None = None
    for event in events:
        if event.from_state is None:
            if previous is not None:
                return f"event {event.sequence} comes from no state"
        elif not can_transition(event.from_state, event.to):
            return f"event {event.sequence}: {event.from_state} -> {event.to} is not legal"
        elif previous is not None and event.from_state != previous:
            return f"event {event.sequence} leaves {event.from_state}, not {previous}"
        previous = event.to
    if previous != workload.state:
        return f"in {workload.state}, its history ends in {previous}"
    succeeded = sum(a.status == AttemptStatus.SUCCEEDED for a in workload.attempts)
    if succeeded <= 1 and (succeeded == 1) != (workload.state == WorkloadState.SUCCEEDED):
        return f"{succeeded} succeeded attempts in {workload.state}"
    if (workload.result is not None) != (workload.state == WorkloadState.SUCCEEDED):
        return f"result {workload.result} in {workload.state}"
    return None


def audit(
    stored: Mapping[str, Workload], ledger: Ledger, only: set[str] | None = None
) -> set[Problem]:
    """What ``stored`` (the whole store, or the workloads ``only`` names) contradicts of
    ``ledger``, and what is wrong in it whatever was acknowledged.
    """
    problems: set[Problem] = set()

    def relevant(workload_id: str) -> bool:
        return only is None or workload_id in only

    for key, workload_id in ledger.admitted.items():
        if relevant(workload_id):
            workload = stored.get(workload_id)
            if workload is None or workload.idempotency_key != key:
                problems.add(("lost_admissions", key, f"{workload_id} is not there"))
    if only is None:
        by_key = Counter((w.requested_by, w.idempotency_key) for w in stored.values())
        for (requester, key), count in by_key.items():
            if count > 1:
                problems.add(("duplicated_admissions", key, f"{count} workloads of {requester}"))
    for workload_id, result_id in ledger.completed.items():
        if not relevant(workload_id):
            continue
        workload = stored.get(workload_id)
        result = None if workload is None else workload.result
        if (
            workload is None
            or workload.state != WorkloadState.SUCCEEDED
            or result is None
            or result.result_id != result_id
        ):
            found = None if workload is None else (workload.state, result)
            problems.add(("lost_completions", workload_id, f"{result_id} acknowledged: {found}"))
    for workload_id, saved in ledger.checkpoints.items():
        if not relevant(workload_id):
            continue
        workload = stored.get(workload_id)
        there = {c.checkpoint_id: c.state_hash for c in workload.checkpoints} if workload else {}
        for checkpoint_id, state_hash in saved.items():
            if there.get(checkpoint_id) != state_hash:
                problems.add(("lost_checkpoints", checkpoint_id, f"{there.get(checkpoint_id)}"))
    for workload_id, claims in ledger.failures.items():
        if not relevant(workload_id):
            continue
        workload = stored.get(workload_id)
        attempts = {a.claim_id: a.status for a in workload.attempts} if workload else {}
        for claim_id in claims:
            if attempts.get(claim_id) != AttemptStatus.FAILED:
                problems.add(
                    ("lost_failures", claim_id, f"{workload_id}: {attempts.get(claim_id)}")
                )
    for workload in stored.values():
        succeeded = sum(a.status == AttemptStatus.SUCCEEDED for a in workload.attempts)
        completions = sum(e.to == WorkloadState.SUCCEEDED for e in workload.execution_history)
        if succeeded > 1 or completions > 1:
            problems.add(
                (
                    "duplicated_successes",
                    workload.workload_id,
                    f"{succeeded} succeeded attempts, {completions} completion events",
                )
            )
        wrong = history_problem(workload)
        if wrong is not None:
            problems.add(("illegal_histories", workload.workload_id, wrong))
    return problems


def drain(store: WorkloadStore, now: int) -> int:
    """Claim and complete everything claimable at ``now``; how many were completed."""
    done = 0
    while claims := store.claim_many(
        "t", "app", "worker:drain", CAPABILITIES, 50, now, LEASE_MS, start=True
    ):
        completions = [
            Completion(
                c.workload_id, c.claim_id, "worker:drain", c.fencing_token,
                f"result-{c.claim_id}", {"done": c.workload_id},
            )
            for c in claims
        ]  # fmt: skip
        answers = store.complete_many(completions, now)
        assert not [a for a in answers if isinstance(a, WorkloadError)], answers
        done += len(answers)
    return done


# --------------------------------------------------------------------------------- processes


def child_environment() -> dict[str, str]:
    """This environment without any FELTDB_* setting, with ``tests/`` importable."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("FELTDB_")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(TESTS), env.get("PYTHONPATH")]))
    return env


def tail(path: Path, size: int = 3000) -> str:
    return path.read_text(encoding="utf-8", errors="replace")[-size:] if path.exists() else ""


def spawn(argv: list[str], errors: Path) -> subprocess.Popen[bytes]:
    with errors.open("ab") as output:
        return subprocess.Popen(
            argv, stdout=subprocess.DEVNULL, stderr=output, env=child_environment()
        )


def sigkill(process: subprocess.Popen[bytes], what: str, output: Path) -> None:
    """SIGKILL ``process``, which must still be running, and reap it."""
    assert process.poll() is None, f"{what} exited by itself ({process.returncode}): {tail(output)}"
    process.send_signal(signal.SIGKILL)
    assert process.wait(timeout=30) == -signal.SIGKILL, f"{what}: {tail(output)}"


def reap(process: subprocess.Popen[bytes] | None) -> None:
    """Kill ``process`` if it still runs (cleanup after a failure)."""
    if process is not None and process.poll() is None:
        process.kill()
        process.wait(timeout=30)


def size_of(path: Path) -> int:
    return path.stat().st_size if path.exists() else 0


def await_progress(
    log: Path, before: int, watched: Iterable[tuple[subprocess.Popen[bytes], str, Path]]
) -> None:
    """Wait until ``log`` grows past ``before`` bytes, every watched process alive."""
    deadline = time.monotonic() + PROGRESS_TIMEOUT_S
    watched = list(watched)
    while size_of(log) <= before:
        for process, what, output in watched:
            assert process.poll() is None, f"{what} exited ({process.returncode}): {tail(output)}"
        assert time.monotonic() < deadline, f"nothing acknowledged in {PROGRESS_TIMEOUT_S}s"
        time.sleep(0.01)


def worker_token(keyring: Keyring) -> str:
    """A worker's token for application ``app`` of tenant ``t``, valid for a week."""
    now = int(time.time())
    grant = Grant(
        id="g-crash",
        issuer=Subject.human("issuer"),
        subject=Subject.worker("crash"),
        tenant_id="t",
        application_id="app",
        capabilities=frozenset({*ALL_CAPABILITIES, WORK_CAPABILITY}),
        resources=[ResourceScope(kind=ResourceScopeKind.WORKLOAD, uri="flow://app/workloads/*")],
        issued_at=now - 60,
        expires_at=now + 7 * 24 * 3600,
    )
    return keyring.sign(grant)


class ServerProcess:
    """``feltdb serve`` on ``target``, always on the same port and keyring, so that it can
    be killed and started again under a client that keeps its URL and token.
    """

    def __init__(self, home: Path, target: str) -> None:
        self.home = home
        self.target = target
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        keyring = Keyring.generate()
        self.keyring_path = home / "keyring.json"
        keyring.save(self.keyring_path)
        self.token_path = home / "token"
        self.token_path.write_text(worker_token(keyring), encoding="utf-8")
        self.log = home / "server.log"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self, *, healthy: bool = True) -> None:
        command = serve_command(
            "--db", self.target, "--keyring", str(self.keyring_path), "--port", str(self.port)
        )
        with self.log.open("ab") as output:
            self.process = subprocess.Popen(
                command,
                stdout=output,
                stderr=subprocess.STDOUT,
                env=child_environment(),
                cwd=self.home,
            )
        if healthy:
            wait_until_healthy(self.url, self.process, self.log)

    def kill(self) -> None:
        assert self.process is not None
        sigkill(self.process, "the server", self.log)
        self.process = None

    def stop(self) -> None:
        if self.process is not None:
            stop(self.process)
            self.process = None


# --------------------------------------------------------------------------------- a case


@dataclass
class Crash:
    """One case's run: its kills, and what the checks after each kill found."""

    kind: str
    target: str
    home: Path
    rng: random.Random
    log: Path
    kills: int = 0
    server_kills: int = 0
    early_kills: int = 0
    checked_lines: int = 0
    problems: set[Problem] = field(default_factory=set)
    reopen_s: list[float] = field(default_factory=list)

    def kill_moment(self) -> float | None:
        """The delay of the next kill after an acknowledgement; ``None``: an early kill."""
        if self.rng.random() < EARLY_KILL_RATE:
            return None
        return self.rng.uniform(*KILL_DELAY_S)

    def kill_child(
        self,
        argv: list[str],
        errors: Path,
        watched: list[tuple[subprocess.Popen[bytes], str, Path]],
    ) -> None:
        """Start a child, kill it at a random moment."""
        delay = self.kill_moment()
        before = size_of(self.log)
        child = spawn(argv, errors)
        try:
            if delay is None:
                self.early_kills += 1
                time.sleep(self.rng.uniform(*EARLY_DELAY_S))
            else:
                await_progress(self.log, before, [(child, "the child", errors), *watched])
                time.sleep(delay)
            sigkill(child, "the child", errors)
            self.kills += 1
        finally:
            reap(child)

    def check_after_kill(self) -> None:
        """Open the store, and read a sample of what was acknowledged since the last check."""
        ledger, lines = Ledger.read(self.log)
        fresh = workload_ids(lines[self.checked_lines :])
        self.checked_lines = len(lines)
        sample = set(self.rng.sample(sorted(fresh), min(SAMPLE, len(fresh))))
        started = time.monotonic()
        with WorkloadStore.open(self.target) as store:
            self.reopen_s.append(time.monotonic() - started)
            stored: dict[str, Workload] = {}
            for workload_id in sample:
                try:
                    stored[workload_id] = store.get(workload_id)
                except WorkloadError as error:
                    if error.code != "WORKLOAD_NOT_FOUND":
                        raise
        found = audit(stored, ledger, sample)
        self.problems |= {(c, s, f"after kill {self.kills}: {d}") for c, s, d in found}

    # ----------------------------------------------------------------------- the kinds

    def run_embedded(self) -> None:
        """``single`` or ``batch``: an embedded child, killed and started again."""
        for number in range(KILLS):
            round_id = f"r{number}"
            errors = self.home / f"child.{round_id}.err"
            if self.kind == "single":
                argv = [
                    sys.executable,
                    crash_single_child.__file__,
                    self.target,
                    str(self.log),
                    round_id,
                ]
                if number:
                    argv.append(in_flight_key(self.log, f"r{number - 1}"))
            else:
                argv = [sys.executable, batch_child.__file__, self.target, str(self.log), round_id]
            self.kill_child(argv, errors, [])
            self.check_after_kill()

    def run_client(self) -> None:
        """``client``: a client child of a running server, killed and started again."""
        server = ServerProcess(self.home, self.target)
        server.start()
        try:
            for number in range(KILLS):
                round_id = f"r{number}"
                errors = self.home / f"client.{round_id}.err"
                argv = self.client_argv(server, round_id)
                assert server.process is not None
                self.kill_child(argv, errors, [(server.process, "the server", server.log)])
                self.check_after_kill()
        finally:
            server.stop()

    def run_server(self) -> None:
        """``server``: the server is killed under a client that runs throughout, and
        started again on the same store; at the end, the client is killed.
        """
        server = ServerProcess(self.home, self.target)
        errors = self.home / "client.err"
        client: subprocess.Popen[bytes] | None = None
        try:
            for _ in range(KILLS):
                delay = self.kill_moment()
                server.start(healthy=delay is not None)
                if client is None:
                    client = spawn(self.client_argv(server, "s"), errors)
                if delay is None:  # during its start-up, before it is healthy
                    self.early_kills += 1
                    time.sleep(self.rng.uniform(*SERVER_EARLY_DELAY_S))
                else:
                    assert server.process is not None
                    watched = [
                        (client, "the client", errors),
                        (server.process, "the server", server.log),
                    ]
                    await_progress(self.log, size_of(self.log), watched)
                    time.sleep(delay)
                server.kill()
                self.kills += 1
                self.server_kills += 1
                self.check_after_kill()
            server.start()
            assert client is not None and server.process is not None
            watched = [(client, "the client", errors), (server.process, "the server", server.log)]
            await_progress(self.log, size_of(self.log), watched)
            time.sleep(self.rng.uniform(*KILL_DELAY_S))
            sigkill(client, "the client", errors)
            self.kills += 1
        finally:
            reap(client)
            server.stop()
        self.check_after_kill()

    def client_argv(self, server: ServerProcess, round_id: str) -> list[str]:
        return [
            sys.executable, crash_client_child.__file__, server.url, str(server.token_path),
            str(self.log), round_id,
        ]  # fmt: skip


def in_flight_key(log: Path, round_id: str) -> str:
    """The key the child of ``round_id`` admitted after its last acknowledged one (the one
    it may have had in flight when it was killed).
    """
    pattern = re.compile(rf"{re.escape(round_id)}-(\d+)")
    numbers = [
        int(match.group(1))
        for fields in whole_lines(log)
        if fields[0] == "admitted" and (match := pattern.fullmatch(fields[2]))
    ]
    return f"{round_id}-{max(numbers) + 1 if numbers else 0}"


@pytest.mark.parametrize("kind", KINDS)
def test_a_sigkill_loses_nothing_acknowledged(
    kind: str, backend: str, new_target: Callable[..., str], tmp_path: Path
) -> None:
    target = new_target("crash")
    WorkloadStore.open(target).close()  # the schema, before any child races to make it
    seed = random.randrange(2**32)
    crash = Crash(kind, target, tmp_path, random.Random(seed), tmp_path / "acknowledged.log")
    began = time.monotonic()
    runs: dict[str, Callable[[], None]] = {
        "single": crash.run_embedded,
        "batch": crash.run_embedded,
        "client": crash.run_client,
        "server": crash.run_server,
    }
    runs[kind]()
    assert crash.kills >= KILLS

    ledger, _ = Ledger.read(crash.log)
    with WorkloadStore.open(target) as store:
        stored = {w.workload_id: w for w in store.list("t", "app")}
        before = audit(stored, ledger)
        # Committed, but the kill came before the log: not acknowledged, not lost either.
        unlogged = sum(
            w.state == WorkloadState.SUCCEEDED and w.workload_id not in ledger.completed
            for w in stored.values()
        )
        # What a killed child held is recovered once its lease is past, then drained.
        far = int(time.time()) + FAR
        recovering = time.monotonic()
        recovered = store.recover_expired(now=far)
        drained = drain(store, far)
        recovery_s = time.monotonic() - recovering
        final = {w.workload_id: w for w in store.list("t", "app")}
    after = audit(final, ledger)
    after |= {
        ("not_completed", w.workload_id, f"{w.state} after recovery")
        for w in final.values()
        if w.state != WorkloadState.SUCCEEDED
    }
    after |= {("lost_admissions", wid, "gone in recovery") for wid in set(stored) - set(final)}
    problems = ledger.problems | crash.problems | before | after
    counts = Counter(category for category, _ in {(c, s) for c, s, _ in problems})
    figures = {category: counts[category] for category in CATEGORIES}
    record(
        "crash",
        kind,
        backend,
        kills=crash.kills,
        server_kills=crash.server_kills,
        early_kills=crash.early_kills,
        acknowledged_admissions=len(ledger.admitted),
        acknowledged_completions=len(ledger.completed),
        acknowledged_checkpoints=sum(len(saved) for saved in ledger.checkpoints.values()),
        acknowledged_failures=sum(len(claims) for claims in ledger.failures.values()),
        workloads=len(stored),
        unacknowledged_completions=unlogged,
        unanswered_requests=ledger.unanswered,
        lost=sum(counts[category] for category in LOST),
        **figures,
        recovered=len(recovered),
        drained=drained,
        recovery_s=round(recovery_s, 3),
        max_reopen_s=round(max(crash.reopen_s, default=0.0), 3),
        wall_s=round(time.monotonic() - began, 1),
        seed=seed,
        command="make soak",
    )
    print(
        f"\n{backend} {kind}: seed {seed}, {crash.kills} kills ({crash.server_kills} of the "
        f"server, {crash.early_kills} during start-up); {len(ledger.admitted)} admissions, "
        f"{len(ledger.completed)} completions acknowledged of {len(stored)} workloads "
        f"({unlogged} more completed unacknowledged, {ledger.unanswered} requests unanswered); "
        f"{len(recovered)} recovered, {drained} drained in {recovery_s:.2f}s"
    )
    shown = "\n".join(f"{c} {s}: {d}" for c, s, d in sorted(problems)[:20])
    assert not problems, f"{dict(counts)} (seed {seed}):\n{shown}"


def test_the_audit_finds_what_it_looks_for(tmp_path: Path) -> None:
    """The checks above are not vacuous: each kind of loss, duplicate and illegal history
    planted in a ledger or a store is found, and a faithful ledger finds nothing.
    """
    with WorkloadStore.open(str(tmp_path / "audit.db")) as store:
        now = int(time.time())
        done, _ = store.admit(make_request(idempotency_key="done", created_at=now))
        waiting, _ = store.admit(make_request(idempotency_key="waiting", created_at=now))
        claim = store.claim(done.workload_id, "worker:a", CAPABILITIES, now, LEASE_MS)
        token = claim.fencing_token
        store.start(done.workload_id, claim.claim_id, "worker:a", token, now)
        saved = store.checkpoint(done.workload_id, claim.claim_id, "worker:a", token, {}, now)
        store.complete(done.workload_id, claim.claim_id, "worker:a", token, "res", {}, now=now)
        stored = {w.workload_id: w for w in store.list("t", "app")}
    d, w = done.workload_id, waiting.workload_id

    def ledger_of(*lines: str) -> Ledger:
        ledger = Ledger()
        for line in lines:
            ledger.add(line.split(" "))
        return ledger

    faithful = ledger_of(
        f"admitted {d} done created",
        f"admitted {w} waiting created",
        f"admitted {w} waiting replayed",
        f"checkpointed {d} {saved.checkpoint_id} {saved.state_hash}",
        f"completed {d} res",
        "unanswered complete None",
    )
    assert not faithful.problems and not audit(stored, faithful)
    assert not audit(stored, faithful, only={w})

    planted = ledger_of(
        "admitted workload_0 missing created",
        f"admitted {d} done created",
        f"admitted {d} done created",
        f"admitted {w} done replayed",
        f"completed {w} res",
        f"completed {d} res",
        f"completed {d} other",
        f"checkpointed {d} checkpoint_x hash",
        f"failed {d} claim_x READY",
        f"refused {d} WORKLOAD_STALE_FENCE complete",
        "nonsense",
    )
    history = list(stored[d].execution_history)
    del history[1]
    broken = msgspec.structs.replace(stored[d], execution_history=history)
    twice = msgspec.structs.replace(stored[w], attempts=[*stored[d].attempts, *stored[d].attempts])
    tampered = {d: broken, w: twice}
    found = Counter(c for c, _, _ in audit(tampered, planted) | planted.problems)
    assert set(found) == set(CATEGORIES) - {"not_completed"}, found
