"""Child-process bodies for ``test_workflow_race.py``: each process submits one workflow.

Spawned children import this module by name: every function takes plain arguments and
returns plain, picklable results. Submissions start together on a barrier handed to each
pool worker by :func:`init_worker`.
"""

from __future__ import annotations

from typing import Any

from support.factories import make_request

from feltdb import WorkloadError, WorkloadStore
from feltdb.work.workflow_graph import WorkflowStep

BARRIER_TIMEOUT_S = 60
"""How long a child waits for the others at the start line before giving up."""

_barrier: Any = None


def init_worker(barrier: Any) -> None:
    """Pool initializer: keep the start-line barrier."""
    global _barrier
    _barrier = barrier


def chain(length: int) -> list[WorkflowStep]:
    """A workflow of ``length`` nodes, each after the one before."""
    return [
        WorkflowStep(
            f"n{n}",
            make_request(idempotency_key=f"node-{n}", input={"n": n}),
            [f"n{n - 1}"] if n else [],
        )
        for n in range(length)
    ]


def submit(target: str, length: int, times: int) -> list[tuple[str, bool]] | str:
    """Open the store at ``target`` and submit the chain ``times`` times, started with the
    other children: ``(workflow id, created)`` of each, or the refusal's code.
    """
    with WorkloadStore.open(target) as store:
        if _barrier is not None:
            _barrier.wait(timeout=BARRIER_TIMEOUT_S)
        answers: list[tuple[str, bool]] = []
        try:
            for _ in range(times):
                run, created = store.workflows.submit("nightly", chain(length))
                answers.append((run.workflow_id, created))
        except WorkloadError as error:
            return f"{error.code}: {error.message}"
        return answers
