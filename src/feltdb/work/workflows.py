"""Workflows of one store (``WorkloadStore.workflows``): submit a set of workloads with
dependencies between them in one call, see the run as one object, cancel it whole.

A submission is decided whole before anything is written: the shape
(:func:`~feltdb.work.workflow_graph.planned`), then every node's admission as
``admit_many`` decides it (a dependency on work the requester may not see, a bad field, a
key reused with other content). A refusal of any node refuses the workflow, naming the node,
and writes nothing. Then the workflow's row is written (require-absent: submitting the same
workflow again is a replay, one with the same key and other nodes is refused
``IDEMPOTENCY_KEY_REUSED``), and the nodes are admitted in one transaction. Admission
quotas (:mod:`feltdb.work.quota_charges`) take the nodes whole: if the quota of the tenant
or the grant has no room for every node, none is admitted, and the workflow is refused
``WORKLOAD_QUOTA_EXCEEDED``.

The run's state is read from its nodes each time (:func:`run_state`). A node that fails for
good ends the nodes after it (:mod:`feltdb.work.eligibility`: the claim that reads them
dead-letters them, naming the failed node), and an operator's retry of it re-arms them
(:mod:`feltdb.work.rearming`).
"""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any, Final

from feltdb.auth.scope import Scope
from feltdb.errors import ErrorCode, WorkloadError
from feltdb.records.workflow import (
    WORKFLOWS_COLLECTION,
    Workflow,
    WorkflowIdentity,
    WorkflowNodeState,
    WorkflowRun,
)
from feltdb.records.workload import Workload
from feltdb.storage.base import VERSION_FIELD, Mutation, Precondition, StorageConflict
from feltdb.storage.canonical import canonical_json
from feltdb.work import admitting, operator_commands
from feltdb.work.scheduling import AWAITED_STATES
from feltdb.work.unit import UnitOfWork, in_scope
from feltdb.work.workflow_graph import Plan, WorkflowStep, node_refusal, planned, run_state

MAX_WORKFLOW_CHARS: Final = 1024 * 1024
"""The most characters of JSON a stored workflow (its names, workload ids and edges) has;
at most 200 nodes (``MAX_WORKFLOW_NODES``) keep a usual one far below it."""


