"""Child-process bodies for ``test_multi_process.py``.

Spawned children import this module by name, so it must stay importable on its own: every
function takes plain arguments (a store target, a file path or a PostgreSQL URL, as
``str``; ints) and returns plain, picklable results. A refusal is reported as its error
code (a ``str``), never as an exception object; anything unexpected is reported as
``"UNEXPECTED <type>: <message>"``.

Races start together on a barrier handed to each pool worker by :func:`init_worker`.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

_TESTS = str(Path(__file__).resolve().parents[1])
if _TESTS not in sys.path:
    sys.path.insert(0, _TESTS)

from support.factories import CAPABILITIES, make_request  # noqa: E402

from feltdb import ApprovalOutcome, Subject, WorkloadError, WorkloadStore  # noqa: E402

BARRIER_TIMEOUT_S = 60
"""How long a child waits for the others at the start line before giving up."""

_barrier: Any = None


def init_worker(barrier: Any) -> None:
    """Pool initializer: keep the start-line barrier (synchronization objects can only be
    handed to a pool's workers by inheritance, not as task arguments).
    """
    global _barrier
    _barrier = barrier


def _start_together() -> None:
    if _barrier is not None:
        _barrier.wait(timeout=BARRIER_TIMEOUT_S)


def _code(error: BaseException) -> str:
    if isinstance(error, WorkloadError):
        return str(error.code)
    return f"UNEXPECTED {type(error).__name__}: {error}"


# ------------------------------------------------------------------------------- races


def race_claim(target: str, workload_id: str, index: int) -> tuple[int, str]:
    """Claim ``workload_id`` as worker ``w{index}``: ``(index, "ok" | code)``."""
    with WorkloadStore.open(target) as store:
        _start_together()
        try:
            store.claim(workload_id, f"w{index}", CAPABILITIES, now=11, lease_ms=10_000)
        except Exception as error:
            return index, _code(error)
        return index, "ok"


def race_recover(target: str, now: int) -> list[str] | str:
    """``recover_expired(now=now)``: the ids it recovered, or a code."""
    with WorkloadStore.open(target) as store:
        _start_together()
        try:
            return list(store.recover_expired(now=now))
        except Exception as error:
            return _code(error)


def race_admit(target: str, index: int, priority: int | None) -> tuple[int, str, str | None, bool]:
    """Admit the fixture request (with ``priority`` when given):
    ``(index, "ok" | code, workload_id, created)``.
    """
    request = make_request() if priority is None else make_request(priority=priority)
    with WorkloadStore.open(target) as store:
        _start_together()
        try:
            workload, created = store.admit(request)
        except Exception as error:
            return index, _code(error), None, False
        return index, "ok", workload.workload_id, created


def race_approve_or_claim(
    target: str, workload_id: str, input_hash: str, index: int, tries: int
) -> tuple[int, str, list[str]]:
    """Index 0 approves as ``human:ada``; any other index tries ``tries`` times (about a
    millisecond apart) to claim as ``w{index}``, stopping at its first success.
    ``(index, role, outcomes)``.
    """
    with WorkloadStore.open(target) as store:
        _start_together()
        if index == 0:
            try:
                _, replayed = store.decide(
                    workload_id,
                    Subject.human("ada"),
                    ApprovalOutcome.APPROVED,
                    None,
                    "g",
                    input_hash,
                    now=11,
                )
            except Exception as error:
                return index, "decider", [_code(error)]
            return index, "decider", ["replayed" if replayed else "ok"]
        outcomes: list[str] = []
        for _ in range(tries):
            # Paced so the tries span the decision's commit instead of all landing before it.
            time.sleep(0.001)
            try:
                store.claim(workload_id, f"w{index}", CAPABILITIES, now=11, lease_ms=10_000)
            except Exception as error:
                outcomes.append(_code(error))
                continue
            outcomes.append("ok")
            break
        return index, "claimer", outcomes


# ------------------------------------------------------------------------------- drain


def drain(target: str, index: int) -> dict[str, Any]:
    """Claim, start and complete work as ``w{index}`` until ``claim_next`` answers ``None``.

    Returns ``{"completed": [ids], "errors": [codes], "seconds": float}``; the first error
    stops the loop.
    """
    worker = f"w{index}"
    completed: list[str] = []
    errors: list[str] = []
    with WorkloadStore.open(target) as store:
        _start_together()
        began = time.perf_counter()
        try:
            while True:
                claim = store.claim_next("t", "app", worker, CAPABILITIES, now=100, lease_ms=60_000)
                if claim is None:
                    break
                id = claim.workload_id
                store.start(id, claim.claim_id, worker, claim.fencing_token, now=100)
                store.complete(
                    id,
                    claim.claim_id,
                    worker,
                    claim.fencing_token,
                    f"result-{id}",
                    {"by": worker},
                    now=100,
                )
                completed.append(id)
        except Exception as error:
            errors.append(_code(error))
        seconds = time.perf_counter() - began
    return {"completed": completed, "errors": errors, "seconds": seconds}


# ------------------------------------------------------------------------------- crash


def admit_forever(target: str, reports: Any, limit: int) -> None:
    """Admit workloads one after another, putting each committed id on ``reports`` after
    its commit returns, until ``limit`` (a safety stop; the parent kills it long before).
    """
    with WorkloadStore.open(target) as store:
        for n in range(limit):
            workload = store.create(make_request(idempotency_key=f"crash-{n}", input={"n": n}))
            reports.put(workload.workload_id)
