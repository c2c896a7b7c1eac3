"""Faults injected under load: what is refused, what survives, how soon the load recovers.

Each case runs a load (threads admitting work, and workers claiming and completing it,
noting every acknowledged operation in a :class:`~support.fault_load.Ledger`), injects a
fault, and then states and asserts: operations ``attempted`` (distinct admissions, by
idempotency key, and completions, by result id: a resend is not another one),
``acknowledged``, ``lost`` (an acknowledged admission not stored once, an acknowledged
completion not ``SUCCEEDED`` with the result it was answered: must be 0), ``duplicated``
(a key stored twice, a workload with two succeeded attempts or two acknowledged results:
must be 0), and ``recovery_s``: seconds from the fault's end until the load was
acknowledged again (an admission and a completion both; the worst of the case's faults).
The figures are recorded with :func:`support.soak.record` (suite ``faults``) before they
are asserted. Sizes are bounded in ``make test`` and long in ``make soak``
(:func:`support.soak.scaled`).

1. ``disk-full`` (SQLite): the store file lives on a 2 MiB tmpfs (or, where mounting is not
   permitted, in a child process under ``RLIMIT_FSIZE``; the record's ``method`` says
   which; ``disk-full-rlimit`` runs the size limit everywhere). Injected: the load fills
   the space (after a 512 KiB filler), repeatedly; space is freed by deleting the filler,
   then by remounting 512 KiB bigger (more when that is not room enough: once the WAL
   reaches SQLite's checkpoint threshold of 4 MiB, the checkpoint needs room for every
   page it copies; counted as ``extra_frees``, reached in the soak only); under the limit,
   by lowering and raising it. Checked: every refusal is a ``WorkloadError`` of code
   ``WORKLOAD_STORAGE_FAILURE`` (no other exception, no call slower than the busy
   timeout, no load thread hung), ``PRAGMA integrity_check`` is ``ok``, every
   acknowledged admission is readable, and the *same open store* works again once space
   is freed, then drains. Not covered: the disk filling under several processes,
   ``fsync`` errors (tmpfs has none), a corrupted or truncated file, a full disk under a
   ``feltdb serve``.
2. ``pg-terminate-backends`` (PostgreSQL): ``pg_terminate_backend`` of every session of the
   database of a running ``feltdb serve`` (its pool and its wake-up listener), repeatedly,
   under HTTP load (the worker SDK over :class:`~feltdb.client.Client`). Checked: refusals
   are ``WORKLOAD_STORAGE_FAILURE`` answered ``503`` (or a report whose lease the outage
   cost, run again by the authority's recovery), never a ``500``; the server's log holds
   no traceback but of a storage failure (counted as ``logged_storage_failures``; the
   maintenance loop says an outage in a line without one, so the soak counts 0); the
   server recovers by itself. Not covered: a network partition (a peer that vanishes
   without closing the socket), a server that refuses new connections.
3. ``pg-restart`` (PostgreSQL, a cluster of the test's own): ``pg_ctl restart -m fast``, and
   a crash (``stop -m immediate``, a second down, then start), under embedded load: stores
   opened on the database, worker-SDK workers over :class:`~feltdb.client.LocalClient`.
   Checked: workers resume without being restarted, nothing acknowledged is lost (commits
   are durable: ``fsync=on``). Not covered: a failover to another host, an outage longer
   than the pool's timeout (an operation waits 10 s for a connection before it is
   refused), the shared ``FELTDB_TEST_PG`` cluster (never restarted).
4. ``server-kill`` (both backends): the ``feltdb serve`` process SIGKILLed and started again
   on the same port, under HTTP load with worker-SDK workers attached. Checked: workers and
   submitters resume on their own, nothing acknowledged is lost, no duplicate success
   (claims whose answers were lost are recovered once their lease ends and run again).
   Not covered: a machine crash (the page cache lost: SQLite's ``synchronous=FULL`` is not
   exercised here), several servers on one store.
5. ``retry-storm`` (both backends): every workload of a batch fails retryably at once, on
   four worker threads, then again each time it is retried, up to its budget; time is
   passed as ``now``. Checked: no retry is claimable before its backoff
   (``initial_delay_ms`` doubling to ``max_delay_ms``), every retry is claimable at it,
   ``attempt_count`` never exceeds ``max_attempts`` (then ``DEAD_LETTER``), one success
   each. ``recovery_s`` here is the store's own time (``now``) from the storm until the
   last workload was settled. Not covered: jitter (the policy has none), retries under
   wall-clock time.
   ``priority-order`` (both backends): what ``claim_next`` promises is strict order:
   eligible work (``not_before``/retry backoff passed), highest ``priority`` first, then
   oldest ``created_at``, then key. It makes **no anti-starvation promise**: a steady
   stream of higher-priority work defers lower-priority work for as long as it lasts
   (asserted: no low-priority claim during the stream), and low-priority work is claimed,
   oldest first, once the higher-priority work is drained; work that is not yet eligible
   is passed over whatever its priority. ``recovery_s`` is the store's time from the
   stream's end to the first low-priority claim. Not covered: ordering among concurrent
   claimers (PostgreSQL's ``SKIP LOCKED`` hands a claimer the best *unlocked* row).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest
from support import fault_disk
from support.factories import CAPABILITIES, make_request
from support.fault_load import (
    STORAGE_FAILURE,
    Audit,
    Ledger,
    Load,
    acceptable_refusals,
    audit,
    sdk_worker,
    wait_until_settled,
)
from support.fault_procs import RestartableServer, own_cluster, pg_ctl, terminate_sessions
from support.server import WORK_CAPABILITY, Server, submission
from support.soak import record, scaled

from feltdb import (
    AttemptStatus,
    BackoffPolicy,
    WorkloadError,
    WorkloadRetryPolicy,
    WorkloadState,
    WorkloadStore,
)
from feltdb.auth import Subject
from feltdb.auth.policy import CLAIM
from feltdb.auth.scope import Scope
from feltdb.client import Client, LocalClient
from feltdb.records.workload import Workload

SUITE = "faults"
COMMAND = "make soak"
LEASE_MS = 4000
"""The workers' lease: longer than an outage here, short enough that a claim whose answer
an outage lost is recovered (and run again) within the drain."""
RECOVERY_TIMEOUT_S = 45.0
"""A load not acknowledged again this long after a fault ended: the store never recovered."""
SETTLE_TIMEOUT_S = 60.0
"""How long the workers have to drain the load after the faults (leases included)."""
WARM_UP = 20
"""Completions acknowledged before the first fault (the load is running)."""
BETWEEN = 10
"""Completions acknowledged between two faults (the load runs healthy again)."""
TESTS = Path(__file__).resolve().parents[1]


# --- what every case asserts --------------------------------------------------------------


def recorded(case: str, backend: str, found: Audit, recovery_s: float | None, **extra: Any) -> None:
    """Record the case's measured figures (before anything is asserted on them)."""
    record(SUITE, case, backend, **found.figures(), recovery_s=recovery_s, command=COMMAND, **extra)
    print(
        f"\n{case} [{backend}]: attempted {found.attempted}, acknowledged {found.acknowledged}, "
        f"lost {found.lost}, duplicated {found.duplicated}, recovery "
        f"{'-' if recovery_s is None else f'{recovery_s:.3f}'} s; "
        + ", ".join(f"{name} {value}" for name, value in extra.items())
    )


