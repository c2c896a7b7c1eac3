"""Child-process bodies for ``tests/reliability/test_races.py``.

Spawned pool workers import this module by name (``support.race_children``), so it stays
importable on its own: every function takes plain arguments (a store target as ``str``,
ids, ints, seeds) and returns plain, picklable results. A refusal is reported as its
error code (a ``str``), never as an exception object; anything unexpected is reported as
``"UNEXPECTED <type>: <message>"``, which the parent counts as a failure.

Every round starts together on a barrier handed to each pool worker by
:func:`init_worker`, with a few flags (``multiprocessing.Event``) by which the roles of a
round tell each other they are done. Every loop is bounded in wall-clock time
(:data:`ROLE_TIMEOUT_S`), so a child never spins forever waiting for a flag.
"""

from __future__ import annotations

import random
import sys
import time
from pathlib import Path
from typing import Any

_TESTS = str(Path(__file__).resolve().parents[1])
if _TESTS not in sys.path:
    sys.path.insert(0, _TESTS)

from feltdb import (  # noqa: E402
    ApprovalOutcome,
    Completion,
    Subject,
    WorkloadClaim,
    WorkloadError,
    WorkloadStore,
)
from support.factories import CAPABILITIES  # noqa: E402

BARRIER_TIMEOUT_S = 60
"""How long a child waits for the others at the start line."""
ROLE_TIMEOUT_S = 60.0
"""The longest any role of a round loops (waiting for work or for another role's flag)."""
TENANT, APP = "t", "app"

_barrier: Any = None
_flags: list[Any] = []


def init_worker(barrier: Any, flags: list[Any]) -> None:
    """Pool initializer: keep the start-line barrier and the round's flags
    (synchronization objects reach a pool's workers by inheritance only).
    """
    global _barrier, _flags
    _barrier = barrier
    _flags = list(flags)


def dispatch(name: str, arguments: tuple[Any, ...]) -> Any:
    """Run the role function ``name`` of this module with ``arguments``; ``"idle"``: only
    take a place at the start line (a round that needs fewer processes than the pool has).
    """
    if name == "idle":
        _start_together()
        return None
    return globals()[name](*arguments)


def _start_together() -> None:
    if _barrier is not None:
        _barrier.wait(timeout=BARRIER_TIMEOUT_S)


def _code(error: BaseException) -> str:
    if isinstance(error, WorkloadError):
        return str(error.code)
    return f"UNEXPECTED {type(error).__name__}: {error}"


def _jitter(rng: random.Random, most_s: float = 0.002) -> None:
    """Sleep up to ``most_s`` so that no racer wins every round by starting first."""
    time.sleep(rng.uniform(0, most_s))


def fails_first_attempt(workload_id: str) -> bool:
    """The workloads whose first attempt the claim racers fail (about a third), so that
    they are claimed again under a second fence. Deterministic: parent and children agree.
    """
    return int(workload_id[-4:], 16) % 3 == 0


def result_id_of(workload_id: str, fencing_token: int) -> str:
    return f"result-{workload_id}-{fencing_token}"


# ------------------------------------------------------------------ 1: claim_next / claim_many


