"""Every change the authority makes to a workload, as a pure edit of a loaded ``Workload``.

Each function either refuses (raises :class:`WorkloadError`, leaving the workload as it
was *for the caller's purposes*: the caller discards it and commits nothing) or edits the
workload in place and returns what the operation answers. None reads the clock or the
store; :class:`~feltdb.work.store.WorkloadStore` loads, calls one of these, and commits
the result with a compare-and-set on the version it loaded.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from feltdb.auth import Subject
from feltdb.canonical import content_hash
from feltdb.errors import ErrorCode, WorkloadError
from feltdb.work.identities import (
    attempt_id_for,
    checkpoint_id_for,
    claim_id_for,
    lease_id_for,
)
from feltdb.work.models import (
    ApprovalDecision,
    Workload,
    WorkloadAttempt,
    WorkloadCheckpoint,
    WorkloadClaim,
    WorkloadEvent,
    WorkloadExecutionContext,
    WorkloadResult,
)
from feltdb.work.retry import (
    RETRY,
    attempt_budget,
    backoff_delay_ms,
    deadline_decision,
    failure_decision,
    operator_retries,
    recovery_decision,
)
from feltdb.work.states import (
    HELD_STATES,
    ApprovalOutcome,
    AttemptStatus,
    WorkloadState,
)
from feltdb.work.transitions import EVENT_NAMES, can_transition

_S = WorkloadState

RUNNING_STATES = frozenset({_S.RUNNING, _S.CHECKPOINTED})
"""States in which a started attempt may checkpoint or complete."""

RECOVERABLE_STATES = HELD_STATES | {_S.CANCELLATION_REQUESTED}
"""States whose lease expiry ``recover_expired`` acts on."""

FAILURE_EFFECTS = frozenset({"none", "unknown"})


def transition(
    w: Workload, to: WorkloadState, actor: str, at: int, evidence: dict[str, str] | None = None
) -> None:
    """Move ``w`` to ``to`` and record the event, if the state machine allows it.

    Raises:
        WorkloadError: ``WORKLOAD_TRANSITION_DENIED``.
    """
    if not can_transition(w.state, to):
        raise WorkloadError(
            ErrorCode.WORKLOAD_TRANSITION_DENIED,
            f"{w.state.value} cannot transition to {to.value}",
            {"state": w.state.value, "to": to.value},
        )
    sequence = w.execution_history[-1].sequence + 1 if w.execution_history else 1
    w.execution_history.append(
        WorkloadEvent(
            sequence=sequence,
            event_type=EVENT_NAMES[to],
            from_state=w.state,
            to=to,
            actor=actor,
            at=at,
            evidence=evidence or {},
        )
    )
    w.state = to
    w.updated_at = at


def fence(w: Workload, claim_id: str, worker: str, fencing_token: int, now: int) -> WorkloadClaim:
    """The current claim, if it is exactly the caller's and its lease has not expired.

    Raises:
        WorkloadError: ``WORKLOAD_CLAIM_INVALID`` (no claim), ``WORKLOAD_STALE_FENCE`` (another
            claim or token), ``WORKLOAD_LEASE_EXPIRED``.
    """
    current = w.current_claim
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


def budget_exhausted(w: Workload) -> bool:
    """A ``READY`` workload that has used its attempt budget must not be claimed again."""
    return w.state is _S.READY and w.attempt_count >= attempt_budget(w)


def dead_letter_exhausted(w: Workload, now: int) -> None:
    """Dead-letter ready work whose budget is spent (instead of claiming it)."""
    transition(
        w,
        _S.DEAD_LETTER,
        "feltdb.claim",
        now,
        {
            "reason": "attempt_budget_exhausted",
            "attempts_used": str(w.attempt_count),
            "attempt_budget": str(attempt_budget(w)),
        },
    )


def ensure_claimable(w: Workload, capabilities: frozenset[str], now: int) -> None:
    """Refuse a claim of ``w`` by a worker holding ``capabilities`` at ``now``.

    Raises:
        WorkloadError: ``WORKLOAD_APPROVAL_PENDING``, ``WORKLOAD_REJECTED``,
            ``WORKLOAD_NOT_READY`` (wrong state: may never be claimable),
            ``WORKLOAD_NOT_YET_ELIGIBLE`` (early: claimable at the instant it names),
            ``WORKLOAD_CAPABILITY_DENIED``.
    """
    if w.state is _S.AWAITING_APPROVAL:
        raise WorkloadError(ErrorCode.WORKLOAD_APPROVAL_PENDING, "workload is awaiting approval")
    if w.state is _S.REJECTED:
        raise WorkloadError(ErrorCode.WORKLOAD_REJECTED, "workload was rejected and will not run")
    if w.state is not _S.READY:
        raise WorkloadError(
            ErrorCode.WORKLOAD_NOT_READY,
            f"workload is not eligible: it is {w.state.value}",
            {"state": w.state.value},
        )
    # Independently of its state, no workload that requires approval is claimed without
    # an approved decision.
    if w.approval is not None and not w.approval.approved():
        raise WorkloadError(
            ErrorCode.WORKLOAD_APPROVAL_PENDING, "workload has no approved decision"
        )
    # Separate from the state check because the two mean opposite things to a worker: wrong
    # state may never become claimable, early certainly will, at the instant named here.
    if not w.is_eligible_at(now):
        raise WorkloadError(
            ErrorCode.WORKLOAD_NOT_YET_ELIGIBLE,
            f"workload is not claimable until {w.next_attempt_at}",
            {"eligible_at": w.next_attempt_at},
        )
    missing = w.capability_snapshot - capabilities
    if missing:
        raise WorkloadError(
            ErrorCode.WORKLOAD_CAPABILITY_DENIED,
            "worker lacks required capability snapshot: " + ", ".join(sorted(missing)),
            {"missing": sorted(missing)},
        )


def claim(
    w: Workload, worker: str, capabilities: frozenset[str], now: int, lease_ms: int
) -> WorkloadClaim:
    """Claim ``w`` for ``worker`` under a new fencing token and a lease of ``lease_ms``.

    Raises:
        WorkloadError: as :func:`ensure_claimable`.
    """
    ensure_claimable(w, capabilities, now)
    w.fencing_token += 1
    w.attempt_count += 1
    current = WorkloadClaim(
        claim_id=claim_id_for(w.workload_id, w.fencing_token, worker),
        workload_id=w.workload_id,
        worker_id=worker,
        lease_id=lease_id_for(w.fencing_token),
        fencing_token=w.fencing_token,
        capability_snapshot=w.capability_snapshot,
        claimed_at=now,
        expires_at=now + lease_seconds(lease_ms),
        last_heartbeat=now,
    )
    w.attempts.append(
        WorkloadAttempt(
            attempt_id=attempt_id_for(w.workload_id, w.attempt_count),
            workload_id=w.workload_id,
            worker_id=worker,
            claim_id=current.claim_id,
            fencing_token=current.fencing_token,
            input_hash=w.input_hash,
            status=AttemptStatus.CLAIMED,
        )
    )
    w.current_claim = current
    transition(w, _S.CLAIMED, worker, now, {"fencing_token": str(current.fencing_token)})
    return current.model_copy(deep=True)


def start(w: Workload, claim_id: str, worker: str, fencing_token: int, now: int) -> None:
    """Start the claimed attempt.

    Raises:
        WorkloadError: as :func:`fence`; ``WORKLOAD_TRANSITION_DENIED`` unless ``CLAIMED``.
    """
    fence(w, claim_id, worker, fencing_token, now)
    if w.state is not _S.CLAIMED:
        raise WorkloadError(
            ErrorCode.WORKLOAD_TRANSITION_DENIED,
            f"{w.state.value} cannot transition to RUNNING",
            {"state": w.state.value},
        )
    attempt = w.attempts[-1]
    attempt.status = AttemptStatus.RUNNING
    attempt.started_at = now
    transition(w, _S.RUNNING, worker, now)


def heartbeat(
    w: Workload, claim_id: str, worker: str, fencing_token: int, now: int, extend_ms: int
) -> WorkloadClaim:
    """Record a heartbeat and extend the lease to ``now + extend_ms``.

    Raises:
        WorkloadError: as :func:`fence`.
    """
    current = fence(w, claim_id, worker, fencing_token, now)
    current.last_heartbeat = now
    current.expires_at = now + lease_seconds(extend_ms)
    return current.model_copy(deep=True)


def execution_context(
    w: Workload,
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
    current = fence(w, claim_id, worker, fencing_token, now)
    references = list(secret_references)
    if any(not isinstance(r, str) or not r.startswith("secret://") for r in references):
        raise WorkloadError(
            ErrorCode.WORKLOAD_SECRET_REJECTED, "execution context accepts secret references only"
        )
    return WorkloadExecutionContext(
        workload_id=w.workload_id,
        attempt_id=w.attempts[-1].attempt_id,
        worker_id=worker,
        capabilities=current.capability_snapshot,
        connection_scopes=w.connection_scopes,
        secret_references=references,
        expires_at=current.expires_at,
        fencing_token=fencing_token,
        input=w.input,
        checkpoints=list(w.checkpoints),
    )


def _ensure_running(w: Workload, what: str) -> None:
    if w.state not in RUNNING_STATES:
        raise WorkloadError(
            ErrorCode.WORKLOAD_TRANSITION_DENIED,
            f"{what} requires a running workload; it is {w.state.value}",
            {"state": w.state.value},
        )


def checkpoint(
    w: Workload, claim_id: str, worker: str, fencing_token: int, state: Any, now: int
) -> WorkloadCheckpoint:
    """Commit progress of the running attempt; the next sequence number is assigned.

    Raises:
        WorkloadError: as :func:`fence`; ``WORKLOAD_TRANSITION_DENIED`` unless running.
    """
    fence(w, claim_id, worker, fencing_token, now)
    _ensure_running(w, "checkpoint")
    attempt = w.attempts[-1]
    attempt.status = AttemptStatus.CHECKPOINTED
    sequence = len(w.checkpoints) + 1
    saved = WorkloadCheckpoint(
        checkpoint_id=checkpoint_id_for(w.workload_id, sequence),
        workload_id=w.workload_id,
        attempt_id=attempt.attempt_id,
        sequence=sequence,
        state=state,
        state_hash=content_hash(state),
        created_at=now,
        produced_by=worker,
    )
    w.checkpoints.append(saved)
    if w.state is _S.RUNNING:
        transition(w, _S.CHECKPOINTED, worker, now)
    return saved


def completion_replay(
    w: Workload, claim_id: str, worker: str, fencing_token: int, output_hash: str
) -> WorkloadResult:
    """The recorded result when this report is the one that produced it (a retried report
    after a lost response). Anything else naming the result id did not produce it and must
    not be told it landed.

    Raises:
        WorkloadError: ``WORKLOAD_RESULT_CONFLICT``.
    """
    result = w.result
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
    w: Workload,
    claim_id: str,
    worker: str,
    fencing_token: int,
    result_id: str,
    output: Any,
    artifacts: list[str],
    schema_version: int,
    now: int,
) -> WorkloadResult:
    """Record the running attempt's result and succeed the workload.

    Raises:
        WorkloadError: as :func:`fence`; ``WORKLOAD_TRANSITION_DENIED`` unless running
            (e.g. cancellation was requested).
    """
    fence(w, claim_id, worker, fencing_token, now)
    _ensure_running(w, "completion")
    attempt = w.attempts[-1]
    output_hash = content_hash(output)
    attempt.status = AttemptStatus.SUCCEEDED
    attempt.ended_at = now
    attempt.result_hash = output_hash
    result = WorkloadResult(
        result_id=result_id,
        workload_id=w.workload_id,
        attempt_id=attempt.attempt_id,
        status="succeeded",
        output=output,
        output_hash=output_hash,
        artifacts=artifacts,
        provenance={"claim_id": claim_id, "fencing_token": str(fencing_token)},
        produced_by=worker,
        created_at=now,
        schema_version=schema_version,
    )
    w.result = result
    w.current_claim = None
    transition(w, _S.SUCCEEDED, worker, now)
    return result


def failure_replay(
    w: Workload,
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
    for attempt in w.attempts:
        if (
            attempt.claim_id == claim_id
            and attempt.worker_id == worker
            and attempt.fencing_token == fencing_token
            and attempt.status in (AttemptStatus.FAILED, AttemptStatus.SUCCEEDED)
        ):
            if attempt.status is not AttemptStatus.FAILED or attempt.error != error:
                return False
            for event in reversed(w.execution_history):
                if event.to is _S.FAILED and event.evidence.get("attempt_id") == attempt.attempt_id:
                    return event.evidence.get("failure_kind") == kind and (
                        effect is None or event.evidence.get("effect") == effect
                    )
            return False
    return False


def fail(
    w: Workload,
    claim_id: str,
    worker: str,
    fencing_token: int,
    kind: str,
    error: str,
    effect: str | None,
    now: int,
) -> WorkloadState:
    """Record the current attempt's failure; the retry policy decides ``READY`` (with
    backoff) or ``DEAD_LETTER``. Accepted from ``CLAIMED`` (could not start; effect
    ``none`` implied) as well as from a started attempt.

    Raises:
        WorkloadError: as :func:`fence`; ``WORKLOAD_TRANSITION_DENIED`` when the state
            allows no failure (e.g. cancellation was requested).
    """
    fence(w, claim_id, worker, fencing_token, now)
    started = w.state is not _S.CLAIMED
    if effect is None and not started:
        effect = "none"
    if not can_transition(w.state, _S.FAILED):
        raise WorkloadError(
            ErrorCode.WORKLOAD_TRANSITION_DENIED,
            f"{w.state.value} cannot transition to FAILED",
            {"state": w.state.value},
        )
    attempt = w.attempts[-1]
    attempt.status = AttemptStatus.FAILED
    attempt.ended_at = now
    attempt.error = error
    w.last_failure = f"{kind}: {error}"
    w.current_claim = None
    evidence = {"failure_kind": kind, "attempt_id": attempt.attempt_id}
    if effect is not None:
        evidence["effect"] = effect
    transition(w, _S.FAILED, worker, now, evidence)
    decision = failure_decision(w, kind, effect)
    if decision == RETRY:
        w.retry_count += 1
        delay_ms = backoff_delay_ms(w.retry_policy, w.retry_count)
        w.next_attempt_at = now + delay_ms // 1000
        transition(w, _S.READY, "feltdb.retry", now, {"decision": decision})
    else:
        transition(w, _S.DEAD_LETTER, "feltdb.retry", now, {"decision": decision})
    return w.state


CANCEL_AT_ONCE = frozenset({_S.READY, _S.CREATED, _S.AWAITING_APPROVAL, _S.FAILED, _S.DEAD_LETTER})
"""States cancelled at once: no worker holds the work."""


def cancel(w: Workload, actor: str, now: int) -> WorkloadState:
    """Cancel: at once when no worker holds the work, otherwise request it of the worker.
    A repeated request changes nothing.

    Raises:
        WorkloadError: ``WORKLOAD_TRANSITION_DENIED`` for finished work.
    """
    if w.state in CANCEL_AT_ONCE:
        w.current_claim = None
        transition(w, _S.CANCELLED, actor, now)
    elif w.state in HELD_STATES:
        transition(w, _S.CANCELLATION_REQUESTED, actor, now)
    elif w.state is not _S.CANCELLATION_REQUESTED:
        raise WorkloadError(
            ErrorCode.WORKLOAD_TRANSITION_DENIED,
            f"a {w.state.value} workload cannot be cancelled",
            {"state": w.state.value},
        )
    return w.state


def confirm_cancel(w: Workload, claim_id: str, worker: str, fencing_token: int, now: int) -> None:
    """The holding worker confirms a requested cancellation; the attempt ends cancelled.

    Raises:
        WorkloadError: as :func:`fence`; ``WORKLOAD_TRANSITION_DENIED`` when cancellation was
            not requested.
    """
    fence(w, claim_id, worker, fencing_token, now)
    if w.state is not _S.CANCELLATION_REQUESTED:
        raise WorkloadError(ErrorCode.WORKLOAD_TRANSITION_DENIED, "cancellation was not requested")
    if w.attempts:
        w.attempts[-1].status = AttemptStatus.CANCELLED
        w.attempts[-1].ended_at = now
    w.current_claim = None
    transition(w, _S.CANCELLED, worker, now)


def _end_held_attempt(w: Workload, status: AttemptStatus, now: int, error: str | None) -> None:
    # A Ready workload has no attempt in progress: the last attempt's recorded outcome is
    # not this timeout's to overwrite.
    if w.state in HELD_STATES and w.attempts:
        attempt = w.attempts[-1]
        attempt.status = status
        attempt.ended_at = now
        if error is not None:
            attempt.error = error


def timeout(w: Workload, actor: str, now: int) -> WorkloadState:
    """An operator's explicit timeout of ready or held work; retried by the policy's
    ``timeout`` rule within the attempt budget, otherwise dead-lettered.

    Raises:
        WorkloadError: ``WORKLOAD_TRANSITION_DENIED`` in any other state.
    """
    if w.state is not _S.READY and w.state not in HELD_STATES:
        raise WorkloadError(
            ErrorCode.WORKLOAD_TRANSITION_DENIED,
            f"a {w.state.value} workload cannot time out",
            {"state": w.state.value},
        )
    _end_held_attempt(w, AttemptStatus.TIMED_OUT, now, None)
    w.current_claim = None
    transition(w, _S.TIMED_OUT, actor, now)
    if w.attempt_count < attempt_budget(w) and "timeout" in w.retry_policy.retry_on:
        w.retry_count += 1
        w.next_attempt_at = now + w.retry_policy.initial_delay_ms // 1000
        transition(w, _S.READY, "feltdb.retry", now)
    else:
        transition(w, _S.DEAD_LETTER, "feltdb.timeout", now)
    return w.state


RETRYABLE_BY_OPERATOR = frozenset({_S.FAILED, _S.DEAD_LETTER, _S.TIMED_OUT})


def operator_retry(w: Workload, actor: str, now: int, reason: str | None) -> None:
    """An operator's re-arm: one more attempt, recorded with actor and reason, at most
    ``max_attempts`` times. Work never approved waits for a decision again.

    Raises:
        WorkloadError: ``WORKLOAD_TRANSITION_DENIED`` unless failed, dead-lettered or timed
            out; ``WORKLOAD_RETRY_EXHAUSTED`` when every operator retry is used.
    """
    if w.state not in RETRYABLE_BY_OPERATOR:
        raise WorkloadError(
            ErrorCode.WORKLOAD_TRANSITION_DENIED,
            f"a {w.state.value} workload is not retryable",
            {"state": w.state.value},
        )
    previous = operator_retries(w)
    if previous >= w.retry_policy.max_attempts:
        raise WorkloadError(
            ErrorCode.WORKLOAD_RETRY_EXHAUSTED,
            "workload has used every operator retry its policy allows",
            {"operator_retries": previous},
        )
    w.next_attempt_at = now
    w.current_claim = None
    evidence = {
        "retry": "operator",
        "operator_retry": str(previous + 1),
        "attempt_budget": str(w.retry_policy.max_attempts + previous + 1),
    }
    if reason is not None:  # the store passes a stripped reason, or None for a blank one
        evidence["reason"] = reason[:256]
    # A re-arm never stands in for approval.
    waiting = w.approval is not None and not w.approval.approved()
    transition(w, _S.AWAITING_APPROVAL if waiting else _S.READY, actor, now, evidence)


def decide(
    w: Workload,
    decider: Subject,
    outcome: ApprovalOutcome,
    reason: str | None,
    grant_id: str,
    input_hash: str,
    now: int,
) -> ApprovalDecision:
    """Commit a decision on work awaiting approval (the policy checks come first).

    Raises:
        WorkloadError: ``WORKLOAD_CONFLICT`` when a decision is already committed;
            ``WORKLOAD_APPROVAL_NOT_ACTIONABLE`` when no longer awaiting approval.
    """
    approval = w.approval
    if approval is None or approval.decision is not None:
        raise WorkloadError(
            ErrorCode.WORKLOAD_CONFLICT,
            "another writer committed a decision first; ask again for it",
        )
    if w.state is not _S.AWAITING_APPROVAL:
        raise WorkloadError(
            ErrorCode.WORKLOAD_APPROVAL_NOT_ACTIONABLE,
            "the workload is no longer awaiting approval",
            {"state": w.state.value},
        )
    decision = ApprovalDecision(
        outcome=outcome,
        decided_by=decider,
        decided_at=now,
        reason=reason[:512] if reason is not None else None,
        grant_id=grant_id,
        input_hash=input_hash,
    )
    approval.decision = decision
    evidence = {
        "decided_by": decider.id,
        "decider_kind": decider.kind.value,
        "grant_id": grant_id,
    }
    if decision.reason is not None:
        evidence["reason"] = decision.reason
    to = _S.READY if outcome is ApprovalOutcome.APPROVED else _S.REJECTED
    transition(w, to, decider.id, now, evidence)
    return decision


def expire(w: Workload, deadline: str, at: int, now: int) -> None:
    """Time out work past ``deadline`` (which fell at ``at``): the attempt ends timed out,
    and the policy decides ``READY`` or ``DEAD_LETTER``.
    """
    lost = w.current_claim
    _end_held_attempt(w, AttemptStatus.TIMED_OUT, now, f"timeout: {deadline} deadline passed")
    w.current_claim = None
    evidence = {"deadline": deadline, "deadline_at": str(at)}
    if lost is not None:
        evidence["claim_id"] = lost.claim_id
        evidence["worker_id"] = lost.worker_id
    transition(w, _S.TIMED_OUT, "feltdb.deadline", now, evidence)
    decision = deadline_decision(w, deadline)
    if decision == RETRY:
        w.retry_count += 1
        w.next_attempt_at = now + w.retry_policy.initial_delay_ms // 1000
        transition(w, _S.READY, "feltdb.deadline", now, {"decision": decision})
    else:
        transition(w, _S.DEAD_LETTER, "feltdb.deadline", now, {"decision": decision})


def lease_expired(w: Workload, now: int) -> bool:
    """Whether ``w`` is held under a lease that has expired at ``now``."""
    return (
        w.current_claim is not None
        and w.current_claim.expires_at <= now
        and w.state in RECOVERABLE_STATES
    )


def recover(w: Workload, now: int) -> None:
    """Recover work whose worker was lost (its lease expired): the attempt is recorded as
    lost; requested cancellation completes; otherwise the policy decides ``READY`` or
    ``DEAD_LETTER``.
    """
    lost = w.current_claim
    w.current_claim = None
    if w.attempts:
        attempt = w.attempts[-1]
        attempt.status = AttemptStatus.WORKER_LOST
        attempt.ended_at = now
        attempt.error = "worker_lost: claim lease expired"
    evidence = {
        "recovery_reason": "lease_expired",
        "attempts_used": str(w.attempt_count),
        "attempt_budget": str(attempt_budget(w)),
    }
    if lost is not None:
        evidence["claim_id"] = lost.claim_id
        evidence["worker_id"] = lost.worker_id
        evidence["lease_expired_at"] = str(lost.expires_at)
    if w.attempts:
        evidence["attempt_id"] = w.attempts[-1].attempt_id
    if w.state is _S.CANCELLATION_REQUESTED:
        transition(w, _S.CANCELLED, "feltdb.recovery", now, evidence)
        return
    transition(w, _S.RECOVERING, "feltdb.recovery", now, evidence)
    decision = recovery_decision(w)
    to = _S.READY if decision == RETRY else _S.DEAD_LETTER
    transition(w, to, "feltdb.recovery", now, {"decision": decision})
