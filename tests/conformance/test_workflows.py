"""Workflows: a set of workloads with dependencies between them, submitted in one call,
seen as one run, cancelled whole; a node that fails for good ends the nodes after it, and
an operator's retry of it re-arms them."""

from __future__ import annotations

import pytest
from support.factories import CAPABILITIES, SIGNER, make_grant, make_request

from feltdb import WorkloadDependency, WorkloadError, WorkloadState
from feltdb.auth.scope import Scope
from feltdb.records.workflow import WORKFLOWS_COLLECTION
from feltdb.workflows import RunState, WorkflowStep

LEASE = 10_000


def _step(name, *after, **fields):
    fields.setdefault("idempotency_key", f"node-{name}")
    fields.setdefault("retry_policy", {"max_attempts": 1})
    return WorkflowStep(name, make_request(input={"node": name}, **fields), after)


def _etl():
    return [
        _step("load", "transform"),
        _step("extract"),
        _step("transform", "extract"),
        _step("report", "load", "transform"),
    ]


def _run(store, workload_id, now, *, fail=False):
    held = store.claim(workload_id, "w", CAPABILITIES, now=now, lease_ms=LEASE)
    store.start(workload_id, held.claim_id, "w", held.fencing_token, now=now)
    if fail:
        store.fail(workload_id, held.claim_id, "w", held.fencing_token, "permanent", "x", now=now)
    else:
        store.complete(
            workload_id, held.claim_id, "w", held.fencing_token, f"r-{workload_id}", {}, now=now
        )


def test_a_workflow_is_admitted_whole_in_dependency_order_and_seen_as_one_run(store):
    run, created = store.workflows.submit("nightly", _etl())
    assert created
    assert [n.name for n in run.nodes] == ["extract", "transform", "load", "report"]
    assert run.state is RunState.RUNNING
    ids = {n.name: n.workload_id for n in run.nodes}
    report = store.get(ids["report"])
    assert [d.workload_id for d in report.dependencies] == [ids["load"], ids["transform"]]
    # The scheduler runs them in the order the dependencies allow.
    order = []
    for now in range(20, 24):
        claim = store.claim_next("t", "app", "w", CAPABILITIES, now=now)
        assert claim is not None
        order.append(claim.workload_id)
        _run_claimed(store, claim, now)
    assert order == [ids[name] for name in ("extract", "transform", "load", "report")]
    finished = store.workflows.get(run.workflow_id)
    assert finished.state is RunState.SUCCEEDED
    assert {n.state for n in finished.nodes} == {WorkloadState.SUCCEEDED}


def _run_claimed(store, claim, now):
    store.start(claim.workload_id, claim.claim_id, "w", claim.fencing_token, now=now)
    store.complete(
        claim.workload_id, claim.claim_id, "w", claim.fencing_token, f"r-{now}", {}, now=now
    )


def test_submitting_it_again_replays_it_and_other_nodes_under_its_key_are_refused(store):
    run, _ = store.workflows.submit("nightly", _etl())
    later = [
        WorkflowStep(s.name, s.request.model_copy(update={"created_at": 99}), s.after)
        for s in _etl()
    ]
    again, created = store.workflows.submit("nightly", later)
    assert not created and again == run, "the run as kept (created_at 10), not as re-sent"
    with pytest.raises(WorkloadError) as refused:
        store.workflows.submit("nightly", _etl()[1:2])
    assert refused.value.code == "IDEMPOTENCY_KEY_REUSED"


