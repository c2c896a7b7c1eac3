"""What a worker asks of the authority, decided: claim, start, heartbeat, read the
execution context, checkpoint, complete, fail, confirm a cancellation.

Each function checks the command's arguments, loads the workload it names (``load``: under
the caller's scope, or as an earlier item of the same batch left it), and answers the
:class:`~feltdb.work.batches.Step` decided on it: the change to commit and the answer, or
the refusal. Nothing is committed here; the unit of work commits a step, alone or with a
batch's others (:mod:`feltdb.work.unit`), so a single call and a batch item are decided by
the same code. A deadline found passed is decided as the maintenance pass would decide it
(the work is timed out) and the call refused ``WORKLOAD_TIMED_OUT``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Any, TypeVar

import msgspec

from feltdb.errors import ErrorCode, WorkloadError
from feltdb.fields import MAX_PATH_CHARS, instant_text
from feltdb.records.workload import (
    Workload,
    WorkloadCheckpoint,
    WorkloadClaim,
    WorkloadExecutionContext,
    WorkloadResult,
)
from feltdb.storage.base import Mutation, Precondition, RowReader
from feltdb.storage.canonical import content_hash
from feltdb.work import inputs, lifecycle, operators, recovery
from feltdb.work.batches import Completion, Heartbeat, Step
from feltdb.work.changes import Operation
from feltdb.work.concurrency import take_slot
from feltdb.work.deadlines import deadline_breach
from feltdb.work.eligibility import DependenciesRead
from feltdb.work.outcome import Outcome
from feltdb.work.rate_limits import StartHeld, take_start
from feltdb.work.rows import LoadedWorkload
from feltdb.work.safety import ensure_safe, ensure_safe_text
from feltdb.work.states import WorkloadState

T = TypeVar("T")

Load = Callable[[str], LoadedWorkload]
ResultOwner = Callable[[str, Workload], "str | None"]
"""The workload of an application that recorded a result id, if any."""


def deadline_step(loaded: LoadedWorkload, now: int) -> Step[Any] | None:
    """The step that times out work past a deadline, as the maintenance pass would, and
    refuses the call that found it so (``None``: no deadline has passed).
    """
    breach = deadline_breach(loaded.workload, now)
    if breach is None:
        return None
    deadline, at = breach
    timed_out = recovery.time_out_past_deadline(loaded.workload, deadline, at, now)
    refusal = WorkloadError(
        ErrorCode.WORKLOAD_TIMED_OUT,
        f"the workload's {deadline} deadline passed at {instant_text(at)}",
        {"deadline": deadline, "deadline_at": at},
    )
    return Step(loaded.decided(timed_out), Operation.DEADLINE, refusal=refusal)


def within_deadlines(
    loaded: LoadedWorkload,
    now: int,
    operation: Operation,
    decide: Callable[[Workload], Outcome[T] | Workload],
) -> Step[T]:
    """The step of ``decide`` on ``loaded``'s workload (answering its outcome's answer, or
    nothing when it decides the workload alone), or, when a deadline has passed, the step
    that times it out and refuses the call.
    """
    timed_out = deadline_step(loaded, now)
    if timed_out is not None:
        return timed_out
    return decided_step(loaded, operation, decide(loaded.workload))


def decided_step(
    loaded: LoadedWorkload, operation: Operation, decided: Outcome[T] | Workload
) -> Step[T]:
    """The step that commits ``decided`` in place of ``loaded`` and answers its answer
    (nothing for a decision of the workload alone).
    """
    if isinstance(decided, Outcome):
        return Step(loaded.decided(decided.workload), operation, decided.answer)
    return Step(loaded.decided(decided), operation)


def _fence(claim_id: str, fencing_token: int) -> tuple[str, int]:
    """The checked claim id and fencing token of a command (the token checked first)."""
    token = inputs.integer(fencing_token, "fencing_token", 0)
    return inputs.identifier(claim_id, "claim_id"), token


def claim(
    workload_id: str,
    worker: str,
    held: frozenset[str],
    lease_ms: int,
    now: int,
    load: Load,
    dependencies: Callable[[Workload], DependenciesRead],
    rows: RowReader,
) -> Step[WorkloadClaim]:
    """Claim one ready workload by id (``worker``, ``held`` and ``lease_ms`` checked), but
    not while ``dependencies`` reads one of its dependencies not yet in the state it
    requires, nor while its rate limit allows no start or its concurrency key is at its
    limit (their rows read with ``rows``); the claim commits only while each dependency,
    the window and the slot are still as read.
    """
    loaded = load(workload_id)
    timed_out = deadline_step(loaded, now)
    if timed_out is not None:
        return timed_out
    workload = loaded.workload
    if recovery.budget_exhausted(workload):
        # Ready work that has used its budget (an operator re-arm beyond it, or a record
        # left by unbounded recovery) is dead-lettered rather than claimed again.
        return Step(
            loaded.decided(recovery.dead_letter_exhausted(workload, now)),
            Operation.EXHAUSTED,
            refusal=WorkloadError(
                ErrorCode.WORKLOAD_ATTEMPTS_EXHAUSTED,
                f"workload has used its attempt budget of {workload.attempt_count}",
            ),
        )
    # Dependencies are read only for ready work: every other state is refused before them.
    read = (
        dependencies(workload) if workload.state is WorkloadState.READY else DependenciesRead(None)
    )
    if read.awaited is not None and read.ended is not None:
        ended = recovery.dead_letter_unmet(workload, read.awaited, read.ended, now)
        refusal = WorkloadError(
            ErrorCode.WORKLOAD_NOT_READY,
            f"workload will not run: its dependency {read.awaited.workload_id} ended"
            f" {read.ended.value}, not {read.awaited.required_state.value}",
            {"dependency": read.awaited.workload_id, "state": read.ended.value},
        )
        return Step(loaded.decided(ended), Operation.DEPENDENCY, refusal=refusal, held=read.held)
    claimed = lifecycle.claim(workload, worker, held, now, lease_ms, read.awaited)
    guards, taken = _limits_taken(claimed.workload, claimed.answer.claim_id, now, rows)
    step = decided_step(loaded, Operation.CLAIM, claimed)
    return replace(step, held=(*read.held, *guards), also=taken)


def _limits_taken(
    workload: Workload, claim_id: str, now: int, rows: RowReader
) -> tuple[tuple[Precondition, ...], tuple[Mutation, ...]]:
    """The guards and writes of the start of ``workload``'s rate limit and the slot of its
    concurrency key that its claim ``claim_id`` takes (none for work with neither).

    Raises:
        WorkloadError: ``WORKLOAD_NOT_YET_ELIGIBLE`` (its rate limit allows no start
            now: the details say when), ``WORKLOAD_NOT_READY`` (its key is at its limit).
    """
    guards: list[Precondition] = []
    taken: list[Mutation] = []
    if workload.rate_limit is not None:
        start = take_start(workload, now, rows, set())
        if isinstance(start, StartHeld):
            raise WorkloadError(
                ErrorCode.WORKLOAD_NOT_YET_ELIGIBLE,
                f"workload waits its turn under rate limit {workload.rate_limit!r}: "
                f"its next start is allowed in {start.wait_s} s",
                {"eligible_at": now + start.wait_s, "rate_limit": workload.rate_limit},
            )
        if start is not None:
            guards.append(start.guard)
            taken.append(start.mutation)
    if workload.concurrency_key is not None:
        slot = take_slot(workload, claim_id, rows, set())
        if slot is None:
            raise WorkloadError(
                ErrorCode.WORKLOAD_NOT_READY,
                f"workload waits for a slot of concurrency key {workload.concurrency_key!r}: "
                f"{workload.concurrency_limit} of its work already hold a claim",
                {"concurrency_key": workload.concurrency_key},
            )
        guards.append(slot.guard)
        taken.append(slot.mutation)
    return tuple(guards), tuple(taken)


def start(
    workload_id: str, claim_id: str, worker: str, fencing_token: int, now: int, load: Load
) -> Step[None]:
    """Start the claimed attempt."""
    claim_id, token = _fence(claim_id, fencing_token)
    return within_deadlines(
        load(workload_id),
        now,
        Operation.START,
        lambda workload: lifecycle.start(workload, claim_id, worker, token, now),
    )


def heartbeat(beat: Heartbeat, now: int, load: Load, max_lease_ms: int) -> Step[WorkloadClaim]:
    """Extend the claim's lease to ``now + extend_ms`` (at most ``max_lease_ms``)."""
    claim_id, token = _fence(beat.claim_id, beat.fencing_token)
    extend = inputs.lease(beat.extend_ms, "extend_ms", max_lease_ms)
    return within_deadlines(
        load(beat.workload_id),
        now,
        Operation.HEARTBEAT,
        lambda workload: lifecycle.heartbeat(workload, claim_id, beat.worker, token, now, extend),
    )


