"""What the scheduler selects on: the index kept beside each workload, and the candidate
checks (capabilities, dependencies) made only for the few candidates the index returns.
"""

from __future__ import annotations

from feltdb.records.workload import Workload
from feltdb.storage.base import RowIndex
from feltdb.work.deadlines import next_deadline_at
from feltdb.work.partitions import claim_group, rate_of
from feltdb.work.recovery import RECOVERABLE_STATES
from feltdb.work.states import TERMINAL_STATES, WorkloadState

AWAITED_STATES = TERMINAL_STATES | {WorkloadState.DEAD_LETTER}
"""The states a dependency is awaited in by setting its dependents aside: the states work
rests in. A commit into one releases the work set aside for it (``Mutation.releases``);
work awaiting a state its dependency only passes through is checked at each claim."""


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
        environment=workload.environment,
        claim_group=(
            claim_group(
                workload.environment,
                workload.capability_snapshot,
                _limited(workload),
                rate_of(workload.rate_limit, workload.rate_key),
                workload.fairness_key,
            )
            if workload.state is WorkloadState.READY
            else None
        ),
    )


def _limited(workload: Workload) -> tuple[str, int] | None:
    key, limit = workload.concurrency_key, workload.concurrency_limit
    return None if key is None or limit is None else (key, limit)
