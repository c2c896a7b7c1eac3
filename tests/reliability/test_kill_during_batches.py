"""A SIGKILL during batch admissions, claims and completions loses nothing acknowledged.

A child process (:mod:`support.batch_child`) admits, claims (``claim_many(start=True)``)
and completes (``complete_many``) batches of 50 on one store, writing what each batch call
acknowledged to a log as soon as the call returns. The parent kills it with SIGKILL at a
random moment, :data:`ROUNDS` times, restarting it each time, then reads the store back:

- every acknowledged admission is there, exactly once (one workload per idempotency key);
- every acknowledged completion is ``SUCCEEDED`` with the result id it was answered;
- no workload has two succeeded attempts, and every history's sequence is gap-free;
- after ``recover_expired`` past every lease, and a drain, every workload is ``SUCCEEDED``.

On each backend (``backend``: a SQLite file, and the PostgreSQL of ``FELTDB_TEST_PG``).
Printed: the seed, and what was acknowledged and recovered.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest
from support import batch_child
from support.factories import CAPABILITIES

from feltdb import AttemptStatus, Completion, WorkloadError, WorkloadState, WorkloadStore

pytestmark = pytest.mark.multiprocess

ROUNDS = 5
"""How many times the child is killed (and restarted)."""
KILL_DELAY_S = (0.05, 0.8)
"""How long after its first acknowledged completion a child is killed: uniform in this."""
START_TIMEOUT_S = 60.0
"""A child that acknowledges no completion in this long fails the test."""
CHILD = Path(batch_child.__file__)
TESTS = CHILD.parents[1]


def lines_of(log: Path) -> list[list[str]]:
    """The log's whole lines, split; a last line the kill cut short is left out."""
    text = log.read_text(encoding="utf-8") if log.exists() else ""
    whole = text[: text.rfind("\n") + 1]
    return [line.split(" ") for line in whole.splitlines()]


def completed_in(log: Path) -> int:
    return sum(fields[0] == "completed" for fields in lines_of(log))


def kill_round(target: str, log: Path, round_id: str, rng: random.Random) -> None:
    """Start a child, let it acknowledge at least one completion, kill it at random."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("FELTDB_")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(TESTS), env.get("PYTHONPATH")]))
    before = completed_in(log)
    stderr = log.with_suffix(f".{round_id}.err")
    with stderr.open("wb") as errors:
        child = subprocess.Popen(
            [sys.executable, str(CHILD), target, str(log), round_id],
            stdout=subprocess.DEVNULL,
            stderr=errors,
            env=env,
        )
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while completed_in(log) <= before:
            assert child.poll() is None, f"the child exited: {stderr.read_text()}"
            assert time.monotonic() < deadline, f"no completion in {START_TIMEOUT_S}s"
            time.sleep(0.02)
        time.sleep(rng.uniform(*KILL_DELAY_S))
        assert child.poll() is None, f"the child exited: {stderr.read_text()}"
        child.send_signal(signal.SIGKILL)
        assert child.wait(timeout=30) == -signal.SIGKILL
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(timeout=30)


def wait_for_no_other_sessions(url: str, timeout_s: float = 30.0) -> None:
    """Wait until no session but this one is open on ``url``'s database."""
    import psycopg

    deadline = time.monotonic() + timeout_s
    with psycopg.connect(url, autocommit=True) as connection:
        while True:
            [(others,)] = connection.execute(
                "SELECT count(*) FROM pg_stat_activity"
                " WHERE datname = current_database() AND pid <> pg_backend_pid()"
            ).fetchall()
            if others == 0:
                return
            assert time.monotonic() < deadline, f"{others} sessions still open after the kills"
            time.sleep(0.05)


