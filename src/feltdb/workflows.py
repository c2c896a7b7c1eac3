"""Workflows: workloads submitted together with dependencies between them, one run.

``store.workflows.submit(key, [WorkflowStep(name, request, after=[...]), ...])`` admits
them whole, ``store.workflows.get(workflow_id)`` answers the :class:`WorkflowRun`, and
``store.workflows.cancel(workflow_id, actor)`` cancels what has not come to rest. See
:mod:`feltdb.work.workflows` for the rules.
"""

from __future__ import annotations

from feltdb.records.workflow import RunState, Workflow, WorkflowNodeState, WorkflowRun
from feltdb.work.workflow_graph import WorkflowStep
from feltdb.work.workflows import Workflows

__all__ = ["RunState", "Workflow", "WorkflowNodeState", "WorkflowRun", "WorkflowStep", "Workflows"]
