"""A workflow's shape, decided before anything is written: pure functions.

A workflow names its nodes and, for each, the nodes it runs after (``NAME``, or
``NAME:STATE`` for another state than ``SUCCEEDED``). :func:`planned` refuses what cannot
run as submitted (a duplicate or unknown name, a cycle, nodes of different requesters or
applications) naming the offending nodes and their workload ids, and otherwise answers
each node's admission request, its dependencies on the other nodes filled in with their
workload ids, in an order where every node comes after those it runs after. A node may
also depend on work admitted before, through its own request's ``dependencies``: admission
checks those as it checks any.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from feltdb.errors import ErrorCode, WorkloadError
from feltdb.fields import MAX_ID_CHARS
from feltdb.records.workflow import RunState, WorkflowNode
from feltdb.records.workload import WorkloadDependency
from feltdb.storage.canonical import canonical_json, sha256_hex
from feltdb.work import inputs
from feltdb.work.admitting import workload_id_of
from feltdb.work.identities import idempotency_scope
from feltdb.work.models import CreateWorkload
from feltdb.work.scheduling import AWAITED_STATES
from feltdb.work.states import WorkloadState

MAX_WORKFLOW_NODES: Final = 200
"""The most nodes a workflow has (with their submissions, a request body well under the
server's 1 MiB); a larger graph is several workflows, joined by dependencies."""


@dataclass(frozen=True, slots=True)
class WorkflowStep:
    """One node as submitted: its name, its admission request, and the names of the nodes
    it runs after (``NAME`` waits for ``SUCCEEDED``; ``NAME:STATE`` for that state).
    """

    name: str
    request: CreateWorkload
    after: Sequence[str] = field(default_factory=tuple)


@dataclass(frozen=True, slots=True)
class Plan:
    """A workflow ready to admit: its id, its stored nodes and their requests, in order."""

    workflow_id: str
    nodes: list[WorkflowNode]
    requests: list[CreateWorkload]


def node_fields(key: str, name: str, fields: dict[str, Any]) -> dict[str, Any]:
    """A node's submission ``fields``, its idempotency key ``KEY/NAME`` unless it names one
    (``workflow-`` and a digest of both when that is longer than an identifier may be):
    so the same workflow submitted again names the same workloads (a submission's own
    default, a random key, would make every submission new).
    """
    if "idempotency_key" in fields:
        return fields
    named = f"{key}/{name}"
    if len(named) > MAX_ID_CHARS:
        named = "workflow-" + sha256_hex(canonical_json([key, name]))[:48]
    return {**fields, "idempotency_key": named}


def node_refusal(name: str, refusal: WorkloadError) -> WorkloadError:
    """``refusal`` of node ``name``'s request or admission, saying which node it was."""
    return WorkloadError(
        refusal.code, f"node {name}: {refusal.message}", {**(refusal.details or {}), "node": name}
    )


def workflow_id_for(request: CreateWorkload, key: str) -> str:
    """The id of the workflow ``key`` of ``request``'s requester in its application."""
    scope = idempotency_scope(
        request.tenant_id, request.application_id, request.requested_by, f"workflow:{key}"
    )
    return "workflow_" + sha256_hex(scope)[:24]


def planned(key: str, steps: Sequence[WorkflowStep]) -> Plan:
    """The workflow ``key`` of ``steps``, checked and ordered.

    Raises:
        WorkloadError: ``WORKLOAD_INVALID`` naming the offending nodes (``details``:
            ``nodes``, and ``workload_ids`` of those that have one).
    """
    key = inputs.identifier(key, "key")
    steps = inputs.batch(steps, "nodes")
    if not 1 <= len(steps) <= MAX_WORKFLOW_NODES:
        raise inputs.invalid("nodes", f"a workflow has 1 to {MAX_WORKFLOW_NODES} nodes")
    names = [inputs.identifier(step.name, f"nodes.{n}.name") for n, step in enumerate(steps)]
    ids = {step.name: workload_id_of(step.request) for step in steps}
    _one_each(names, steps, ids)
    after = {step.name: _edges(step, ids) for step in steps}
    order = _ordered(names, after, ids)
    by_name = {step.name: step for step in steps}
    requests = []
    for name in order:
        request = by_name[name].request
        waits = [WorkloadDependency(workload_id=ids[on], required_state=s) for on, s in after[name]]
        requests.append(
            request.model_copy(update={"dependencies": [*request.dependencies, *waits]})
        )
    nodes = [
        WorkflowNode(name=name, workload_id=ids[name], after=list(by_name[name].after))
        for name in order
    ]
    return Plan(workflow_id_for(steps[0].request, key), nodes, requests)


def _refused(
    message: str, names: Sequence[str], ids: dict[str, str], field: str = "after"
) -> WorkloadError:
    """A refusal naming the nodes ``names``: their workload ids, and the fields at fault
    (``nodes.N.field``, ``N`` each one's place in the workflow as submitted).
    """
    places = list(ids)
    return WorkloadError(
        ErrorCode.WORKLOAD_INVALID,
        message,
        {
            "fields": [f"nodes.{places.index(n)}.{field}" for n in names if n in ids],
            "nodes": list(names),
            "workload_ids": [ids[n] for n in names if n in ids],
        },
    )


def _one_each(names: list[str], steps: Sequence[WorkflowStep], ids: dict[str, str]) -> None:
    """Refuse a name given twice, or nodes of different requesters or applications."""
    twice = sorted(name for name, count in Counter(names).items() if count > 1)
    if twice:
        raise _refused(
            f"node names must differ: {', '.join(twice)} given twice", twice, ids, "name"
        )
    marked = [name for name in names if ":" in name or "/" in name]
    if marked:
        raise _refused(
            f"a node's name holds neither ':' nor '/' (after names NODE:STATE, a key"
            f" KEY/NODE): {', '.join(marked)}",
            marked,
            ids,
            "name",
        )
    shared = Counter(ids.values())
    one_work = [step.name for step in steps if shared[ids[step.name]] > 1]
    if one_work:
        raise _refused(
            f"two nodes would be one workload (the same idempotency key): {', '.join(one_work)}",
            one_work,
            ids,
            "request",
        )
    first = steps[0].request
    owner = (first.tenant_id, first.application_id, first.requested_by)
    others = [
        step.name
        for step in steps
        if (step.request.tenant_id, step.request.application_id, step.request.requested_by) != owner
    ]
    if others:
        raise _refused(
            "every node of a workflow is submitted by one requester in one application:"
            f" {', '.join(others)} differ from {steps[0].name}",
            others,
            ids,
            "request",
        )


def _edges(step: WorkflowStep, ids: dict[str, str]) -> list[tuple[str, WorkloadState]]:
    """``step``'s ``after`` entries as ``(node, awaited state)``, each edge once.

    Raises:
        WorkloadError: ``WORKLOAD_INVALID`` for a node awaited in two states (it could
            never run), and as :func:`_edge`.
    """
    if isinstance(step.after, str):
        raise _refused(f"node {step.name}: after is a list of names", [step.name], ids)
    edges = list(dict.fromkeys(_edge(step, text, ids) for text in step.after))
    twice = sorted({name for name, count in Counter(n for n, _ in edges).items() if count > 1})
    if twice:
        raise _refused(
            f"node {step.name} runs after {', '.join(twice)} in two states: it could never run",
            [step.name],
            ids,
        )
    return edges


def _edge(step: WorkflowStep, text: str, ids: dict[str, str]) -> tuple[str, WorkloadState]:
    """``step``'s ``after`` entry ``text`` as ``(node, awaited state)``."""
    name, _, state = str(text).partition(":")
    if name not in ids:
        raise _refused(
            f"node {step.name} runs after {name!r}: no node of this workflow has that name",
            [step.name],
            ids,
        )
    if not state:
        return name, WorkloadState.SUCCEEDED
    try:
        awaited = WorkloadState(state)
    except ValueError:
        awaited = None
    if awaited is None or awaited not in AWAITED_STATES:
        raise _refused(
            f"node {step.name} runs after {name}:{state}: a node waits for a state work rests"
            f" in ({', '.join(sorted(s.value for s in AWAITED_STATES))})",
            [step.name],
            ids,
        )
    return name, awaited


def _ordered(
    names: list[str], after: dict[str, list[tuple[str, WorkloadState]]], ids: dict[str, str]
) -> list[str]:
    """``names`` so that each comes after those it runs after (the given order otherwise).

    Raises:
        WorkloadError: ``WORKLOAD_INVALID`` naming a cycle, in its order.
    """
    # Kahn's algorithm, in linear time (a hostile workflow of 200 nodes and 20,000 edges
    # costs a few milliseconds), taking ready nodes in the order given.
    waiting = {name: len({on for on, _ in after[name]}) for name in names}
    runs_before: dict[str, list[str]] = {name: [] for name in names}
    for name in names:
        for on in {on for on, _ in after[name]}:
            runs_before[on].append(name)
    ready = [name for name in names if waiting[name] == 0]
    placed: list[str] = []
    while ready:
        name = ready.pop(0)
        placed.append(name)
        for later in runs_before[name]:
            waiting[later] -= 1
            if waiting[later] == 0:
                ready.append(later)
    if len(placed) < len(names):
        left = [name for name in names if waiting[name] > 0]
        cycle = _a_cycle(left, after)
        raise _refused(
            f"the nodes run after each other in a cycle: {' → '.join([*cycle, cycle[0]])}",
            cycle,
            ids,
        )
    return placed


def _a_cycle(remaining: list[str], after: dict[str, list[tuple[str, WorkloadState]]]) -> list[str]:
    """One cycle among ``remaining`` (each of which runs after another of them)."""
    left = set(remaining)
    path: list[str] = [remaining[0]]
    while True:
        nxt = next(on for on, _ in after[path[-1]] if on in left)
        if nxt in path:
            return path[path.index(nxt) :]
        path.append(nxt)


def run_state(states: Sequence[WorkloadState | None]) -> RunState:
    """Where a run stands, from its nodes' states (``None``: a node not admitted yet)."""
    if any(state is None or state not in AWAITED_STATES for state in states):
        return RunState.RUNNING
    if all(state is WorkloadState.SUCCEEDED for state in states):
        return RunState.SUCCEEDED
    if any(state in (WorkloadState.DEAD_LETTER, WorkloadState.REJECTED) for state in states):
        return RunState.FAILED
    return RunState.CANCELLED
