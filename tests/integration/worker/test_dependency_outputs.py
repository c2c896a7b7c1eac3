"""A handler reads what the work it depends on produced (``ctx.dependency_outputs``), and
nothing else: the outputs of its declared dependencies that succeeded, through the real
runtime, as a workflow's nodes run."""

from __future__ import annotations

from typing import Any

from feltdb.testing import REQUESTER, WorkerTestEnvironment
from feltdb.worker import Context, Worker


def _etl_worker() -> Worker:
    worker = Worker(url="http://unused.invalid", token="not-used")

    @worker.handler("extract")
    def extract(ctx: Context) -> Any:
        return {"rows": ctx.input["rows"]}

    @worker.handler("load")
    def load(ctx: Context) -> Any:
        [(_, extracted)] = ctx.dependency_outputs.items()
        return {"loaded": extracted["rows"] * 2}

    @worker.handler("report")
    def report(ctx: Context) -> Any:
        return {"saw": sorted(ctx.dependency_outputs.values(), key=str)}

    return worker


def _node(name: str, rows: int, *after: str) -> dict[str, Any]:
    submission = {"environment": "test", "definition_id": name, "input": {"rows": rows}}
    return {"name": name, "after": list(after), "submission": submission}


def test_each_node_reads_the_outputs_of_the_nodes_it_runs_after_only() -> None:
    with WorkerTestEnvironment() as env:
        client = env.client(REQUESTER, grant=True)
        run, _ = client.submit_workflow(
            "etl",
            [_node("extract", 21), _node("load", 0, "extract"), _node("report", 0, "load")],
        )
        assert env.run(_etl_worker()) == 3
        ids = {node.name: node.workload_id for node in run.nodes}
        outputs = {name: env.get(ids[name]).result.output for name in ids}
        assert outputs["load"] == {"loaded": 42}
        # The report depends on the load alone: it sees the load's output, not the extract's.
        assert outputs["report"] == {"saw": [{"loaded": 42}]}
        assert client.workflow(run.workflow_id).state == "SUCCEEDED"
