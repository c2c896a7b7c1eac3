"""A worker's part of a workload's life, as decisions on a loaded ``Workload``: claiming,
starting, heartbeats, checkpoints, results and failure reports, each behind the fence of
the current claim.

Each function either refuses (raises :class:`WorkloadError`: the caller commits nothing)
or answers the decided workload, a new record, with what the command answers
(:class:`~feltdb.work.outcome.Outcome`; the workload alone when the answer is its new
state). None edits the workload it is given, reads the clock or reads the store: the unit
of work (:mod:`feltdb.work.unit`) loads, calls one of these, and commits the new record
with a compare-and-set on the version it loaded. The operators' part is in
:mod:`feltdb.work.operators`; what follows a failure, a deadline or a lost worker in
:mod:`feltdb.work.recovery`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from msgspec.structs import replace

from feltdb.errors import ErrorCode, WorkloadError
from feltdb.fields import MAX_CHECKPOINTS
from feltdb.records.workload import (
    Workload,
    WorkloadAttempt,
    WorkloadCheckpoint,
    WorkloadClaim,
    WorkloadDependency,
    WorkloadExecutionContext,
    WorkloadResult,
)
from feltdb.storage.canonical import content_hash
from feltdb.work.eligibility import ensure_claimable
from feltdb.work.events import failure_evidence, failures
from feltdb.work.identities import attempt_id_for, checkpoint_id_for, claim_id_for, lease_id_for
from feltdb.work.outcome import Outcome
from feltdb.work.recovery import apply_retry_decision
from feltdb.work.retry import failure_decision
from feltdb.work.states import AttemptStatus, WorkloadState
from feltdb.work.transitions import can_transition, transition, with_last_attempt

RUNNING_STATES = frozenset({WorkloadState.RUNNING, WorkloadState.CHECKPOINTED})
"""States in which a started attempt may checkpoint or complete."""

FAILURE_EFFECTS = frozenset({"none", "unknown"})


def fence(
    workload: Workload, claim_id: str, worker: str, fencing_token: int, now: int
) -> WorkloadClaim:
    """The current claim, if it is exactly the caller's and its lease has not expired.

    Raises:
        WorkloadError: ``WORKLOAD_CLAIM_INVALID`` (no claim), ``WORKLOAD_STALE_FENCE`` (another
            claim or token), ``WORKLOAD_LEASE_EXPIRED``.
    """
    current = workload.current_claim
    if current is None:
        raise WorkloadError(ErrorCode.WORKLOAD_CLAIM_INVALID, "no active claim")
    if (
        current.claim_id != claim_id
        or current.worker_id != worker
        or current.fencing_token != fencing_token
    ):
        raise WorkloadError(ErrorCode.WORKLOAD_STALE_FENCE, "claim or fencing token is stale")
    if current.expires_at <= now:
        raise WorkloadError(
            ErrorCode.WORKLOAD_LEASE_EXPIRED,
            f"claim lease expired at {current.expires_at}",
            {"expires_at": current.expires_at},
        )
    return current


def lease_seconds(lease_ms: int) -> int:
    """Whole seconds a lease of ``lease_ms`` lasts (the reference truncates)."""
    return lease_ms // 1000


def claim(
    workload: Workload,
    worker: str,
    capabilities: frozenset[str],
    now: int,
    lease_ms: int,
    awaited: WorkloadDependency | None = None,
) -> Outcome[WorkloadClaim]:
    """Claim ``workload`` for ``worker`` under a new fencing token and a lease of
    ``lease_ms`` (``awaited``: its first unmet dependency, as
    :func:`~feltdb.work.eligibility.ensure_claimable` reads it).

    Raises:
        WorkloadError: as :func:`~feltdb.work.eligibility.ensure_claimable`.
    """
    ensure_claimable(workload, capabilities, now, awaited)
    token = workload.fencing_token + 1
    attempt_count = workload.attempt_count + 1
    current = WorkloadClaim(
        claim_id=claim_id_for(workload.workload_id, token, worker),
        workload_id=workload.workload_id,
        worker_id=worker,
        lease_id=lease_id_for(token),
        fencing_token=token,
        capability_snapshot=workload.capability_snapshot,
        claimed_at=now,
        expires_at=now + lease_seconds(lease_ms),
        last_heartbeat=now,
    )
    attempt = WorkloadAttempt(
        attempt_id=attempt_id_for(workload.workload_id, attempt_count),
        workload_id=workload.workload_id,
        worker_id=worker,
        claim_id=current.claim_id,
        fencing_token=token,
        input_hash=workload.input_hash,
        status=AttemptStatus.CLAIMED,
    )
    claimed = transition(
        workload,
        WorkloadState.CLAIMED,
        worker,
        now,
        {"fencing_token": str(token)},
        fencing_token=token,
        attempt_count=attempt_count,
        attempts=[*workload.attempts, attempt],
        current_claim=current,
    )
    return Outcome(claimed, current)


def start(workload: Workload, claim_id: str, worker: str, fencing_token: int, now: int) -> Workload:
    """Start the claimed attempt.

    Raises:
        WorkloadError: as :func:`fence`; ``WORKLOAD_TRANSITION_DENIED`` unless ``CLAIMED``.
    """
    fence(workload, claim_id, worker, fencing_token, now)
    if workload.state is not WorkloadState.CLAIMED:
        raise WorkloadError(
            ErrorCode.WORKLOAD_TRANSITION_DENIED,
            f"{workload.state.value} cannot transition to RUNNING",
            {"state": workload.state.value},
        )
    attempts = with_last_attempt(workload, status=AttemptStatus.RUNNING, started_at=now)
    return transition(workload, WorkloadState.RUNNING, worker, now, attempts=attempts)


def heartbeat(
    workload: Workload, claim_id: str, worker: str, fencing_token: int, now: int, extend_ms: int
) -> Outcome[WorkloadClaim]:
    """Record a heartbeat and extend the lease to ``now + extend_ms``.

    Raises:
        WorkloadError: as :func:`fence`.
    """
    current = fence(workload, claim_id, worker, fencing_token, now)
    extended = replace(current, last_heartbeat=now, expires_at=now + lease_seconds(extend_ms))
    return Outcome(replace(workload, current_claim=extended), extended)


def execution_context(
    workload: Workload,
    claim_id: str,
    worker: str,
    fencing_token: int,
    now: int,
    secret_references: Iterable[str],
) -> WorkloadExecutionContext:
    """What the holder of the current claim needs to execute (reads only).

    Raises:
        WorkloadError: as :func:`fence`; ``WORKLOAD_SECRET_REJECTED`` for anything but
            ``secret://`` references.
    """
    current = fence(workload, claim_id, worker, fencing_token, now)
    references = list(secret_references)
    if any(not isinstance(r, str) or not r.startswith("secret://") for r in references):
        raise WorkloadError(
            ErrorCode.WORKLOAD_SECRET_REJECTED, "execution context accepts secret references only"
        )
    return WorkloadExecutionContext(
        workload_id=workload.workload_id,
        attempt_id=workload.attempts[-1].attempt_id,
        worker_id=worker,
        capabilities=current.capability_snapshot,
        connection_scopes=workload.connection_scopes,
        secret_references=references,
        expires_at=current.expires_at,
        fencing_token=fencing_token,
        input=workload.input,
        checkpoints=list(workload.checkpoints),
    )


def _ensure_running(workload: Workload, what: str) -> None:
    if workload.state not in RUNNING_STATES:
        raise WorkloadError(
            ErrorCode.WORKLOAD_TRANSITION_DENIED,
            f"{what} requires a running workload; it is {workload.state.value}",
            {"state": workload.state.value},
        )


def checkpoint(
    workload: Workload, claim_id: str, worker: str, fencing_token: int, state: Any, now: int
) -> Outcome[WorkloadCheckpoint]:
    """Commit progress of the running attempt; the next sequence number is assigned.

    Raises:
        WorkloadError: as :func:`fence`; ``WORKLOAD_TRANSITION_DENIED`` unless running;
            ``WORKLOAD_INVALID`` past :data:`~feltdb.fields.MAX_CHECKPOINTS`.
    """
    fence(workload, claim_id, worker, fencing_token, now)
    _ensure_running(workload, "checkpoint")
    if len(workload.checkpoints) >= MAX_CHECKPOINTS:
        raise WorkloadError(
            ErrorCode.WORKLOAD_INVALID,
            f"workload has {len(workload.checkpoints):,} checkpoints, the most one keeps",
            {"fields": ["checkpoints"], "max_checkpoints": MAX_CHECKPOINTS},
        )
    sequence = len(workload.checkpoints) + 1
    saved = WorkloadCheckpoint(
        checkpoint_id=checkpoint_id_for(workload.workload_id, sequence),
        workload_id=workload.workload_id,
        attempt_id=workload.attempts[-1].attempt_id,
        sequence=sequence,
        state=state,
        state_hash=content_hash(state),
        created_at=now,
        produced_by=worker,
    )
    changes: dict[str, Any] = {
        "attempts": with_last_attempt(workload, status=AttemptStatus.CHECKPOINTED),
        "checkpoints": [*workload.checkpoints, saved],
    }
    if workload.state is WorkloadState.RUNNING:
        checkpointed = transition(workload, WorkloadState.CHECKPOINTED, worker, now, **changes)
        return Outcome(checkpointed, saved)
    return Outcome(replace(workload, **changes), saved)


def completion_replay(
    workload: Workload, claim_id: str, worker: str, fencing_token: int, output_hash: str
) -> WorkloadResult:
    """The recorded result when this report is the one that produced it (a retried report
    after a lost response). Anything else naming the result id did not produce it and must
    not be told it landed.

    Raises:
        WorkloadError: ``WORKLOAD_RESULT_CONFLICT``.
    """
    result = workload.result
    if (
        result is not None
        and result.produced_by == worker
        and result.provenance.get("claim_id") == claim_id
        and result.provenance.get("fencing_token") == str(fencing_token)
        and result.output_hash == output_hash
    ):
        return result
    raise WorkloadError(
        ErrorCode.WORKLOAD_RESULT_CONFLICT,
        "the result id was already recorded by a different report",
    )


def complete(
    workload: Workload,
    claim_id: str,
    worker: str,
    fencing_token: int,
    result_id: str,
    output: Any,
    artifacts: list[str],
    schema_version: int,
    now: int,
) -> Outcome[WorkloadResult]:
    """Record the running attempt's result and succeed the workload.

    Raises:
        WorkloadError: as :func:`fence`; ``WORKLOAD_TRANSITION_DENIED`` unless running
            (e.g. cancellation was requested).
    """
    fence(workload, claim_id, worker, fencing_token, now)
    _ensure_running(workload, "completion")
    output_hash = content_hash(output)
    result = WorkloadResult(
        result_id=result_id,
        workload_id=workload.workload_id,
        attempt_id=workload.attempts[-1].attempt_id,
        status="succeeded",
        output=output,
        output_hash=output_hash,
        artifacts=artifacts,
        provenance={"claim_id": claim_id, "fencing_token": str(fencing_token)},
        produced_by=worker,
        created_at=now,
        schema_version=schema_version,
    )
    attempts = with_last_attempt(
        workload, status=AttemptStatus.SUCCEEDED, ended_at=now, result_hash=output_hash
    )
    succeeded = transition(
        workload,
        WorkloadState.SUCCEEDED,
        worker,
        now,
        attempts=attempts,
        result=result,
        current_claim=None,
    )
    return Outcome(succeeded, result)


def failure_replay(
    workload: Workload,
    claim_id: str,
    worker: str,
    fencing_token: int,
    kind: str,
    error: str,
    effect: str | None,
) -> bool:
    """Whether this failure report repeats the one the named attempt already committed
    (a lost response): then its outcome is replayed and nothing is committed.
    """
    for attempt in workload.attempts:
        if (
            attempt.claim_id == claim_id
            and attempt.worker_id == worker
            and attempt.fencing_token == fencing_token
            and attempt.status in (AttemptStatus.FAILED, AttemptStatus.SUCCEEDED)
        ):
            if attempt.status is not AttemptStatus.FAILED or attempt.error != error:
                return False
            said = next((f for f in failures(workload) if f.attempt_id == attempt.attempt_id), None)
            return (
                said is not None and said.kind == kind and (effect is None or said.effect == effect)
            )
    return False


def fail(
    workload: Workload,
    claim_id: str,
    worker: str,
    fencing_token: int,
    kind: str,
    error: str,
    effect: str | None,
    now: int,
) -> Workload:
    """Record the current attempt's failure; the retry policy decides ``READY`` (with
    backoff) or ``DEAD_LETTER``. Accepted from ``CLAIMED`` (could not start; effect
    ``none`` implied) as well as from a started attempt.

    Raises:
        WorkloadError: as :func:`fence`; ``WORKLOAD_TRANSITION_DENIED`` when the state
            allows no failure (e.g. cancellation was requested).
    """
    fence(workload, claim_id, worker, fencing_token, now)
    started = workload.state is not WorkloadState.CLAIMED
    if effect is None and not started:
        effect = "none"
    if not can_transition(workload.state, WorkloadState.FAILED):
        raise WorkloadError(
            ErrorCode.WORKLOAD_TRANSITION_DENIED,
            f"{workload.state.value} cannot transition to FAILED",
            {"state": workload.state.value},
        )
    evidence = failure_evidence(kind, workload.attempts[-1].attempt_id, effect)
    failed = transition(
        workload,
        WorkloadState.FAILED,
        worker,
        now,
        evidence,
        attempts=with_last_attempt(
            workload, status=AttemptStatus.FAILED, ended_at=now, error=error
        ),
        last_failure=f"{kind}: {error}",
        current_claim=None,
    )
    return apply_retry_decision(failed, failure_decision(failed, kind, effect), now)
