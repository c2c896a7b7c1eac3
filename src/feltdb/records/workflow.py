"""A workflow: workloads submitted together, with dependencies between them, seen as one run.

:class:`Workflow` is what the store keeps (a row of ``system_workflows``): which workload
each node is and which nodes it runs after. The nodes are ordinary workloads, admitted in
one transaction; their states are read from them, never copied here, so a
:class:`WorkflowRun` (the workflow with each node's state and the run's) is always as
current as its workloads.

Bounded: at most ``feltdb.work.inputs.MAX_BATCH_ITEMS`` nodes (one admission batch), each
named by an identifier of at most 256 characters.
"""

from __future__ import annotations

import enum

from feltdb.fields import Instant
from feltdb.records.base import Record
from feltdb.work.states import WorkloadState

WORKFLOWS_COLLECTION = "system_workflows"
"""Where workflows are kept, keyed by workflow id."""


class WorkflowNode(Record, frozen=True, kw_only=True):  # type: ignore[misc]
    """One node of a workflow: its name in the workflow, its workload, the nodes it runs
    after (``NAME`` for ``SUCCEEDED``, or ``NAME:STATE``).
    """

    name: str
    workload_id: str
    after: list[str]


class WorkflowIdentity(Record, frozen=True, kw_only=True):  # type: ignore[misc]
    """What a workflow is and who submitted it, stored and answered alike."""

    workflow_id: str
    tenant_id: str
    application_id: str
    key: str
    """The submitter's idempotency key of the workflow: submitting it again replays it."""
    requested_by: str
    created_at: Instant


class Workflow(WorkflowIdentity, frozen=True, kw_only=True):  # type: ignore[misc]
    """A workflow as stored: its identity and its nodes, in the order they were admitted
    (every node after the nodes it runs after).
    """

    nodes: list[WorkflowNode]


class RunState(enum.StrEnum):
    """Where a workflow's run stands, from its nodes' states."""

    RUNNING = "RUNNING"
    """A node is still on its way: not yet in a state work rests in."""
    SUCCEEDED = "SUCCEEDED"
    """Every node succeeded."""
    FAILED = "FAILED"
    """Every node rests, and one was dead-lettered or rejected."""
    CANCELLED = "CANCELLED"
    """Every node rests, none failed, and one was cancelled."""


class WorkflowNodeState(Record, frozen=True, kw_only=True):  # type: ignore[misc]
    """A node as a run shows it: its workload's state (``None``: not admitted, which only
    a submission interrupted before its nodes committed leaves; submitting again admits
    them).
    """

    name: str
    workload_id: str
    after: list[str]
    state: WorkloadState | None


class WorkflowRun(WorkflowIdentity, frozen=True, kw_only=True):  # type: ignore[misc]
    """A workflow with where each node stands and where the run stands."""

    state: RunState
    nodes: list[WorkflowNodeState]