@pytest.mark.parametrize(
    "steps,named,says",
    [
        (
            [_step("a", "b"), _step("b", "c"), _step("c", "a"), _step("d")],
            ["a", "b", "c"],
            "a → b → c → a",
        ),
        ([_step("a"), _step("b", "a", "zz")], ["b"], "no node of this workflow has that name"),
        ([_step("a"), _step("a", idempotency_key="other")], ["a"], "a given twice"),
        ([_step("a"), _step("b", "a:RUNNING")], ["b"], "a state work rests in"),
        ([_step("a"), _step("b", agent="a2")], ["b"], "one requester in one application"),
        (
            [_step("a"), _step("b", application_id="other")],
            ["b"],
            "one requester in one application",
        ),
        ([_step("a"), _step("b", "a", "a:CANCELLED")], ["b"], "in two states"),
        ([_step("a:1"), _step("b/2")], ["a:1", "b/2"], "holds neither ':' nor '/'"),
        ([_step("a"), _step("b", idempotency_key="node-a")], ["a", "b"], "one workload"),
    ],
    ids=[
        "cycle",
        "unknown",
        "duplicate",
        "passing-state",
        "requesters",
        "applications",
        "two-states",
        "marked-names",
        "one-workload",
    ],
)
def test_a_workflow_that_cannot_run_is_refused_naming_its_nodes_and_writes_nothing(
    store, steps, named, says
):
    revision = store.db.current_revision()
    with pytest.raises(WorkloadError) as refused:
        store.workflows.submit("bad", steps)
    assert refused.value.code == "WORKLOAD_INVALID"
    assert says in refused.value.message
    assert refused.value.details["nodes"] == named
    assert len(refused.value.details["workload_ids"]) == len(named)
    assert store.db.current_revision() == revision, "nothing written"


def test_a_node_depending_on_work_of_another_tenant_refuses_the_workflow_whole(store):
    theirs = SIGNER.sign(make_grant(tenant_id="t2"))
    elsewhere = store.create(
        make_request(tenant_id="t2", authorization_snapshot=theirs, idempotency_key="x")
    )
    foreign = [WorkloadDependency(workload_id=elsewhere.workload_id)]
    revision = store.db.current_revision()
    with pytest.raises(WorkloadError) as refused:
        store.workflows.submit("w", [_step("a"), _step("b", "a", dependencies=foreign)])
    assert refused.value.code == "WORKLOAD_INVALID"
    assert refused.value.message.startswith("node b: ")
    assert elsewhere.workload_id in refused.value.message
    assert refused.value.details["node"] == "b"
    assert store.db.current_revision() == revision
    assert store.db.get_row(WORKFLOWS_COLLECTION, "x") is None


def test_a_failed_node_ends_the_nodes_after_it_and_its_retry_re_arms_them(store):
    run, _ = store.workflows.submit("nightly", _etl())
    ids = {n.name: n.workload_id for n in run.nodes}
    _run(store, ids["extract"], 20, fail=True)
    for now in (21, 22, 23):  # each search ends the next node down
        assert store.claim_next("t", "app", "w", CAPABILITIES, now=now) is None
    ended = store.workflows.get(run.workflow_id)
    assert ended.state is RunState.FAILED
    assert {n.state for n in ended.nodes} == {WorkloadState.DEAD_LETTER}
    transform = store.get(ids["transform"]).execution_history[-1]
    assert transform.evidence["dependency"] == ids["extract"]

    store.retry(ids["extract"], "human:ops", now=30, reason="source is back")
    again = store.workflows.get(run.workflow_id)
    assert again.state is RunState.RUNNING
    assert {n.name: n.state for n in again.nodes} == {
        "extract": WorkloadState.READY,
        "transform": WorkloadState.READY,
        "load": WorkloadState.READY,
        "report": WorkloadState.READY,
    }


def test_cancelling_a_run_cancels_what_has_not_come_to_rest(store):
    run, _ = store.workflows.submit("nightly", _etl())
    ids = {n.name: n.workload_id for n in run.nodes}
    _run(store, ids["extract"], 20)
    held = store.claim(ids["transform"], "w", CAPABILITIES, now=21, lease_ms=LEASE)
    cancelled = store.workflows.cancel(run.workflow_id, "human:ops", now=22)
    states = {n.name: n.state for n in cancelled.nodes}
    assert states == {
        "extract": WorkloadState.SUCCEEDED,
        "transform": WorkloadState.CANCELLATION_REQUESTED,
        "load": WorkloadState.CANCELLED,
        "report": WorkloadState.CANCELLED,
    }
    assert cancelled.state is RunState.RUNNING  # its worker has yet to confirm
    store.confirm_cancel(ids["transform"], held.claim_id, "w", held.fencing_token, now=23)
    assert store.workflows.get(run.workflow_id).state is RunState.CANCELLED


