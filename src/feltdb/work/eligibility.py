"""Whether a worker may claim a workload now: the rules every claim obeys, by id or by the
scheduler, in the order a refusal names them.

The state is checked first (held for approval, rejected, not ready), then what passes in
time (an approved decision, ``not_before``, dependencies), then what the worker lacks (its
capabilities): a worker told "not yet" learns when, or what for, to ask again.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final

from feltdb.errors import ErrorCode, WorkloadError
from feltdb.records.workload import DURABLE_WORK_COLLECTION, Workload, WorkloadDependency
from feltdb.storage.base import Precondition, StoredRow
from feltdb.work.scheduling import AWAITED_STATES
from feltdb.work.states import TERMINAL_STATES, WorkloadState

GUARDED_STATES: Final = AWAITED_STATES - TERMINAL_STATES
"""The states work rests in that a transition still leaves (a dead letter, until an operator
retries it): a dependency met in one is guarded at the version read, which changes only as
it leaves. One met in a terminal state stays met; one awaited in a state it passes through
(running, say) is met when read, and not guarded: its every heartbeat would refuse the
claim."""


@dataclass(frozen=True, slots=True)
class DependenciesRead:
    """What a claim read of a workload's dependencies."""

    awaited: WorkloadDependency | None
    """A dependency not in the state it requires: one that :attr:`ended`, else the first
    (``None``: every one is in its state)."""
    held: tuple[Precondition, ...] = ()
    """When every one is met: a guard of each dependency's row met in one of
    :data:`GUARDED_STATES` (a dead letter an operator may retry), at the version read, so that
    a claim decided on this reading commits only while each is still as read. When one
    :attr:`ended`: a guard of its row as read, for the decision that ends the dependent."""
    awaited_version: int | None = None
    """The version ``awaited``'s row was read at (``None``: no such workload)."""
    ended: WorkloadState | None = None
    """The state ``awaited`` rests in, when it rests (:data:`AWAITED_STATES`) in another
    than it requires: it will not reach that state unless an operator re-arms it, so the
    dependent will not run (:func:`~feltdb.work.recovery.dead_letter_unmet`)."""


def _guard(row: StoredRow) -> Precondition:
    return Precondition(DURABLE_WORK_COLLECTION, row.key, expected_version=row.version)


def read_dependencies(
    dependencies: Sequence[WorkloadDependency], row_of: Callable[[str], StoredRow | None]
) -> DependenciesRead:
    """A workload's ``dependencies`` as ``row_of`` reads each one's committed row (``None``:
    no such workload of its application, a dependency never met). Every one is read while
    none has ended: a dependency that ended decides before one still on its way.
    """
    held: list[Precondition] = []
    unmet: DependenciesRead | None = None
    for dependency in dependencies:
        row = row_of(dependency.workload_id)
        state = None if row is None else WorkloadState(row.document["state"])
        if row is None or state is not dependency.required_state:
            version = None if row is None else row.version
            if state in AWAITED_STATES and row is not None:
                return DependenciesRead(dependency, (_guard(row),), version, state)
            unmet = unmet or DependenciesRead(dependency, awaited_version=version)
        elif state in GUARDED_STATES:
            held.append(_guard(row))
    return unmet or DependenciesRead(None, tuple(held))


def ensure_claimable(
    workload: Workload,
    capabilities: frozenset[str],
    now: int,
    awaited: WorkloadDependency | None = None,
) -> None:
    """Refuse a claim of ``workload`` by a worker holding ``capabilities`` at ``now``,
    ``awaited`` being the first of its dependencies not yet in the state it requires
    (``None``: every one is).

    Raises:
        WorkloadError: ``WORKLOAD_APPROVAL_PENDING``, ``WORKLOAD_REJECTED``,
            ``WORKLOAD_NOT_READY`` (wrong state: may never be claimable),
            ``WORKLOAD_NOT_YET_ELIGIBLE`` (early: claimable at the instant it names, or
            once the dependency it names is in the state it names),
            ``WORKLOAD_CAPABILITY_DENIED``.
    """
    if workload.state is WorkloadState.AWAITING_APPROVAL:
        raise WorkloadError(ErrorCode.WORKLOAD_APPROVAL_PENDING, "workload is awaiting approval")
    if workload.state is WorkloadState.REJECTED:
        raise WorkloadError(ErrorCode.WORKLOAD_REJECTED, "workload was rejected and will not run")
    if workload.state is not WorkloadState.READY:
        raise WorkloadError(
            ErrorCode.WORKLOAD_NOT_READY,
            f"workload is not eligible: it is {workload.state.value}",
            {"state": workload.state.value},
        )
    # Independently of its state, no workload that requires approval is claimed without
    # an approved decision.
    if workload.approval is not None and not workload.approval.approved():
        raise WorkloadError(
            ErrorCode.WORKLOAD_APPROVAL_PENDING, "workload has no approved decision"
        )
    # Separate from the state check because the two mean opposite things to a worker: wrong
    # state may never become claimable, early certainly will, at the instant named here.
    if not workload.is_eligible_at(now):
        raise WorkloadError(
            ErrorCode.WORKLOAD_NOT_YET_ELIGIBLE,
            f"workload is not claimable until {workload.next_attempt_at}",
            {"eligible_at": workload.next_attempt_at},
        )
    # The scheduler never offers such work; a claim by id must not take it either, or an
    # approval gate could be sidestepped by claiming whatever depends on the gated work.
    if awaited is not None:
        raise WorkloadError(
            ErrorCode.WORKLOAD_NOT_YET_ELIGIBLE,
            f"workload waits for {awaited.workload_id} to be {awaited.required_state.value}",
            {"waits_for": awaited.workload_id, "required_state": awaited.required_state.value},
        )
    missing = workload.capability_snapshot - capabilities
    if missing:
        raise WorkloadError(
            ErrorCode.WORKLOAD_CAPABILITY_DENIED,
            "worker lacks required capability snapshot: " + ", ".join(sorted(missing)),
            {"missing": sorted(missing)},
        )
