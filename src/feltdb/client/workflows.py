"""Workflows through a client: submit one, read its run, cancel it.

A node is given as a mapping: ``{"name": …, "after": [NAME or NAME:STATE, …],
"submission": …}`` (``submission`` as ``WorkloadClient.submit`` takes it).
:class:`~feltdb.client.workflow_calls.WorkflowCalls` declares the three calls;
:class:`HttpWorkflows` makes them over ``/v1/workflows`` for :class:`~feltdb.client.Client`,
:class:`LocalWorkflows` over the store for :class:`~feltdb.client.LocalClient`, both under
the client's caller's rules (:mod:`feltdb.work.workflow_access`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from urllib.parse import quote

from feltdb.client.calls import Request, Steps, ask, operation
from feltdb.client.protocol import SubmissionLike, as_submission
from feltdb.client.workflow_calls import WorkflowNodeLike
from feltdb.errors import WorkloadError
from feltdb.records.workflow import WorkflowRun
from feltdb.work import workflow_access
from feltdb.work.authority import Authority
from feltdb.work.models import CreateWorkload
from feltdb.work.submission import submission_fields
from feltdb.work.workflow_graph import WorkflowStep, node_fields, node_refusal


def _parts(node: WorkflowNodeLike, place: int) -> tuple[str, list[str], SubmissionLike]:
    """``node``'s name, the nodes it runs after, and its submission.

    Raises:
        WorkloadError: ``WORKLOAD_INVALID`` naming ``nodes.N`` for a node not so shaped.
    """
    if not isinstance(node, Mapping) or not isinstance(node.get("submission"), Mapping):
        raise WorkloadError(
            "WORKLOAD_INVALID",
            f"nodes.{place}: a node is a mapping with a name, after and a submission",
            {"fields": [f"nodes.{place}"]},
        )
    after = node.get("after") or []
    if isinstance(after, str):
        after = [after]
    return str(node.get("name", "")), [str(name) for name in after], node["submission"]


class HttpWorkflows:
    """The workflow calls over ``/v1/workflows``, for both HTTP clients."""

    @operation
    def submit_workflow(
        self, key: str, nodes: Sequence[WorkflowNodeLike]
    ) -> Steps[tuple[WorkflowRun, bool]]:
        """See :meth:`WorkflowCalls.submit_workflow` (``POST /v1/workflows``)."""
        body = []
        for place, node in enumerate(nodes):
            name, after, submission = _parts(node, place)
            fields = submission_fields(as_submission(submission))
            body.append({"name": name, "after": after, "submission": fields})
        answer = yield Request("POST", "/v1/workflows", {"key": key, "nodes": body})
        assert answer.document is not None
        run: WorkflowRun = WorkflowRun.parse(answer.document)
        return run, answer.status == 201

    @operation
    def workflow(self, workflow_id: str) -> Steps[WorkflowRun]:
        """See :meth:`WorkflowCalls.workflow` (``GET /v1/workflows/{id}``)."""
        found: WorkflowRun = WorkflowRun.parse((yield from ask("GET", _path(workflow_id))))
        return found

    @operation
    def cancel_workflow(self, workflow_id: str) -> Steps[WorkflowRun]:
        """See :meth:`WorkflowCalls.cancel_workflow` (``POST /v1/workflows/{id}/cancel``)."""
        answer = yield from ask("POST", f"{_path(workflow_id)}/cancel")
        found: WorkflowRun = WorkflowRun.parse(answer)
        return found


def _path(workflow_id: str) -> str:
    return f"/v1/workflows/{quote(workflow_id, safe='')}"


class LocalWorkflows:
    """The workflow calls over the store, as the caller of the class this is mixed into."""

    acting: Authority

    def _now(self) -> int | None:
        raise NotImplementedError

    def _request(self, submission: SubmissionLike) -> CreateWorkload:
        raise NotImplementedError

    def submit_workflow(
        self, key: str, nodes: Sequence[WorkflowNodeLike]
    ) -> tuple[WorkflowRun, bool]:
        """See :meth:`WorkflowCalls.submit_workflow`."""
        steps = []
        for place, node in enumerate(nodes):
            name, after, submission = _parts(node, place)
            try:
                fields = node_fields(key, name, submission_fields(as_submission(submission)))
                request = self._request(fields)
            except WorkloadError as refusal:
                raise node_refusal(name, refusal) from None
            steps.append(WorkflowStep(name, request, after))
        return workflow_access.submit(self.acting, key, steps)

    def workflow(self, workflow_id: str) -> WorkflowRun:
        """See :meth:`WorkflowCalls.workflow`."""
        return workflow_access.run(self.acting, workflow_id)

    def cancel_workflow(self, workflow_id: str) -> WorkflowRun:
        """See :meth:`WorkflowCalls.cancel_workflow`."""
        return workflow_access.cancel(self.acting, workflow_id, self._now())