def test_a_run_is_not_found_outside_its_application_or_a_narrowed_scope(store):
    run, _ = store.workflows.submit("nightly", _etl())
    for scope in (
        Scope("t", "other"),
        Scope("other", "app"),
        Scope("t", "app", environments=frozenset({"staging"})),
    ):
        with pytest.raises(WorkloadError) as refused:
            store.workflows.get(run.workflow_id, scope=scope)
        assert refused.value.code == "WORKLOAD_NOT_FOUND"
    with pytest.raises(WorkloadError) as missing:
        store.workflows.get("workflow_nope")
    assert missing.value.code == "WORKLOAD_NOT_FOUND"
    assert store.workflows.get(run.workflow_id, scope=Scope("t", "app")) == run


def test_a_node_s_execution_context_carries_its_dependencies_outputs(store, monkeypatch):
    run, _ = store.workflows.submit(
        "fan-in", [_step("a"), _step("b"), _step("c"), _step("sum", "a", "b", "c:CANCELLED")]
    )
    ids = {n.name: n.workload_id for n in run.nodes}
    _run(store, ids["a"], 20)
    _run(store, ids["b"], 20)
    store.cancel(ids["c"], "human:ops", now=20)
    import feltdb.work.dependency_outputs as bounded

    monkeypatch.setattr(bounded, "MAX_DEPENDENCY_OUTPUT_CHARS", 2)  # "{}" fits, no more
    held = store.claim(ids["sum"], "w", CAPABILITIES, now=21, lease_ms=LEASE)
    context = store.execution_context(ids["sum"], held.claim_id, "w", held.fencing_token, now=21)
    # The cancelled one produced nothing; of the two that succeeded, one output fits.
    assert context.dependency_outputs == {ids["a"]: {}}
    assert context.dependency_outputs_omitted == [ids["b"]]


def test_a_workflow_too_large_to_keep_is_refused_and_writes_nothing(store):
    # 200 nodes, each after every one before it, with names of 250 characters: some
    # 20,000 edges, over the 1 MiB a stored workflow may take.
    names = [f"{n:03d}" + "x" * 247 for n in range(200)]
    steps = [_step(name, *names[:n], idempotency_key=f"k{n}") for n, name in enumerate(names)]
    revision = store.db.current_revision()
    with pytest.raises(WorkloadError) as refused:
        store.workflows.submit("huge", steps)
    assert refused.value.code == "WORKLOAD_INVALID"
    assert refused.value.details == {"fields": ["nodes"]}
    assert store.db.current_revision() == revision


def test_a_node_taken_by_another_writer_meanwhile_undoes_the_submission(store, monkeypatch):
    import feltdb.work.workflows as workflows

    admit_many = workflows.admitting.admit_many
    taken = make_request(idempotency_key="node-b", input={"someone": "else"})

    def another_writer_first(unit, requests, **options):
        store.create(taken)  # between the decision and the commit: node b's key, other input
        return admit_many(unit, requests, **options)

    monkeypatch.setattr(workflows.admitting, "admit_many", another_writer_first)
    with pytest.raises(WorkloadError) as refused:
        store.workflows.submit("w", [_step("a"), _step("b", "a"), _step("c", "b")])
    assert refused.value.code == "IDEMPOTENCY_KEY_REUSED"
    assert refused.value.details["node"] == "b"
    by_key = {w.idempotency_key: w for w in store.list("t", "app")}
    assert by_key["node-a"].state is WorkloadState.CANCELLED, "what this call admitted"
    assert by_key["node-b"].input == {"someone": "else"}, "the other writer's is theirs"
    assert "node-c" not in by_key or by_key["node-c"].state is WorkloadState.CANCELLED
    with pytest.raises(WorkloadError) as gone:
        store.workflows.get(workflows.planned("w", [_step("a")]).workflow_id)
    assert gone.value.code == "WORKLOAD_NOT_FOUND"


def test_a_node_s_refused_request_names_the_node(store):
    from feltdb.client.local import LocalClient

    request = make_request()
    client = LocalClient(
        store, Scope("t", "app"), request.requested_by, grant=request.authorization_snapshot
    )
    nodes = [
        {"name": "a", "submission": {"definition_id": "d", "input": {}}},
        {"name": "b", "after": "a", "submission": {"definition_id": "d", "priority": "high"}},
    ]
    with pytest.raises(WorkloadError) as refused:
        client.submit_workflow("w", nodes)
    assert refused.value.code == "WORKLOAD_INVALID"
    assert refused.value.message.startswith("node b: ")
    assert refused.value.details["node"] == "b"