def claim_and_finish(target: str, index: int, seed: int, now: int) -> dict[str, Any]:
    """Claim as ``w{index}`` with ``claim_next`` or ``claim_many`` (chosen at random each
    time; ``claim_many`` sometimes with ``start=True``) until nothing is claimable; start
    each claim, fail the first attempt of :func:`fails_first_attempt` work (retried at
    once), and complete the rest.

    Returns ``{"claims": [[id, fence, claim_id, how]], "completed": [[id, fence]],
    "failed": [[id, fence]], "errors": [str]}``; any refusal of an operation under one of
    this worker's own claims is an error (nothing else may touch them).
    """
    rng = random.Random(seed * 1009 + index)
    worker = f"w{index}"
    claims: list[list[Any]] = []
    completed: list[list[Any]] = []
    failed: list[list[Any]] = []
    errors: list[str] = []
    with WorkloadStore.open(target) as store:
        _start_together()
        stop_at = time.monotonic() + ROLE_TIMEOUT_S
        while time.monotonic() < stop_at:
            try:
                if rng.random() < 0.5:
                    one = store.claim_next(TENANT, APP, worker, CAPABILITIES, now, 600_000)
                    got: list[tuple[WorkloadClaim, bool, str]] = (
                        [] if one is None else [(one, False, "claim_next")]
                    )
                else:
                    start = rng.random() < 0.5
                    many = store.claim_many(
                        TENANT,
                        APP,
                        worker,
                        CAPABILITIES,
                        rng.randint(2, 6),
                        now,
                        600_000,
                        start=start,
                    )
                    how = "claim_many_started" if start else "claim_many"
                    got = [(claim, start, how) for claim in many]
            except Exception as error:
                errors.append(f"claim: {_code(error)}")
                break
            if not got:
                break
            finishing: list[Completion] = []
            for claim, started, how in got:
                id, fence = claim.workload_id, claim.fencing_token
                claims.append([id, fence, claim.claim_id, how])
                try:
                    if not started:
                        store.start(id, claim.claim_id, worker, fence, now)
                    if fence == 1 and fails_first_attempt(id):
                        store.fail(
                            id,
                            claim.claim_id,
                            worker,
                            fence,
                            "transient_connection",
                            "injected",
                            now,
                        )
                        failed.append([id, fence])
                        continue
                except Exception as error:
                    errors.append(f"{id}@{fence}: {_code(error)}")
                    continue
                finishing.append(
                    Completion(
                        id, claim.claim_id, worker, fence, result_id_of(id, fence), {"by": worker}
                    )
                )
            if not finishing:
                continue
            try:
                # Batches are completed in one call half the time, one by one otherwise.
                if len(finishing) > 1 and rng.random() < 0.5:
                    answers: list[Any] = list(store.complete_many(finishing, now))
                else:
                    answers = []
                    for item in finishing:
                        try:
                            answers.append(
                                store.complete(
                                    item.workload_id,
                                    item.claim_id,
                                    worker,
                                    item.fencing_token,
                                    item.result_id,
                                    item.output,
                                    now=now,
                                )
                            )
                        except WorkloadError as error:
                            answers.append(error)
            except Exception as error:
                errors.append(f"complete: {_code(error)}")
                continue
            for item, answer in zip(finishing, answers, strict=True):
                if isinstance(answer, BaseException):
                    errors.append(f"{item.workload_id}@{item.fencing_token}: {_code(answer)}")
                else:
                    completed.append([item.workload_id, item.fencing_token])
        else:
            errors.append("UNEXPECTED timeout: still claiming")
    return {"claims": claims, "completed": completed, "failed": failed, "errors": errors}


# ------------------------------------------------------------------ 2: recovery vs completion

COMPLETER_DONE, RECOVERERS = 0, (1, 2)
"""Flags of a recovery round: the completer set flag 0 when done, recoverers 1 and 2."""


