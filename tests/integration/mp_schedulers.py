"""Child-process bodies for ``test_scheduler_race.py``: a scheduler of its own per process.

Spawned children import this module by name: every function takes plain arguments and
returns plain, picklable results. Each pass starts together on a barrier handed to each pool
worker by :func:`init_worker`.
"""

from __future__ import annotations

from typing import Any

from feltdb import WorkloadError, WorkloadStore

BARRIER_TIMEOUT_S = 60
"""How long a child waits for the others at the start line before giving up."""

_barrier: Any = None


def init_worker(barrier: Any) -> None:
    """Pool initializer: keep the start-line barrier."""
    global _barrier
    _barrier = barrier


def run_passes(target: str, nows: list[int]) -> list[tuple[str, int, str, bool]] | str:
    """Open the store at ``target`` and run a scheduler pass at each of ``nows``, each
    started with the other children's (in lockstep: a child that ran ahead alone would
    admit every occurrence before the others look, and no race would be run):
    ``(schedule id, instant, workload id, created)`` of every occurrence the passes
    admitted or replayed, or the refusal's code.
    """
    with WorkloadStore.open(target) as store:
        found: list[tuple[str, int, str, bool]] = []
        try:
            for now in nows:
                if _barrier is not None:
                    _barrier.wait(timeout=BARRIER_TIMEOUT_S)
                for occurrence in store.schedules.run_due(now=now):
                    found.append(
                        (
                            occurrence.schedule_id,
                            occurrence.instant,
                            occurrence.workload_id,
                            occurrence.created,
                        )
                    )
        except WorkloadError as error:
            return str(error.code)
        return found
