"""A worker's batches through the unit of work: each item decided by the single call's
decision (:mod:`feltdb.work.worker_commands`) on the workload as the batch's earlier items
left it, then all of them committed in one transaction.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from feltdb.auth.scope import Scope
from feltdb.errors import WorkloadError
from feltdb.records.workload import Workload, WorkloadResult
from feltdb.work import inputs
from feltdb.work import worker_commands as decide
from feltdb.work.batches import Completion, Heartbeat
from feltdb.work.claimed import LeaseRenewal
from feltdb.work.unit import UnitOfWork


def renew_leases(
    unit: UnitOfWork,
    heartbeats: Sequence[Heartbeat],
    now: int,
    scope: Scope | None,
    max_lease_ms: int,
) -> list[LeaseRenewal | WorkloadError]:
    """Each heartbeat's extended claim with whether cancellation of its work was
    requested, or its refusal: see ``WorkloadStore.renew_leases``.
    """
    heartbeats = inputs.batch(heartbeats, "heartbeats")
    batch = unit.batch(scope, unit.read_ahead(workload_ids(heartbeats)))
    steps = batch.decide_each(
        heartbeats, lambda beat: decide.heartbeat(beat, now, batch.load, max_lease_ms)
    )
    answers = unit.finish_many(batch, steps)
    renewed: list[LeaseRenewal | WorkloadError] = []
    for step, answer in zip(steps, answers, strict=True):
        if isinstance(answer, WorkloadError):
            renewed.append(answer)
            continue
        # An extended claim was decided on a read: its step holds the workload.
        assert not isinstance(step, WorkloadError) and step.loaded is not None
        renewed.append(LeaseRenewal.of(answer, step.loaded.workload))
    return renewed


def complete_each(
    unit: UnitOfWork, completions: Sequence[Completion], now: int, scope: Scope | None
) -> list[WorkloadResult | WorkloadError]:
    """Each completion's result, or its refusal: see ``WorkloadStore.complete_many``. Two
    items naming one result id are decided as two calls in a row would be.
    """
    completions = inputs.batch(completions, "completions")
    batch = unit.batch(scope, unit.read_ahead(workload_ids(completions)))
    results = unit.results_ahead(getattr(item, "result_id", None) for item in completions)

    def owner(result_id: str, workload: Workload) -> str | None:
        planned = batch.result_owner(result_id, workload)
        return planned if planned is not None else unit.result_owner(result_id, workload, results)

    steps = batch.decide_each(
        completions, lambda item: decide.complete(item, now, batch.load, owner)
    )
    return unit.finish_many(batch, steps)


def workload_ids(items: Sequence[object]) -> Iterator[object]:
    """The workload each item names (what is no item is left for its own refusal)."""
    return (getattr(item, "workload_id", None) for item in items)
