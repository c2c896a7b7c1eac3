"""What the scheduler selects on: the index kept beside each workload, and the candidate
checks (capabilities, dependencies) made only for the few candidates the index returns.
"""

from __future__ import annotations

from collections.abc import Callable

from feltdb.records.workload import Workload
from feltdb.storage.base import RowIndex
from feltdb.work.deadlines import next_deadline_at
from feltdb.work.partitions import claim_group
from feltdb.work.recovery import RECOVERABLE_STATES
from feltdb.work.states import WorkloadState


def row_index(workload: Workload) -> RowIndex:
    """The index fields of ``workload``, derived from the workload alone.

    ``lease_expires_at`` is set only while a lease can expire into recovery,
    ``deadline_at`` only while a deadline can fall, and ``claim_group`` only while the
    work is ``READY``, so the maintenance queries return exactly the work they may act on,
    and a claim only work it may take.
    """
    claim = workload.current_claim
    return RowIndex(
        tenant_id=workload.tenant_id,
        application_id=workload.application_id,
        state=workload.state.value,
        priority=workload.priority,
        created_at=workload.created_at,
        eligible_at=workload.next_attempt_at,
        lease_expires_at=(
            claim.expires_at if claim is not None and workload.state in RECOVERABLE_STATES else None
        ),
        deadline_at=next_deadline_at(workload),
        result_id=workload.result.result_id if workload.result is not None else None,
        definition_id=workload.definition_id,
        claim_group=(
            claim_group(workload.environment, workload.capability_snapshot)
            if workload.state is WorkloadState.READY
            else None
        ),
    )


def dependencies_satisfied(
    workload: Workload, state_of: Callable[[str], WorkloadState | None]
) -> bool:
    """Whether every dependency of ``workload`` is in its required state (``state_of`` answers a
    workload id with its committed state, ``None`` when there is no such workload).
    """
    return all(state_of(d.workload_id) is d.required_state for d in workload.dependencies)
