"""The workflow calls every client makes (:mod:`feltdb.client.workflows` makes them)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from feltdb.records.workflow import WorkflowRun

WorkflowNodeLike = Mapping[str, Any]
"""A node: ``name``, ``after`` (optional: ``NAME`` or ``NAME:STATE`` each) and
``submission`` (as ``WorkloadClient.submit`` takes it)."""


class WorkflowCalls(Protocol):
    """The workflow calls of a :class:`~feltdb.client.protocol.WorkloadClient`."""

    def submit_workflow(
        self, key: str, nodes: Sequence[WorkflowNodeLike]
    ) -> tuple[WorkflowRun, bool]:
        """Submit the workflow ``key`` whole (every node admitted, or none); ``True`` when
        this call made it, ``False`` for a replay (``Workflows.submit``'s rules).
        """
        ...

    def workflow(self, workflow_id: str) -> WorkflowRun:
        """The run of ``workflow_id``: each node's state, and the run's."""
        ...

    def cancel_workflow(self, workflow_id: str) -> WorkflowRun:
        """Cancel every node of the run not yet at rest; the run after."""
        ...