def assert_clean(
    found: Audit, ledger: Ledger, load: Load | None = None, *, statuses: tuple[str, ...] = ("-",)
) -> None:
    """Nothing lost or duplicated, no untranslated exception, no refusal but the store's
    failure answered with one of ``statuses`` (``"-"``: no HTTP answer, or no HTTP; see
    :func:`~support.fault_load.acceptable_refusals`) or a lease the outage cost, and no
    load thread that died or hung.
    """
    assert found.lost == 0, found.problems
    assert found.duplicated == 0, found.problems
    assert not found.problems, found.problems
    assert not ledger.untranslated, ledger.untranslated[:3]
    unexpected = ledger.unexpected_refusals(acceptable_refusals(*statuses))
    assert not unexpected, dict(ledger.refusals)
    if load is not None:
        assert not load.failures, load.failures


def worst(recoveries: list[float | None]) -> float | None:
    return max((r for r in recoveries if r is not None), default=None)


def http_load(server: Server, ledger: Ledger, application: str, prefix: str) -> Load:
    """Two submitters (one :class:`Client` each) and two worker-SDK workers over HTTP."""
    load = Load(ledger, prefix)
    for _ in range(2):
        client = load.own(
            Client(server.url, server.token(application, subject=Subject.human("ops")))
        )

        def admit(key: str, client: Client = client) -> Workload:
            return client.admit(**submission(key, input={"key": key}))[0]

        load.add_submitter(admit)
    for number in range(2):
        token = server.token(
            application, subject=Subject.worker(f"w{number}"), capabilities={CLAIM, WORK_CAPABILITY}
        )
        client = load.own(Client(server.url, token))
        load.add_worker(
            sdk_worker(client, ledger, capabilities={WORK_CAPABILITY}, lease_ms=LEASE_MS)
        )
    return load


