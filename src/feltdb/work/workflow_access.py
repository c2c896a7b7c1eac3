"""What one caller may do with workflows: the :class:`~feltdb.work.authority.Authority`'s
rules, applied to every node.

Submitting needs ``workload:execute`` (and, as every admission does, a grant covering each
new workload). A workflow is the application's, as a list is: reading a run needs
``workload:read`` over every workload of the application, cancelling it
``workload:cancel`` too, each checked before anything is read (a caller that may not learns
nothing, not even whether the run exists); and a run is read within the caller's scope, so
one with a node outside it is not found. Every entry point (the API's routes, the local
client) goes through here.
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
    """The run of ``workflow_id``, if the caller may read the application's work.

    Raises:
        WorkloadError: ``WORKLOAD_UNAUTHORIZED``; ``WORKLOAD_NOT_FOUND``.
    """
    acting.may_in_application(READ)
    return acting.store.workflows.get(workflow_id, scope=acting.scope)


def cancel(acting: Authority, workflow_id: str, now: int | None) -> WorkflowRun:
    """Cancel the run of ``workflow_id``, if the caller may read and cancel the
    application's work.

    Raises:
        WorkloadError: ``WORKLOAD_UNAUTHORIZED``; ``WORKLOAD_NOT_FOUND``.
    """
    acting.may_in_application(READ)
    acting.may_in_application(CANCEL)
    return acting.store.workflows.cancel(workflow_id, acting.actor, now, scope=acting.scope)
