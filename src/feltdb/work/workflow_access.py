"""What one caller may do with workflows: the :class:`~feltdb.work.authority.Authority`'s
rules, applied to every node.

Submitting needs ``workload:execute`` (and, as every admission does, a grant covering each
new workload); reading a run needs ``workload:read`` on every node, cancelling it
``workload:cancel`` on every node; and a run is read within the caller's scope, so one with
a node outside it is not found. Every entry point (the API's routes, the local client) goes
through here.
"""

from __future__ import annotations

from collections.abc import Sequence

from feltdb.auth.capabilities import CANCEL, READ
from feltdb.records.workflow import WorkflowRun
from feltdb.work.authority import Authority
from feltdb.work.workflow_graph import WorkflowStep


def submit(acting: Authority, key: str, steps: Sequence[WorkflowStep]) -> tuple[WorkflowRun, bool]:
    """Submit the workflow ``key`` of ``steps`` as the caller (see ``Workflows.submit``)."""
    acting.as_requester()
    return acting.store.workflows.submit(key, steps)


def run(acting: Authority, workflow_id: str) -> WorkflowRun:
    """The run of ``workflow_id``, if the caller may read every node of it.

    Raises:
        WorkloadError: ``WORKLOAD_NOT_FOUND``; ``WORKLOAD_UNAUTHORIZED``.
    """
    found = acting.store.workflows.get(workflow_id, scope=acting.scope)
    for node in found.nodes:
        acting.may(READ, node.workload_id)
    return found


def cancel(acting: Authority, workflow_id: str, now: int | None) -> WorkflowRun:
    """Cancel the run of ``workflow_id``, if the caller may cancel every node of it.

    Raises:
        WorkloadError: ``WORKLOAD_NOT_FOUND``; ``WORKLOAD_UNAUTHORIZED``.
    """
    for node in run(acting, workflow_id).nodes:
        acting.may(CANCEL, node.workload_id)
    return acting.store.workflows.cancel(workflow_id, acting.actor, now, scope=acting.scope)
