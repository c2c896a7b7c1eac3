"""Workflows of one store (``WorkloadStore.workflows``): submit a set of workloads with
dependencies between them in one call, see the run as one object, cancel it whole.

A submission is decided whole before anything is written: the shape
(:func:`~feltdb.work.workflow_graph.planned`), then every node's admission as
``admit_many`` decides it (a dependency on work the requester may not see, a bad field, a
key reused with other content). A refusal of any node refuses the workflow, naming the node,
and writes nothing. Then the workflow's row is written (require-absent: submitting the same
workflow again is a replay, one with the same key and other nodes is refused
``IDEMPOTENCY_KEY_REUSED``), and the nodes are admitted in one transaction.

The run's state is read from its nodes each time (:func:`run_state`). A node that fails for
good ends the nodes after it (:mod:`feltdb.work.eligibility`: the claim that reads them
dead-letters them, naming the failed node), and an operator's retry of it re-arms them
(:mod:`feltdb.work.rearming`).
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Sequence
from functools import partial

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
from feltdb.work import admitting, operator_commands
from feltdb.work.scheduling import AWAITED_STATES
from feltdb.work.unit import UnitOfWork, in_scope
from feltdb.work.workflow_graph import Plan, WorkflowStep, planned, run_state


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
        created = self._kept(workflow)
        answers = admitting.admit_many(self._unit, plan.requests)
        for node, answer in zip(plan.nodes, answers, strict=True):
            if isinstance(answer, WorkloadError):
                raise _of_node(node.name, answer)
        return self._run(workflow, None), created

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
            except WorkloadError:
                continue  # it came to rest meanwhile: nothing left to cancel
        return self.get(workflow_id, scope=scope)

    # ---------------------------------------------------------------- parts

    def _decided_whole(self, plan: Plan) -> None:
        """Decide every node's admission, writing nothing: refuse the first refused."""
        admitted: dict[str, Workload] = {}
        for node, request in zip(plan.nodes, plan.requests, strict=True):
            try:
                step = admitting.admission_step(self._unit, request, admitted)
            except WorkloadError as refusal:
                raise _of_node(node.name, refusal) from None
            if step.loaded is not None:
                admitted[node.workload_id] = step.loaded.workload

    def _kept(self, workflow: Workflow) -> bool:
        """Write ``workflow``'s row unless it is there: ``True`` when this call wrote it.

        Raises:
            WorkloadError: ``IDEMPOTENCY_KEY_REUSED`` when the row holds other nodes.
        """
        key, db = workflow.workflow_id, self._unit.db
        document = workflow.to_json()
        audit = {
            "kind": "workflow.submitted",
            "subject": workflow.requested_by,
            "actor": workflow.requested_by,
            "tenant": workflow.tenant_id,
            "application": workflow.application_id,
            "workflow_id": key,
            "operation_id": "workflow_tx_" + secrets.token_hex(12),
        }
        try:
            db.commit(
                audit["operation_id"],
                [Mutation(WORKFLOWS_COLLECTION, key, document)],
                [Precondition(WORKFLOWS_COLLECTION, key, require_absent=True)],
                audit,
            )
            return True
        except StorageConflict:
            pass
        kept = self._stored(key)
        if kept is None or kept.nodes != workflow.nodes:
            raise WorkloadError(
                ErrorCode.IDEMPOTENCY_KEY_REUSED,
                f"workflow key {workflow.key!r} was used for a workflow of other nodes",
                {"workflow_id": key},
            )
        return False

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


def _of_node(name: str, refusal: WorkloadError) -> WorkloadError:
    """``refusal`` of the admission of node ``name``, saying so."""
    return WorkloadError(
        refusal.code,
        f"node {name}: {refusal.message}",
        {**(refusal.details or {}), "node": name},
    )
