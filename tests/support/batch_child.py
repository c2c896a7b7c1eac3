"""A child process for ``tests/reliability/test_kill_during_batches.py``: a worker that
admits, claims and completes in batches until it is killed.

Usage: ``python batch_child.py TARGET LOG ROUND``. It opens the store at ``TARGET`` (a
SQLite file or a PostgreSQL URL) and loops: ``admit_many`` of :data:`BATCH` new workloads
(idempotency keys ``ROUND-N``), ``claim_many(..., start=True)`` of up to :data:`BATCH`,
``complete_many`` of every claim. After each batch call *returns*, what it acknowledged is
appended to ``LOG``, one line per item, in one ``write`` of the whole batch, before
anything else is done:

- ``admitted <workload id> <idempotency key>`` for each admission answered;
- ``completed <workload id> <result id>`` for each completion answered with its result;
- ``refused <workload id> <code>`` for a completion refused (the test fails on any).

A line without its newline is one the kill cut short: the parent ignores it.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

_TESTS = str(Path(__file__).resolve().parents[1])
if _TESTS not in sys.path:
    sys.path.insert(0, _TESTS)

from feltdb import Completion, WorkloadError, WorkloadStore  # noqa: E402
from support.factories import CAPABILITIES, make_request  # noqa: E402

BATCH = 50
"""Items per batch call."""
LEASE_MS = 600_000
"""Leases outlive the test: what a killed child held is only recovered at the end."""
WORKER = "worker:batch"


def append(log: int, lines: list[str]) -> None:
    """Append ``lines`` to the log in one write (acknowledged before anything else)."""
    if lines:
        os.write(log, "".join(f"{line}\n" for line in lines).encode("utf-8"))


def run(target: str, log_path: str, round_id: str) -> None:
    log = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    with WorkloadStore.open(target) as store:
        for batch in range(1_000_000):
            now = int(time.time())
            keys = [f"{round_id}-{batch}-{n}" for n in range(BATCH)]
            requests = [
                make_request(idempotency_key=key, input={"key": key}, created_at=now)
                for key in keys
            ]
            admitted = store.admit_many(requests)
            append(
                log,
                [
                    f"admitted {answer[0].workload_id} {key}"
                    for key, answer in zip(keys, admitted, strict=True)
                    if not isinstance(answer, WorkloadError)
                ],
            )
            claims = store.claim_many(
                "t", "app", WORKER, CAPABILITIES, BATCH, now, LEASE_MS, start=True
            )
            if not claims:
                continue
            completions = [
                Completion(
                    workload_id=claim.workload_id,
                    claim_id=claim.claim_id,
                    worker=WORKER,
                    fencing_token=claim.fencing_token,
                    result_id=f"result-{claim.claim_id}",
                    output={"done": claim.workload_id},
                )
                for claim in claims
            ]
            answers = store.complete_many(completions, now)
            append(
                log,
                [
                    f"refused {item.workload_id} {answer.code}"
                    if isinstance(answer, WorkloadError)
                    else f"completed {item.workload_id} {answer.result_id}"
                    for item, answer in zip(completions, answers, strict=True)
                ],
            )


if __name__ == "__main__":
    run(sys.argv[1], sys.argv[2], sys.argv[3])