def recovery_round(
    target: str, index: int, role: str, claims: list[list[Any]], seed: int, times: list[int]
) -> dict[str, Any]:
    """One role of a round of recovery against completion, over work claimed and started
    by ``w-old`` whose leases expire at ``times[1]``:

    - ``"complete"``: complete every one of ``claims`` (``[id, claim_id, fence]``), in a
      random order, at ``times[0]`` (before the expiry: the completion is valid on its own);
    - ``"recover"``: ``recover_expired(times[1])`` again and again until the completer is
      done and a pass after that recovers nothing;
    - ``"reclaim"``: as ``w-new``, ``claim_many(start=True)`` at ``times[1]`` what recovery
      made ready again (fresh leases), and complete each at ``times[2]``, until both
      recoverers are done and nothing is left to claim.

    Returns ``{"ok": [ids], "refused": {id: code}, "recovered": [ids], "reclaimed": [[id,
    fence]], "completed_new": [ids], "errors": [str]}`` (the keys of the role).
    """
    rng = random.Random(seed * 7919 + index)
    before, expiry, after = times
    out: dict[str, Any] = {
        "ok": [],
        "refused": {},
        "recovered": [],
        "reclaimed": [],
        "completed_new": [],
        "errors": [],
    }
    with WorkloadStore.open(target) as store:
        _start_together()
        stop_at = time.monotonic() + ROLE_TIMEOUT_S
        try:
            if role == "complete":
                order = list(claims)
                rng.shuffle(order)
                for id, claim_id, fence in order:
                    _jitter(rng, 0.001)
                    try:
                        store.complete(
                            id,
                            claim_id,
                            "w-old",
                            fence,
                            result_id_of(id, fence),
                            {"by": "w-old"},
                            now=before,
                        )
                    except WorkloadError as error:
                        out["refused"][id] = error.code
                        continue
                    out["ok"].append(id)
            elif role == "recover":
                _jitter(rng, 0.02)  # sometimes the completer is well ahead, sometimes not
                completer_done = False
                while time.monotonic() < stop_at:
                    completer_done = _flags[COMPLETER_DONE].is_set()
                    recovered = store.recover_expired(now=expiry)
                    out["recovered"].extend(recovered)
                    if completer_done and not recovered:
                        break
                    _jitter(rng, 0.003)
                else:
                    out["errors"].append("UNEXPECTED timeout: the completer never finished")
            elif role == "reclaim":
                while time.monotonic() < stop_at:
                    recoverers_done = all(_flags[flag].is_set() for flag in RECOVERERS)
                    got = store.claim_many(
                        TENANT, APP, "w-new", CAPABILITIES, 8, expiry, 600_000, start=True
                    )
                    for claim in got:
                        out["reclaimed"].append([claim.workload_id, claim.fencing_token])
                    items = [
                        Completion(
                            c.workload_id,
                            c.claim_id,
                            "w-new",
                            c.fencing_token,
                            result_id_of(c.workload_id, c.fencing_token),
                            {"by": "w-new"},
                        )
                        for c in got
                    ]
                    for item, answer in zip(items, store.complete_many(items, after), strict=True):
                        if isinstance(answer, WorkloadError):
                            out["errors"].append(f"{item.workload_id}: {_code(answer)}")
                        else:
                            out["completed_new"].append(item.workload_id)
                    if recoverers_done and not got:
                        break
                    if not got:
                        time.sleep(0.002)
                else:
                    out["errors"].append("UNEXPECTED timeout: the recoverers never finished")
        except Exception as error:
            out["errors"].append(f"{role}: {_code(error)}")
        finally:
            if role == "complete":
                _flags[COMPLETER_DONE].set()
            elif role == "recover":
                _flags[RECOVERERS[0] if index == 1 else RECOVERERS[1]].set()
    return out


# ------------------------------------------------------------------ 3: decide vs claim

DECIDERS_DONE = (0, 1)


def decide_or_claim(
    target: str, index: int, role: str, pending: list[list[str]], seed: int
) -> dict[str, Any]:
    """One role of an approval round over ``pending`` (``[id, input_hash]``, all awaiting
    approval):

    - ``"decide"`` (indices 0 and 1, as ``human:ada`` and ``human:bob``): decide every one,
      in its own random order, approving or rejecting each at random; the two deciders
      race each other as well as the claimers;
    - ``"claim"``: as ``w{index}``, alternate ``claim_next`` with ``claim`` of a random
      pending id, until both deciders are done and nothing is left to claim.

    Returns ``{"decided": {id: [outcome, "ok" | "replayed" | code]}, "claims": [[id,
    fence]], "refusals": {code: count}, "tries": int, "errors": [str]}``.
    """
    rng = random.Random(seed * 104729 + index)
    out: dict[str, Any] = {"decided": {}, "claims": [], "refusals": {}, "tries": 0, "errors": []}
    with WorkloadStore.open(target) as store:
        _start_together()
        stop_at = time.monotonic() + ROLE_TIMEOUT_S
        try:
            if role == "decide":
                decider = Subject.human("ada" if index == 0 else "bob")
                order = list(pending)
                rng.shuffle(order)
                for id, input_hash in order:
                    _jitter(rng, 0.001)
                    outcome = rng.choice([ApprovalOutcome.APPROVED, ApprovalOutcome.REJECTED])
                    reason = None if outcome is ApprovalOutcome.APPROVED else "no"
                    try:
                        _, replayed = store.decide(
                            id, decider, outcome, reason, "g", input_hash, now=11
                        )
                    except WorkloadError as error:
                        out["decided"][id] = [outcome.value, error.code]
                        continue
                    out["decided"][id] = [outcome.value, "replayed" if replayed else "ok"]
            else:
                worker = f"w{index}"
                ids = [id for id, _ in pending]
                while time.monotonic() < stop_at:
                    deciders_done = all(_flags[flag].is_set() for flag in DECIDERS_DONE)
                    out["tries"] += 1
                    claim: WorkloadClaim | None
                    if rng.random() < 0.5:
                        claim = store.claim_next(TENANT, APP, worker, CAPABILITIES, 11, 600_000)
                        if claim is None and deciders_done:
                            break
                    else:
                        try:
                            claim = store.claim(rng.choice(ids), worker, CAPABILITIES, 11, 600_000)
                        except WorkloadError as error:
                            counts = out["refusals"]
                            counts[error.code] = counts.get(error.code, 0) + 1
                            claim = None
                    if claim is not None:
                        out["claims"].append([claim.workload_id, claim.fencing_token])
                    time.sleep(0.0005)
                else:
                    out["errors"].append("UNEXPECTED timeout: the deciders never finished")
        except Exception as error:
            out["errors"].append(f"{role}: {_code(error)}")
        finally:
            if role == "decide":
                _flags[DECIDERS_DONE[index]].set()
    return out


