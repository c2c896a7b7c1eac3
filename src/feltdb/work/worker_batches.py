"""A worker's batches through the unit of work: each item decided by the single call's
decision (:mod:`feltdb.work.worker_commands`) on the workload as the batch's earlier items
left it, then all of them committed in one transaction.
"""

from __future__ import annotations

from collections.abc import Sequence

from feltdb.auth.scope import Scope
from feltdb.errors import WorkloadError
from feltdb.records.workload import Workload, WorkloadResult
from feltdb.work import inputs
from feltdb.work import worker_commands as decide
from feltdb.work.batches import Completion, Heartbeat
from feltdb.work.claimed import LeaseRenewal
from feltdb.work.unit import Decided, ReadAhead, UnitOfWork, committed


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

    def decide_all(
        items: Sequence[Heartbeat], ahead: ReadAhead
    ) -> list[Decided[LeaseRenewal | WorkloadError]]:
        batch = unit.batch(scope, ahead)
        steps = batch.decide_each(
            items, lambda beat: decide.heartbeat(beat, now, batch.load, max_lease_ms)
        )
        answers = unit.finish_many(batch, steps)
        renewed: list[Decided[LeaseRenewal | WorkloadError]] = []
        for step, answer in zip(steps, answers, strict=True):
            if isinstance(answer, WorkloadError):
                renewed.append((answer, committed(step, answer)))
                continue
            # An extended claim was decided on a read: its step holds the workload.
            assert not isinstance(step, WorkloadError) and step.loaded is not None
            renewed.append((LeaseRenewal.of(answer, step.loaded.workload), True))
        return renewed

    return unit.run_many(inputs.batch(heartbeats, "heartbeats"), decide_all)


def complete_each(
    unit: UnitOfWork, completions: Sequence[Completion], now: int, scope: Scope | None
) -> list[WorkloadResult | WorkloadError]:
    """Each completion's result, or its refusal: see ``WorkloadStore.complete_many``. Two
    items naming one result id are decided as two calls in a row would be.
    """

    def decide_all(
        items: Sequence[Completion], ahead: ReadAhead
    ) -> list[Decided[WorkloadResult | WorkloadError]]:
        batch = unit.batch(scope, ahead)
        results = unit.results_ahead(getattr(item, "result_id", None) for item in items)

        def owner(result_id: str, workload: Workload) -> str | None:
            planned = batch.result_owner(result_id, workload)
            if planned is not None:
                return planned
            return unit.result_owner(result_id, workload, results)

        steps = batch.decide_each(items, lambda item: decide.complete(item, now, batch.load, owner))
        answers = unit.finish_many(batch, steps)
        return [(a, committed(s, a)) for s, a in zip(steps, answers, strict=True)]

    return unit.run_many(inputs.batch(completions, "completions"), decide_all)