# --- 1. a full disk under SQLite ------------------------------------------------------------


@pytest.mark.multiprocess
@pytest.mark.parametrize("method", ["tmpfs", "rlimit"])
def test_a_full_disk_is_refused_as_a_storage_failure_and_the_store_works_once_freed(
    tmp_path: Path, method: str
) -> None:
    # "tmpfs" falls back to the size limit where mounting is not permitted; "rlimit" runs
    # the limit everywhere, so that the fallback is exercised too.
    directory = tmp_path / "small"
    directory.mkdir()
    mounted = method == "tmpfs" and fault_disk.mount_tmpfs(directory, fault_disk.SIZE_BYTES)
    out = tmp_path / "figures.json"
    rounds, hold_s = scaled(3, 8), scaled(1, 4) / 2
    env = {k: v for k, v in os.environ.items() if not k.startswith("FELTDB_")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(TESTS), env.get("PYTHONPATH")]))
    try:
        child = subprocess.run(
            [
                sys.executable,
                fault_disk.__file__,
                "tmpfs" if mounted else "rlimit",
                str(directory),
                str(out),
                str(rounds),
                str(hold_s),
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        assert child.returncode == 0, f"the child failed:\n{child.stdout}{child.stderr}"
        figures = json.loads(out.read_text(encoding="utf-8"))
        integrity_after = fault_disk.integrity(directory / "work.db")
    finally:
        if mounted:
            fault_disk.unmount(directory)
    found = Audit(
        figures["attempted"], figures["acknowledged"], figures["lost"], figures["duplicated"],
        figures["stored"], figures["states"].get("SUCCEEDED", 0), figures["audit_problems"],
    )  # fmt: skip
    recorded(
        "disk-full" if method == "tmpfs" else "disk-full-rlimit", "sqlite", found,
        figures["recovery_s"], method=figures["method"], rounds=rounds,
        extra_frees=figures["extra_frees"], storage_failures=figures["storage_failures"],
        slowest_call_s=round(figures["slowest_call_s"], 3), refusals=figures["refusals"],
    )  # fmt: skip
    assert found.lost == 0 and found.duplicated == 0, figures["audit_problems"]
    assert not figures["problems"], figures["problems"]
    assert not figures["untranslated"], figures["untranslated"][:3]
    assert not figures["thread_failures"], figures["thread_failures"]
    assert not figures["unexpected_refusals"], figures["refusals"]
    assert figures["storage_failures"] >= rounds  # the full disk was refused each round
    assert figures["slowest_call_s"] < fault_disk.SLOWEST_CALL_S  # refused, not waited on
    assert figures["integrity"] == ["ok"] and integrity_after == ["ok"]
    assert not figures["unreadable"], figures["unreadable"]
    assert figures["states"] == {"SUCCEEDED": figures["stored"]}  # drained once freed
    assert all(r is not None for r in figures["recoveries_s"])


# --- 2. every PostgreSQL session of a serving server terminated ------------------------------


@pytest.mark.multiprocess
def test_terminated_postgres_sessions_are_refused_503_and_the_server_recovers_by_itself(
    new_pg_url: Callable[..., str], tmp_path: Path
) -> None:
    url = new_pg_url("work")
    kills = scaled(5, 60)
    ledger = Ledger()
    with RestartableServer(tmp_path, url, "postgres", "--maintenance-interval", "0.2") as served:
        load = http_load(served.start(), ledger, "faults", "term")
        load.start()
        recoveries: list[float | None] = []
        ended: list[int] = []
        try:
            assert ledger.wait_for("completed", WARM_UP, RECOVERY_TIMEOUT_S), served.logs()
            for _ in range(kills):
                ended.append(terminate_sessions(url))
                recoveries.append(ledger.recovery_after(time.monotonic(), RECOVERY_TIMEOUT_S))
                assert recoveries[-1] is not None, f"no progress after the kill: {served.logs()}"
                ledger.wait_for("completed", ledger.count("completed") + BETWEEN, 30)
            load.stop_submitting()
            with WorkloadStore.open(url) as store:
                states = wait_until_settled(store, SETTLE_TIMEOUT_S)
                load.stop()
                found = audit(ledger, store.list("t", "faults"))
        finally:
            load.stop()
        defects, logged_failures = served.defects()
    recorded(
        "pg-terminate-backends", "postgres", found, worst(recoveries), kills=kills,
        sessions_ended=sum(ended), storage_failures=ledger.refused_count(STORAGE_FAILURE),
        abandoned_reports=ledger.abandoned(), executions=sum(ledger.executions.values()),
        logged_storage_failures=logged_failures, refusals=dict(ledger.refusals),
    )  # fmt: skip
    assert_clean(found, ledger, load, statuses=("503",))  # the server answered every call
    assert min(ended) >= 1  # the server's sessions were there to be ended, each time
    assert not defects, "\n".join(defects)  # no traceback in the server's log but a storage failure
    assert states == {"SUCCEEDED": found.stored}


# --- 3. PostgreSQL restarted under load --------------------------------------------------------


@pytest.mark.postgres
@pytest.mark.multiprocess
def test_postgres_restarted_under_load_and_workers_resume_without_a_restart() -> None:
    restarts = scaled(2, 12)
    ledger = Ledger()
    with own_cluster() as cluster, ExitStack() as stores:
        submitting = stores.enter_context(WorkloadStore.open(cluster.url))
        working = stores.enter_context(WorkloadStore.open(cluster.url))
        load = Load(ledger, "restart")
        for _ in range(2):

            def admit(key: str) -> Workload:
                request = make_request(
                    idempotency_key=key, input={"key": key}, created_at=int(time.time())
                )
                return submitting.admit(request)[0]

            load.add_submitter(admit)
        for number in range(2):
            client = LocalClient(
                working, Scope("t", "app"), Subject.worker(f"w{number}"),
                capabilities=CAPABILITIES, maintenance_interval_s=0.5,
            )  # fmt: skip
            load.add_worker(
                sdk_worker(client, ledger, capabilities=CAPABILITIES, lease_ms=LEASE_MS)
            )
        load.start()
        recoveries: list[float | None] = []
        downtimes: list[float] = []
        kinds: Counter[str] = Counter()
        try:
            assert ledger.wait_for("completed", WARM_UP, RECOVERY_TIMEOUT_S)
            for number in range(restarts):
                began = time.monotonic()
                if number % 2 == 0:
                    kinds["fast restart"] += 1
                    pg_ctl(cluster, "-m", "fast", "-w", "-t", "60", "restart")
                else:
                    kinds["crash and start"] += 1
                    pg_ctl(cluster, "-m", "immediate", "-w", "-t", "60", "stop")
                    threading.Event().wait(1.0)  # down for a second: the load is refused
                    pg_ctl(cluster, "-w", "-t", "60", "restart")
                ended = time.monotonic()
                downtimes.append(ended - began)
                recoveries.append(ledger.recovery_after(ended, RECOVERY_TIMEOUT_S))
                assert recoveries[-1] is not None, f"no progress after the restart: {cluster.log()}"
                ledger.wait_for("completed", ledger.count("completed") + BETWEEN, 30)
            load.stop_submitting()
            states = wait_until_settled(submitting, SETTLE_TIMEOUT_S)
            load.stop()
            found = audit(ledger, submitting.list("t", "app"))
        finally:
            load.stop()
    recorded(
        "pg-restart", "postgres", found, worst(recoveries), restarts=dict(kinds),
        downtime_s=round(max(downtimes), 3), storage_failures=ledger.refused_count(STORAGE_FAILURE),
        abandoned_reports=ledger.abandoned(), executions=sum(ledger.executions.values()),
        refusals=dict(ledger.refusals),
    )  # fmt: skip
    assert_clean(found, ledger, load)
    assert ledger.refused_count(STORAGE_FAILURE) > 0  # the outage was felt, and refused
    assert states == {"SUCCEEDED": found.stored}


# --- 4. the server SIGKILLed and started again ---------------------------------------------


@pytest.mark.multiprocess
def test_a_server_killed_and_restarted_under_load_loses_nothing_acknowledged(
    backend: str, new_target: Callable[..., str], tmp_path: Path
) -> None:
    target = new_target("work")
    kills = scaled(2, 20)
    ledger = Ledger()
    with RestartableServer(tmp_path, target, backend, "--maintenance-interval", "0.2") as served:
        load = http_load(served.start(), ledger, "faults", "kill")
        load.start()
        recoveries: list[float | None] = []
        downtimes: list[float] = []
        try:
            assert ledger.wait_for("completed", WARM_UP, RECOVERY_TIMEOUT_S), served.logs()
            for _ in range(kills):
                killed = time.monotonic()
                served.kill()
                served.start()
                healthy = time.monotonic()
                downtimes.append(healthy - killed)
                recoveries.append(ledger.recovery_after(healthy, RECOVERY_TIMEOUT_S))
                assert recoveries[-1] is not None, f"no progress after the restart: {served.logs()}"
                ledger.wait_for("completed", ledger.count("completed") + BETWEEN, 30)
            load.stop_submitting()
            with WorkloadStore.open(target) as store:
                states = wait_until_settled(store, SETTLE_TIMEOUT_S)
                load.stop()
                found = audit(ledger, store.list("t", "faults"))
        finally:
            load.stop()
        defects, logged_failures = served.defects()
    recorded(
        "server-kill", backend, found, worst(recoveries), kills=kills,
        downtime_s=round(max(downtimes), 3), storage_failures=ledger.refused_count(STORAGE_FAILURE),
        abandoned_reports=ledger.abandoned(), executions=sum(ledger.executions.values()),
        logged_storage_failures=logged_failures, refusals=dict(ledger.refusals),
    )  # fmt: skip
    assert_clean(found, ledger, load, statuses=("-", "503"))
    assert ledger.refused_count(STORAGE_FAILURE) > 0  # the outage was felt, and refused
    assert not defects, "\n".join(defects)  # no traceback in the server's log but a storage failure
    assert states == {"SUCCEEDED": found.stored}


# --- 5. a retry storm, and what priority promises --------------------------------------------

STORM_POLICY = WorkloadRetryPolicy(
    max_attempts=4, initial_delay_ms=2000, max_delay_ms=5000, backoff=BackoffPolicy.EXPONENTIAL
)
"""Retries after 2 s, 4 s, then 5 s (the cap of 8 s); the fourth failure dead-letters."""
T0 = 1_700_000_000
"""The store's time (``now``) at which the storm and priority cases begin."""


def backoff_s(retry: int) -> int:
    """The policy's delay before automatic retry number ``retry``, in whole seconds."""
    delay_ms: int = STORM_POLICY.initial_delay_ms * 2 ** (retry - 1)
    capped: int = min(delay_ms, STORM_POLICY.max_delay_ms)
    return capped // 1000


@pytest.fixture
def store(new_target: Callable[..., str]) -> Iterator[WorkloadStore]:
    with WorkloadStore.open(new_target("ordering")) as opened:
        yield opened


def test_a_retry_storm_is_retried_by_its_backoff_within_the_attempt_budget(
    store: WorkloadStore, backend: str
) -> None:
    count = scaled(100, 2000)
    max_attempts = STORM_POLICY.max_attempts
    ledger = Ledger()
    # Workload i succeeds on attempt 1 + i % 5; the fifth never does (dead-lettered).
    succeeds_on: dict[str, int] = {}
    for first in range(0, count, 100):
        keys = [f"storm-{n}" for n in range(first, min(first + 100, count))]
        for key in keys:
            ledger.tried_admission(key)
        requests = [
            make_request(
                idempotency_key=key, input={"key": key}, retry_policy=STORM_POLICY, created_at=T0
            )
            for key in keys
        ]
        for key, answer in zip(keys, store.admit_many(requests), strict=True):
            assert not isinstance(answer, WorkloadError), answer
            ledger.acknowledged_admission(key, answer[0].workload_id)
            succeeds_on[answer[0].workload_id] = 1 + int(key.split("-")[1]) % 5
    eligible_at = dict.fromkeys(succeeds_on, T0)  # the model: when each may be claimed next
    early: list[str] = []
    rounds = 0
    retries = Counter[str]()
    while eligible_at:
        now = min(eligible_at.values())
        if rounds:
            # A second before the next retry falls due, nothing may be claimable.
            too_soon = store.claim_work("t", "app", "worker:early", CAPABILITIES, 100, now - 1)
            early.extend(work.claim.workload_id for work in too_soon)
        due = {wid for wid, at in eligible_at.items() if at == now}
        claimed = storm_round(store, ledger, succeeds_on, now)
        assert Counter(claimed) == Counter(due), f"at {now}: claimed {len(claimed)} of {len(due)}"
        rounds += 1
        after = {w.workload_id: w for w in map(store.get, due)}
        for workload_id in due:
            workload = after[workload_id]
            attempt = workload.attempt_count
            if workload.state is WorkloadState.READY:
                retries[workload_id] += 1
                eligible_at[workload_id] = now + backoff_s(attempt)
                assert workload.next_attempt_at == eligible_at[workload_id]
            else:
                del eligible_at[workload_id]
    final = store.list("t", "app")
    found = audit(ledger, final)
    settled_at = max(w.updated_at for w in final)
    states = Counter(w.state.value for w in final)
    recorded(
        "retry-storm", backend, found, settled_at - T0, workloads=count, rounds=rounds,
        retries=sum(retries.values()), dead_lettered=states["DEAD_LETTER"],
        claimed_early=len(early), recovery_clock="store time",
    )  # fmt: skip
    assert_clean(found, ledger)
    assert not early, f"retries claimable before their backoff: {early[:5]}"
    for workload in final:
        target = succeeds_on[workload.workload_id]
        assert workload.attempt_count <= max_attempts
        if target <= max_attempts:
            assert workload.state is WorkloadState.SUCCEEDED
            assert workload.attempt_count == target and workload.retry_count == target - 1
            statuses = [a.status for a in workload.attempts]
            assert statuses == [AttemptStatus.FAILED] * (target - 1) + [AttemptStatus.SUCCEEDED]
        else:
            assert workload.state is WorkloadState.DEAD_LETTER
            assert workload.attempt_count == max_attempts
    # Settled exactly when the policy says: 2 + 4 + 5 s after the storm, the last failure.
    assert settled_at - T0 == sum(backoff_s(retry) for retry in range(1, max_attempts))


def storm_round(
    store: WorkloadStore, ledger: Ledger, succeeds_on: dict[str, int], now: int
) -> list[str]:
    """Four worker threads claim everything claimable at ``now``, completing each workload
    on its succeeding attempt and failing it retryably otherwise; the ids claimed.
    """
    claimed: list[str] = []
    failures: list[BaseException] = []
    lock = threading.Lock()

    def work(name: str) -> None:
        try:
            while batch := store.claim_work("t", "app", name, CAPABILITIES, 10, now, 60_000):
                for item in batch:
                    claim, workload = item.claim, item.workload
                    fence = (claim.workload_id, claim.claim_id, name, claim.fencing_token)
                    with lock:
                        claimed.append(claim.workload_id)
                    if workload.attempt_count == succeeds_on[claim.workload_id]:
                        result_id = f"result-{claim.claim_id}"
                        ledger.tried_completion(result_id)
                        result = store.complete(*fence, result_id, {"ok": True}, now=now)
                        ledger.acknowledged_completion(claim.workload_id, result.result_id)
                    else:
                        store.fail(*fence, "transient_connection", "the storm", now=now)
        except BaseException as error:
            failures.append(error)

    threads = [threading.Thread(target=work, args=(f"worker:storm{n}",)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not any(thread.is_alive() for thread in threads), "a storm worker hung"
    assert not failures, failures
    return claimed


def test_claims_follow_priority_then_age_and_a_high_priority_stream_defers_the_rest(
    store: WorkloadStore, backend: str
) -> None:
    lows, steps = scaled(10, 200), scaled(30, 600)
    ledger = Ledger()
    ready: dict[str, Workload] = {}  # the model: what is READY, as admitted
    claims: list[tuple[int, Workload]] = []  # (when, what) in the order claimed
    mismatches: list[str] = []

    def admit(key: str, priority: int, created_at: int, not_before: int | None = None) -> None:
        ledger.tried_admission(key)
        request = make_request(
            idempotency_key=key, input={"key": key}, priority=priority, not_before=not_before,
            created_at=created_at,
        )  # fmt: skip
        workload, created = store.admit(request)
        assert created
        ledger.acknowledged_admission(key, workload.workload_id)
        ready[workload.workload_id] = workload

    def claim(now: int) -> Workload | None:
        """claim_next, checked against the promised order: eligible, then priority
        descending, created_at ascending, key ascending.
        """
        eligible = [w for w in ready.values() if w.is_eligible_at(now)]
        expected = min(
            eligible, key=lambda w: (-w.priority, w.created_at, w.workload_id), default=None
        )
        got = store.claim_next("t", "app", "worker:prio", CAPABILITIES, now, 60_000)
        got_id = None if got is None else got.workload_id
        if got_id != (None if expected is None else expected.workload_id):
            mismatches.append(f"at {now}: claimed {got_id}, promised {expected}")
        if got is None:
            return None
        workload = ready.pop(got.workload_id)
        claims.append((now, workload))
        return workload

    for n in range(lows):
        admit(f"low-{n}", 0, T0 + n // 3)  # some share a created_at: the key decides
    stream_begins = T0 + lows
    for step in range(steps):
        now = stream_begins + step
        admit(f"high-{step}-a", 5, now)
        admit(f"high-{step}-b", 5, now)
        if step % 5 == 0:  # urgent, but not before 3 s from now
            admit(f"urgent-{step}", 9, now, not_before=now + 3)
        claim(now)
        claim(now)
    stream_ends = stream_begins + steps
    during_stream = sum(w.priority == 0 for _, w in claims)
    now = stream_ends
    while claim(now) is not None and claim(now) is not None:
        now += 1  # the same pace as during the stream: two claims a second
    first_low = next(at for at, w in claims if w.priority == 0)
    low_order = [w.workload_id for _, w in claims if w.priority == 0]
    urgent_late = [
        (at, w.next_attempt_at) for at, w in claims if w.priority == 9 and at != w.next_attempt_at
    ]
    found = audit(ledger, store.list("t", "app"))
    claimed_ids = Counter(w.workload_id for _, w in claims)
    duplicated = sum(n - 1 for n in claimed_ids.values() if n > 1)
    unclaimed = len(ledger.admitted) - len(claimed_ids)
    found.lost += unclaimed
    found.duplicated += duplicated
    recorded(
        "priority-order", backend, found, first_low - stream_ends, lows=lows, stream_steps=steps,
        low_claims_during_stream=during_stream, order_mismatches=len(mismatches),
        recovery_clock="store time",
    )  # fmt: skip
    assert_clean(found, ledger)
    assert not mismatches, mismatches[:5]
    assert during_stream == 0  # no anti-starvation: the stream defers low-priority work
    assert unclaimed == 0 and not ready  # once the stream ends, everything is claimed
    by_age = sorted(
        (w for w in store.list("t", "app") if w.priority == 0),
        key=lambda w: (w.created_at, w.workload_id),
    )
    assert low_order == [w.workload_id for w in by_age]  # oldest first
    assert not urgent_late, urgent_late  # claimed the moment it became eligible, not before
