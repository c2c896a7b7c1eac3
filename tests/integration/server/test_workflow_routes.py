"""``/v1/workflows`` and the clients' workflow calls against a real server process: a
workflow submitted whole, its run read and cancelled, and who may do each."""

from __future__ import annotations

import httpx
import pytest
from support.server import WORK_CAPABILITY, Server, submission

from feltdb import Subject
from feltdb.auth.policy import CANCEL, CLAIM, READ, SUBMIT
from feltdb.client import Client, ClientError

REQUESTER = Subject.service("etl")


def _nodes(prefix: str = "") -> list[dict]:
    return [
        {"name": "extract", "submission": submission(f"{prefix}extract")},
        {"name": "load", "after": ["extract"], "submission": submission(f"{prefix}load")},
        {
            "name": "cleanup",
            "after": ["load:DEAD_LETTER"],
            "submission": submission(f"{prefix}cleanup", definition_id="cleanup"),
        },
    ]


def _client(server: Server, app: str, *capabilities: str, subject=REQUESTER) -> Client:
    return Client(server.url, server.token(app, subject=subject, capabilities=list(capabilities)))


def test_a_workflow_is_submitted_read_and_cancelled_over_http(server: Server, app: str):
    with _client(server, app, SUBMIT, READ, CANCEL) as client:
        run, created = client.submit_workflow("nightly", _nodes())
        assert created and run.state == "RUNNING"
        assert [(n.name, n.state) for n in run.nodes] == [
            ("extract", "READY"),
            ("load", "READY"),
            ("cleanup", "READY"),
        ]
        again, created = client.submit_workflow("nightly", _nodes())
        assert not created and again.workflow_id == run.workflow_id
        assert client.workflow(run.workflow_id) == run
        load = client.get(run.nodes[1].workload_id)
        assert [d.workload_id for d in load.dependencies] == [run.nodes[0].workload_id]
        cancelled = client.cancel_workflow(run.workflow_id)
        assert cancelled.state == "CANCELLED"
        assert {n.state for n in cancelled.nodes} == {"CANCELLED"}


def test_a_cycle_is_refused_naming_its_nodes_and_admits_nothing(
    server: Server, http: httpx.Client, app: str
):
    headers = server.headers(app, subject=REQUESTER, capabilities=[SUBMIT, READ])
    nodes = _nodes()
    nodes[0]["after"] = ["load"]
    answer = http.post("/v1/workflows", json={"key": "loop", "nodes": nodes}, headers=headers)
    assert answer.status_code == 422, answer.text
    error = answer.json()["error"]
    assert error["code"] == "WORKLOAD_INVALID"
    assert error["details"]["nodes"] == ["extract", "load"]
    assert error["details"]["fields"] == ["nodes.0.after", "nodes.1.after"]
    assert "extract → load → extract" in error["message"]
    listed = http.get("/v1/workloads", headers=headers).json()["items"]
    assert listed == [], "nothing admitted"


def test_who_may_submit_read_and_cancel_a_run(server: Server, http: httpx.Client, app: str):
    with _client(server, app, SUBMIT, READ) as client:
        run, _ = client.submit_workflow("nightly", _nodes("who-"))
        with pytest.raises(ClientError) as cannot_cancel:
            client.cancel_workflow(run.workflow_id)
        assert cannot_cancel.value.code == "WORKLOAD_UNAUTHORIZED"
    path = f"/v1/workflows/{run.workflow_id}"
    worker = server.headers(app, subject=Subject.worker("w"), capabilities=[CLAIM, WORK_CAPABILITY])
    assert http.get(path, headers=worker).status_code == 403
    elsewhere = server.headers("another-app", subject=REQUESTER, capabilities=[READ])
    assert http.get(path, headers=elsewhere).status_code == 404
    narrowed = server.headers(app, subject=REQUESTER, capabilities=[READ], environments=["staging"])
    assert http.get(path, headers=narrowed).status_code == 404
    with _client(server, app, READ) as reader:
        with pytest.raises(ClientError) as cannot_submit:
            reader.submit_workflow("other", _nodes("other-"))
        assert cannot_submit.value.code == "WORKLOAD_UNAUTHORIZED"
        assert reader.workflow(run.workflow_id).state == "RUNNING"
