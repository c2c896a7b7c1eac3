"""A workload summarized for a list (:class:`~feltdb.records.summary.WorkloadSummary`):
made from the committed workload, by the same rules that read it elsewhere (its deadlines,
its last attempt's effect), so that a list and a workload's own page never disagree.
"""

from __future__ import annotations

import msgspec

from feltdb.records.summary import INPUT_PREVIEW_CHARS, WorkloadSummary
from feltdb.records.workload import Workload
from feltdb.work.deadlines import deadline_instants
from feltdb.work.events import APPROVAL_DEADLINE, last_effect
from feltdb.work.explanations import ended_because


def summary_of(workload: Workload) -> WorkloadSummary:
    """``workload`` as a list shows it."""
    # Sorted keys, as the input's hash reads them (numbers as msgspec writes them, which
    # may differ from the canonical text); msgspec, not json: a list summarizes every
    # workload it shows, and an input may be a megabyte.
    input_text = msgspec.json.encode(workload.input, order="sorted").decode()
    claim = workload.current_claim
    result = workload.result
    deadlines = dict(deadline_instants(workload))
    return WorkloadSummary(
        workload_id=workload.workload_id,
        tenant_id=workload.tenant_id,
        application_id=workload.application_id,
        environment=workload.environment,
        definition_id=workload.definition_id,
        definition_revision=workload.definition_revision,
        trigger=workload.trigger,
        requested_by=workload.requested_by,
        priority=workload.priority,
        idempotency_key=workload.idempotency_key,
        created_at=workload.created_at,
        updated_at=workload.updated_at,
        state=workload.state,
        attempt_count=workload.attempt_count,
        max_attempts=workload.retry_policy.max_attempts,
        retry_count=workload.retry_count,
        next_attempt_at=workload.next_attempt_at,
        last_failure=workload.last_failure,
        worker_id=None if claim is None else claim.worker_id,
        lease_expires_at=None if claim is None else claim.expires_at,
        input_hash=workload.input_hash,
        input_chars=len(input_text),
        input_preview=input_text[:INPUT_PREVIEW_CHARS],
        dependency_count=len(workload.dependencies),
        checkpoint_count=len(workload.checkpoints),
        result_id=None if result is None else result.result_id,
        approval=workload.approval,
        approval_deadline=deadlines.get(APPROVAL_DEADLINE),
        last_event=workload.execution_history[-1] if workload.execution_history else None,
        last_effect=last_effect(workload),
        ended_because=ended_because(workload),
    )