# ------------------------------------------------------------------ 4: admission of one key


def admit_keys(target: str, index: int, keys: list[str], seed: int) -> dict[str, Any]:
    """Admit one request per key, in a random order, each by ``admit`` or as part of an
    ``admit_many`` batch (chosen at random). Every process sends the same request for a
    key, except for keys starting ``conflict-``: process ``index`` asks for priority
    ``index`` there, so that exactly one may be admitted and the others are told the key
    was reused.

    Returns ``{"answers": [[key, workload_id | None, created, "ok" | code]], "errors"}``.
    """
    from support.factories import make_request

    rng = random.Random(seed * 15485863 + index)
    order = list(keys)
    rng.shuffle(order)
    answers: list[list[Any]] = []
    errors: list[str] = []
    with WorkloadStore.open(target) as store:
        _start_together()
        position = 0
        try:
            while position < len(order):
                size = 1 if rng.random() < 0.5 else rng.randint(2, 4)
                chunk = order[position : position + size]
                position += len(chunk)
                requests = [
                    make_request(idempotency_key=key, input={"key": key}, priority=index)
                    if key.startswith("conflict-")
                    else make_request(idempotency_key=key, input={"key": key})
                    for key in chunk
                ]
                if len(requests) == 1:
                    try:
                        workload, created = store.admit(requests[0])
                        answers.append([chunk[0], workload.workload_id, created, "ok"])
                    except WorkloadError as error:
                        answers.append([chunk[0], None, False, error.code])
                    continue
                for key, answer in zip(chunk, store.admit_many(requests), strict=True):
                    if isinstance(answer, WorkloadError):
                        answers.append([key, None, False, answer.code])
                    else:
                        answers.append([key, answer[0].workload_id, answer[1], "ok"])
        except Exception as error:
            errors.append(_code(error))
    return {"answers": answers, "errors": errors}


# ------------------------------------------------------------------ 5: finishers of one workload


def finish_one(
    target: str, index: int, op: str, fenced: list[Any], seed: int, times: list[int]
) -> list[str]:
    """Race to end the running attempt of ``fenced`` (``[id, claim_id, fence]``, held by
    ``w-old``) by ``op``, at ``times[0]`` unless said otherwise:

    ``complete`` and ``fail`` (the holder), ``cancel`` and ``timeout`` (operators),
    ``deadline`` (``enforce_deadlines`` at ``times[1]``, past the execution deadline) and
    ``recover`` (``recover_expired`` at ``times[2]``, past the lease).

    Returns ``[op, "ok", answer]`` or ``[op, "refused", code]``.
    """
    rng = random.Random(seed * 32452843 + index)
    id, claim_id, fence = fenced
    at, deadline_at, expiry = times
    with WorkloadStore.open(target) as store:
        _start_together()
        _jitter(rng, 0.003)
        try:
            if op == "complete":
                result = store.complete(
                    id, claim_id, "w-old", fence, result_id_of(id, fence), {"by": "w-old"}, now=at
                )
                answer = result.result_id
            elif op == "fail":
                answer = store.fail(
                    id, claim_id, "w-old", fence, "transient_connection", "injected", at
                ).value
            elif op == "cancel":
                answer = store.cancel(id, "operator:canceller", at).value
            elif op == "timeout":
                answer = store.timeout(id, "operator:timer", at).value
            elif op == "deadline":
                answer = ",".join(store.enforce_deadlines(deadline_at))
            elif op == "recover":
                answer = ",".join(store.recover_expired(expiry))
            else:
                raise ValueError(f"no such op {op!r}")
        except Exception as error:
            return [op, "refused", _code(error)]
    return [op, "ok", answer]