def drain(store: WorkloadStore, now: int) -> int:
    """Claim and complete everything claimable at ``now``; how many were completed."""
    done = 0
    while claims := store.claim_many(
        "t", "app", "worker:drain", CAPABILITIES, 50, now, batch_child.LEASE_MS, start=True
    ):
        completions = [
            Completion(
                c.workload_id,
                c.claim_id,
                "worker:drain",
                c.fencing_token,
                f"result-{c.claim_id}",
                {"done": c.workload_id},
            )
            for c in claims
        ]
        answers = store.complete_many(completions, now)
        assert not [a for a in answers if isinstance(a, WorkloadError)], answers
        done += len(answers)
    return done


def test_a_sigkill_during_batches_loses_nothing_acknowledged(
    new_target: Callable[..., str], tmp_path: Path, backend: str
):
    target = new_target("batches")
    WorkloadStore.open(target).close()  # the schema, before any child races to make it
    log = tmp_path / "acknowledged.log"
    seed = random.randrange(2**32)
    rng = random.Random(seed)
    for round_number in range(ROUNDS):
        kill_round(target, log, f"r{round_number}", rng)
    if backend == "postgres":
        # A COMMIT the server received before the kill still lands, once its backend gets
        # to it: read the store only once every killed child's backend has ended.
        wait_for_no_other_sessions(target)

    entries = lines_of(log)
    refused = [fields for fields in entries if fields[0] == "refused"]
    assert not refused, refused
    admitted = {key: workload_id for kind, workload_id, key in entries if kind == "admitted"}
    completed = {wid: result for kind, wid, result in entries if kind == "completed"}
    assert len(admitted) == sum(fields[0] == "admitted" for fields in entries)  # keys unique
    assert len(completed) == sum(fields[0] == "completed" for fields in entries)
    # (A completed workload may lack an acknowledged admission: a child killed after its
    # admit_many committed, before the log was written, left it for the next to claim.)

    with WorkloadStore.open(target) as store:
        stored = {w.workload_id: w for w in store.list("t", "app")}
        # Every acknowledged admission, exactly once: one workload per key, and no other.
        by_key = Counter(w.idempotency_key for w in stored.values())
        assert all(by_key[key] == 1 for key in admitted), "an admission is missing or twice"
        assert all(stored[wid].idempotency_key == key for key, wid in admitted.items())
        assert max(by_key.values()) == 1
        # Every acknowledged completion, as it was answered.
        assert set(completed) <= set(stored)
        for workload_id, result_id in completed.items():
            workload = stored[workload_id]
            assert workload.state == WorkloadState.SUCCEEDED, workload_id
            assert workload.result is not None and workload.result.result_id == result_id
        assert_consistent(stored.values())
        # Committed, but the kill came before the log: not acknowledged, not lost either.
        unlogged = sum(
            w.state == WorkloadState.SUCCEEDED and w.workload_id not in completed
            for w in stored.values()
        )

        # What a killed child held is recovered once its lease is past, then drained.
        far = int(time.time()) + 10 * 365 * 24 * 3600
        recovered = store.recover_expired(now=far)
        drained = drain(store, far)
        final = {w.workload_id: w for w in store.list("t", "app")}
        assert set(final) == set(stored)
        assert {w.state for w in final.values()} == {WorkloadState.SUCCEEDED}
        for workload_id, result_id in completed.items():
            result = final[workload_id].result
            assert result is not None and result.result_id == result_id
        assert_consistent(final.values())
    print(
        f"\n{backend}: seed {seed}, {ROUNDS} kills; {len(admitted)} admissions and "
        f"{len(completed)} completions acknowledged of {len(stored)} workloads "
        f"({unlogged} more completed unlogged); {len(recovered)} recovered, {drained} drained"
    )


def assert_consistent(workloads) -> None:
    """At most one succeeded attempt each, and gap-free histories."""
    for workload in workloads:
        succeeded = [a for a in workload.attempts if a.status == AttemptStatus.SUCCEEDED]
        assert len(succeeded) <= 1, workload.workload_id
        assert (len(succeeded) == 1) == (workload.state == WorkloadState.SUCCEEDED)
        sequences = [event.sequence for event in workload.execution_history]
        assert sequences == list(range(1, len(sequences) + 1)), workload.workload_id