def execution_context(
    workload_id: str,
    claim_id: str,
    worker: str,
    fencing_token: int,
    secret_references: Iterable[str],
    now: int,
    load: Load,
    outputs: Callable[[Workload], tuple[dict[str, Any], list[str]]],
) -> Step[WorkloadExecutionContext]:
    """The input, scopes, committed checkpoints and the dependencies' ``outputs``, for the
    claim's holder: a read, which commits only the timeout of work found past a deadline.
    """
    claim_id, token = _fence(claim_id, fencing_token)
    references = inputs.identifiers(secret_references, "secret_references")
    loaded = load(workload_id)
    timed_out = deadline_step(loaded, now)
    if timed_out is not None:
        return timed_out
    context = lifecycle.execution_context(loaded.workload, claim_id, worker, token, now, references)
    if not loaded.workload.dependencies:
        return Step(answer=context)
    produced, omitted = outputs(loaded.workload)
    changes = {"dependency_outputs": produced, "dependency_outputs_omitted": omitted}
    return Step(answer=msgspec.structs.replace(context, **changes))


def checkpoint(
    workload_id: str,
    claim_id: str,
    worker: str,
    fencing_token: int,
    state: Any,
    now: int,
    load: Load,
) -> Step[WorkloadCheckpoint]:
    """Record the running attempt's progress."""
    ensure_safe(state, "state")
    claim_id, token = _fence(claim_id, fencing_token)
    return within_deadlines(
        load(workload_id),
        now,
        Operation.CHECKPOINT,
        lambda workload: lifecycle.checkpoint(workload, claim_id, worker, token, state, now),
    )