class Workflows:
    """The workflows of one store, over its unit of work, ``now`` resolved by its clock."""

    def __init__(self, unit: UnitOfWork, clock: Callable[[int | None], int]) -> None:
        self._unit, self._clock = unit, clock

    def submit(self, key: str, steps: Sequence[WorkflowStep]) -> tuple[WorkflowRun, bool]:
        """Admit the workflow ``key`` of ``steps`` whole; ``True`` when this call made it,
        ``False`` for a replay of the same workflow.

        Raises:
            WorkloadError: ``WORKLOAD_INVALID`` (its shape, or a node's request: named),
                ``IDEMPOTENCY_KEY_REUSED`` (``key`` named another workflow, or a node's key
                another workload), any refusal of a node's admission, naming the node.
        """
        plan = planned(key, steps)
        self._decided_whole(plan)
        first = plan.requests[0]
        workflow = Workflow(
            workflow_id=plan.workflow_id,
            tenant_id=first.tenant_id,
            application_id=first.application_id,
            key=key,
            requested_by=str(first.requested_by),
            created_at=first.created_at,
            nodes=plan.nodes,
        )
        kept, created = self._kept(workflow)
        answers = admitting.admit_many(self._unit, plan.requests, whole=True)
        for node, answer in zip(plan.nodes, answers, strict=True):
            if isinstance(answer, WorkloadError):
                # Another writer changed what was decided (took a node's key with other
                # content, say) since: undo what this call made, and refuse.
                self._undone(workflow, answers, created)
                raise node_refusal(node.name, answer)
        return self._run(kept, None), created

    def get(self, workflow_id: str, *, scope: Scope | None = None) -> WorkflowRun:
        """The run of ``workflow_id``, if ``scope`` admits every node of it.

        Raises:
            WorkloadError: ``WORKLOAD_NOT_FOUND``, the same for a workflow that is missing
                and one with a node outside ``scope``.
        """
        return self._run(self._workflow(workflow_id, scope), scope)

    def cancel(
        self, workflow_id: str, actor: str, now: int | None = None, *, scope: Scope | None = None
    ) -> WorkflowRun:
        """Cancel every node of the run not yet at rest (held work by request to its
        worker, as ``cancel`` does); the run after.

        Raises:
            WorkloadError: ``WORKLOAD_NOT_FOUND`` as :meth:`get`.
        """
        at = self._clock(now)
        run = self.get(workflow_id, scope=scope)
        for node in run.nodes:
            if node.state is None or node.state in AWAITED_STATES:
                continue
            cancel = partial(operator_commands.cancel, node.workload_id, actor, at)
            try:
                self._unit.run(scope, cancel)
            except WorkloadError as refusal:
                if refusal.code != ErrorCode.WORKLOAD_TRANSITION_DENIED.value:
                    raise
                # It came to rest meanwhile: nothing left to cancel.
        return self.get(workflow_id, scope=scope)

    # ---------------------------------------------------------------- parts

    def _decided_whole(self, plan: Plan) -> None:
        """Decide every node's admission, writing nothing: refuse the first refused."""
        admitted: dict[str, Workload] = {}
        for node, request in zip(plan.nodes, plan.requests, strict=True):
            try:
                step = admitting.admission_step(self._unit, request, admitted)
            except WorkloadError as refusal:
                raise node_refusal(node.name, refusal) from None
            if step.loaded is not None:
                admitted[node.workload_id] = step.loaded.workload

    def _undone(self, workflow: Workflow, answers: Sequence[Any], created: bool) -> None:
        """Cancel the nodes this call admitted, and delete the row it wrote (``created``),
        after a node was refused at its commit; a failure to undo is left to an operator
        (the run shows what was admitted).
        """
        actor = workflow.requested_by
        for answer in answers:
            if isinstance(answer, tuple) and answer[1]:
                at = workflow.created_at
                cancel = partial(operator_commands.cancel, answer[0].workload_id, actor, at)
                with contextlib.suppress(WorkloadError):
                    self._unit.run(None, cancel)
        if created:
            key = workflow.workflow_id
            guard = Precondition(WORKFLOWS_COLLECTION, key, expected_version=1)
            gone = Mutation(WORKFLOWS_COLLECTION, key, None)
            audit = {**_audit(workflow), "kind": "workflow.withdrawn"}
            with contextlib.suppress(WorkloadError, StorageConflict):
                self._unit.db.commit(audit["operation_id"], [gone], [guard], audit)

    def _kept(self, workflow: Workflow) -> tuple[Workflow, bool]:
        """Write ``workflow``'s row unless it is there: the workflow kept, and ``True``
        when this call wrote it.

        Raises:
            WorkloadError: ``IDEMPOTENCY_KEY_REUSED`` when the row holds other nodes.
        """
        key, db = workflow.workflow_id, self._unit.db
        document = workflow.to_json()
        if len(canonical_json(document)) > MAX_WORKFLOW_CHARS:
            raise WorkloadError(
                ErrorCode.WORKLOAD_INVALID,
                f"a workflow's nodes and their edges are at most {MAX_WORKFLOW_CHARS:,}"
                " characters of JSON: shorten its names, or split it into workflows",
                {"fields": ["nodes"]},
            )
        audit = _audit(workflow)
        try:
            db.commit(
                audit["operation_id"],
                [Mutation(WORKFLOWS_COLLECTION, key, document)],
                [Precondition(WORKFLOWS_COLLECTION, key, require_absent=True)],
                audit,
            )
            return workflow, True
        except StorageConflict:
            pass
        kept = self._stored(key)
        if kept is None or kept.nodes != workflow.nodes:
            raise WorkloadError(
                ErrorCode.IDEMPOTENCY_KEY_REUSED,
                f"workflow key {workflow.key!r} was used for a workflow of other nodes",
                {"workflow_id": key},
            )
        return kept, False

    def _stored(self, workflow_id: str) -> Workflow | None:
        row = self._unit.db.get_row(WORKFLOWS_COLLECTION, workflow_id)
        if row is None:
            return None
        kept = {key: value for key, value in row.document.items() if key != VERSION_FIELD}
        return Workflow.parse(kept)

    def _workflow(self, workflow_id: str, scope: Scope | None) -> Workflow:
        found = self._stored(workflow_id) if isinstance(workflow_id, str) else None
        if found is None or (
            scope is not None
            and (found.tenant_id, found.application_id) != (scope.tenant_id, scope.application_id)
        ):
            raise WorkloadError(
                ErrorCode.WORKLOAD_NOT_FOUND,
                f"workflow {workflow_id} not found",
                {"workflow_id": workflow_id},
            )
        return found

    def _run(self, workflow: Workflow, scope: Scope | None) -> WorkflowRun:
        """``workflow`` with its nodes' states, read in one statement.

        Raises:
            WorkloadError: ``WORKLOAD_NOT_FOUND`` if a node is outside ``scope``.
        """
        ahead = self._unit.read_ahead(node.workload_id for node in workflow.nodes)
        nodes = []
        for node in workflow.nodes:
            loaded = self._unit.read(node.workload_id, ahead)
            if loaded is not None and scope is not None and not in_scope(loaded.workload, scope):
                raise WorkloadError(
                    ErrorCode.WORKLOAD_NOT_FOUND,
                    f"workflow {workflow.workflow_id} not found",
                    {"workflow_id": workflow.workflow_id},
                )
            state = loaded.workload.state if loaded is not None else None
            nodes.append(
                WorkflowNodeState(
                    name=node.name, workload_id=node.workload_id, after=node.after, state=state
                )
            )
        identity = {name: getattr(workflow, name) for name in WorkflowIdentity.__struct_fields__}
        return WorkflowRun(**identity, state=run_state([n.state for n in nodes]), nodes=nodes)


def _audit(workflow: Workflow) -> dict[str, str]:
    """The log entry of a commit of ``workflow``'s row (``kind``: submitted)."""
    return {
        "kind": "workflow.submitted",
        "subject": workflow.requested_by,
        "actor": workflow.requested_by,
        "tenant": workflow.tenant_id,
        "application": workflow.application_id,
        "workflow_id": workflow.workflow_id,
        "operation_id": "workflow_tx_" + secrets.token_hex(12),
    }
