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
from typing import Any
from urllib.parse import quote

from httpx import Response

from feltdb.client.protocol import SubmissionLike, as_submission
from feltdb.client.transport import Transport
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


class HttpWorkflows(Transport):
    """The workflow calls over ``/v1/workflows``, for the class this is mixed into."""

    def submit_workflow(
        self, key: str, nodes: Sequence[WorkflowNodeLike]
    ) -> tuple[WorkflowRun, bool]:
        """See :meth:`WorkflowCalls.submit_workflow` (``POST /v1/workflows``)."""
        body = []
        for place, node in enumerate(nodes):
            name, after, submission = _parts(node, place)
            fields = submission_fields(as_submission(submission))
            body.append({"name": name, "after": after, "submission": fields})
        answer = self._send("POST", "/v1/workflows", {"key": key, "nodes": body})
        run: WorkflowRun = WorkflowRun.parse(self._document(answer, "/v1/workflows"))
        return run, answer.status_code == 201

    def workflow(self, workflow_id: str) -> WorkflowRun:
        """See :meth:`WorkflowCalls.workflow` (``GET /v1/workflows/{id}``)."""
        found: WorkflowRun = WorkflowRun.parse(self._ask("GET", _path(workflow_id)))
        return found

    def cancel_workflow(self, workflow_id: str) -> WorkflowRun:
        """See :meth:`WorkflowCalls.cancel_workflow` (``POST /v1/workflows/{id}/cancel``)."""
        found: WorkflowRun = WorkflowRun.parse(self._ask("POST", f"{_path(workflow_id)}/cancel"))
        return found

    def _send(self, method: str, path: str, body: Mapping[str, Any] | None = None) -> Response:
        raise NotImplementedError  # the client's transport

    def _document(self, answer: Response, path: str) -> dict[str, Any]:
        raise NotImplementedError  # the client's transport


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