def complete(
    completion: Completion, now: int, load: Load, owner_of: ResultOwner
) -> Step[WorkloadResult]:
    """Record the running attempt's result and succeed the workload; the same report
    repeated answers the recorded result.
    """
    c = completion
    ensure_safe(c.output, "output")
    claim_id, token = _fence(c.claim_id, c.fencing_token)
    result_id = inputs.identifier(c.result_id, "result_id")
    ensure_safe_text(result_id, "result_id")
    version_of_schema = inputs.integer(c.schema_version, "schema_version", 0)
    paths = inputs.identifiers(c.artifacts, "artifacts", max_chars=MAX_PATH_CHARS)
    for path in paths:
        ensure_safe_text(path, "artifacts")
    loaded = load(c.workload_id)
    workload = loaded.workload
    owner = owner_of(result_id, workload)
    if owner is not None:
        if owner != workload.workload_id:
            raise WorkloadError(
                ErrorCode.WORKLOAD_RESULT_DUPLICATE,
                f"result id {result_id} belongs to another workload",
            )
        output_hash = content_hash(c.output)
        return Step(
            answer=lifecycle.completion_replay(workload, claim_id, c.worker, token, output_hash)
        )
    recorded = (result_id, c.output, paths, version_of_schema)

    def record(workload: Workload) -> Outcome[WorkloadResult]:
        return lifecycle.complete(workload, claim_id, c.worker, token, *recorded, now)

    return within_deadlines(loaded, now, Operation.COMPLETE, record)


def fail(
    workload_id: str,
    claim_id: str,
    worker: str,
    fencing_token: int,
    failure: tuple[str, str, str | None],
    now: int,
    load: Load,
) -> Step[WorkloadState]:
    """Record the current attempt failed (``failure``: its kind, error and effect); the
    retry policy decides what follows. The same report repeated replays its outcome.
    """
    kind, error, effect = failure
    ensure_safe_text(inputs.text(error, "error"), "errors")
    kind = inputs.identifier(kind, "kind")
    ensure_safe_text(kind, "kind")
    if effect is not None and effect not in lifecycle.FAILURE_EFFECTS:
        raise WorkloadError(
            ErrorCode.WORKLOAD_INVALID, 'effect must be "none" or "unknown"', {"fields": ["effect"]}
        )
    claim_id, token = _fence(claim_id, fencing_token)
    loaded = load(workload_id)
    if lifecycle.failure_replay(loaded.workload, claim_id, worker, token, kind, error, effect):
        return Step(answer=loaded.workload.state)
    timed_out = deadline_step(loaded, now)
    if timed_out is not None:
        return timed_out
    failed = lifecycle.fail(loaded.workload, claim_id, worker, token, kind, error, effect, now)
    return Step(loaded.decided(failed), Operation.FAIL, failed.state)


def confirm_cancel(
    workload_id: str, claim_id: str, worker: str, fencing_token: int, now: int, load: Load
) -> Step[None]:
    """The holding worker confirms a requested cancellation (whatever its deadlines)."""
    claim_id, token = _fence(claim_id, fencing_token)
    loaded = load(workload_id)
    cancelled = operators.confirm_cancel(loaded.workload, claim_id, worker, token, now)
    return Step(loaded.decided(cancelled), Operation.CONFIRM_CANCEL)
