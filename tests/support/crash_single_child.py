"""A child of ``tests/reliability/test_sigkill.py``: an embedded writer and worker making
single calls only, until it is killed.

Usage: ``python crash_single_child.py TARGET LOG ROUND [KEY ...]``. It opens the store at
``TARGET`` (a SQLite file or a PostgreSQL URL), first admits each ``KEY`` (the admission the
previous child may have had in flight when it was killed: committed or not, it must be
there exactly once after this), then loops:

- ``admit`` of one to three new workloads (keys ``ROUND-N``, in order), and now and then a
  replay of a key this child already had acknowledged (it must answer the same workload,
  not a new one);
- ``claim_next``; sometimes ``fail`` at once (the attempt never started); else ``start``,
  ``heartbeat``, ``execution_context``, zero to two ``checkpoint`` calls, then ``fail``
  (retryable, ``transient_connection``) now and then, else ``complete``.

What each call acknowledged is appended to ``LOG`` (:mod:`support.crash_log`) as soon as it
returns. A refusal is logged as ``refused`` (the parent fails on any) and the loop goes on.
"""

from __future__ import annotations

import itertools
import random
import sys
import time
from pathlib import Path

_TESTS = str(Path(__file__).resolve().parents[1])
if _TESTS not in sys.path:
    sys.path.insert(0, _TESTS)

from feltdb import WorkloadError, WorkloadRetryPolicy, WorkloadStore  # noqa: E402
from support.crash_log import append, open_log  # noqa: E402
from support.factories import CAPABILITIES, make_request  # noqa: E402

LEASE_MS = 3_600_000
"""Leases outlive the run (an hour, longer than any soak's case): what a killed child held
is only recovered by the parent's final ``recover_expired``, never mid-run."""
RETRY_POLICY = WorkloadRetryPolicy(max_attempts=25, initial_delay_ms=0, max_delay_ms=0)
"""Failed work is ready again at once, and no workload runs out of attempts in a run."""
FAIL_KIND = "transient_connection"
"""A failure kind the default ``retry_on`` retries."""
FAIL_RATE = 0.15
"""How often a started attempt is failed instead of completed."""
FAIL_UNSTARTED_RATE = 0.05
"""How often a claim is failed before it is started."""
REPLAY_RATE = 0.1
"""How often an acknowledged key is admitted again."""


class SingleChild:
    """One child's loop over one store."""

    def __init__(self, store: WorkloadStore, log: int, round_id: str) -> None:
        self.store = store
        self.log = log
        self.round_id = round_id
        self.worker = f"worker:single-{round_id}"
        self.rng = random.Random()
        self.acknowledged: list[str] = []

    def admit(self, key: str) -> None:
        request = make_request(
            idempotency_key=key,
            input={"key": key},
            created_at=int(time.time()),
            retry_policy=RETRY_POLICY,
        )
        try:
            workload, created = self.store.admit(request)
        except WorkloadError as error:
            append(self.log, [f"refused - {error.code} admit"])
            return
        how = "created" if created else "replayed"
        append(self.log, [f"admitted {workload.workload_id} {key} {how}"])
        self.acknowledged.append(key)

    def work(self) -> None:
        """Claim one workload and drive it to a completion or a failure."""
        store, worker, log = self.store, self.worker, self.log
        now = int(time.time())
        claim = store.claim_next("t", "app", worker, CAPABILITIES, now, LEASE_MS)
        if claim is None:
            return
        wid, cid, token = claim.workload_id, claim.claim_id, claim.fencing_token
        operation = "fail"
        try:
            if self.rng.random() < FAIL_UNSTARTED_RATE:
                state = store.fail(wid, cid, worker, token, FAIL_KIND, "could not start", now)
                append(log, [f"failed {wid} {cid} {state}"])
                return
            operation = "start"
            store.start(wid, cid, worker, token, now)
            operation = "heartbeat"
            store.heartbeat(wid, cid, worker, token, now, LEASE_MS)
            operation = "execution_context"
            context = store.execution_context(wid, cid, worker, token, now)
            operation = "checkpoint"
            for step in range(self.rng.randint(0, 2)):
                saved = store.checkpoint(wid, cid, worker, token, {"step": step, "of": cid}, now)
                append(log, [f"checkpointed {wid} {saved.checkpoint_id} {saved.state_hash}"])
            operation = "fail"
            if self.rng.random() < FAIL_RATE:
                state = store.fail(wid, cid, worker, token, FAIL_KIND, "transient", now)
                append(log, [f"failed {wid} {cid} {state}"])
                return
            operation = "complete"
            result = store.complete(
                wid, cid, worker, token, f"result-{cid}", {"done": wid, "input": context.input},
                now=now,
            )  # fmt: skip
            append(log, [f"completed {wid} {result.result_id}"])
        except WorkloadError as error:
            append(log, [f"refused {wid} {error.code} {operation}"])

    def run(self, replay: list[str]) -> None:
        for key in replay:
            self.admit(key)
        numbers = itertools.count()
        while True:
            for _ in range(self.rng.randint(1, 3)):
                self.admit(f"{self.round_id}-{next(numbers)}")
            if self.acknowledged and self.rng.random() < REPLAY_RATE:
                self.admit(self.rng.choice(self.acknowledged))
            self.work()


def main(argv: list[str]) -> None:
    target, log_path, round_id, *replay = argv
    log = open_log(log_path)
    with WorkloadStore.open(target) as store:
        SingleChild(store, log, round_id).run(replay)


if __name__ == "__main__":
    main(sys.argv[1:])
