"""Concurrency limits through a real ``feltdb`` process (``submit --concurrency-key``,
``feltdb limits``, on a store file) and a real server (a submission naming a key, claims
over HTTP, ``GET /v1/limits/concurrency``).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from support.server import Server, serve, submission
from test_newcomer import feltdb

from feltdb import Subject, WorkloadStore
from feltdb.auth.capabilities import CLAIM, OPERATE, READ, SUBMIT


def test_submit_names_a_key_and_limits_lists_its_holders(tmp_path: Path) -> None:
    db = str(tmp_path / "w.db")
    for n in range(3):
        given = ["--concurrency-key", "acme", "--concurrency-limit", "2", "--key", f"k{n}"]
        made = feltdb("submit", "send", "--db", db, *given)
        assert made.returncode == 0, made.stderr
    with WorkloadStore.open(db) as store:
        claims = store.claim_many("default", "default", "w", [], 3)
    assert len(claims) == 2  # the third waits for a slot

    listed = feltdb("limits", "--db", db, columns=80)
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    assert lines[0] == "acme: 2 of 2 held"
    assert sorted(line.strip() for line in lines[1:]) == sorted(c.workload_id for c in claims)
    as_json = json.loads(feltdb("limits", "--db", db, "--json").stdout)
    assert as_json["complete"] is True and as_json["keys"][0]["limit"] == 2

    refused = feltdb("submit", "send", "--db", db, "--concurrency-key", "acme", "--key", "x")
    assert refused.returncode == 1 and "concurrency_limit: required with concurrency_key" in (
        refused.stderr
    )


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    yield from serve(tmp_path_factory.mktemp("limits-server"))


def test_over_http_claims_hold_the_limit_and_the_keys_are_listed(server: Server) -> None:
    application = f"app-{uuid.uuid4().hex[:8]}"
    submitter = server.headers(application, subject=Subject.agent("a1"), capabilities=[SUBMIT])
    for n in range(4):
        body = submission(f"k{n}", concurrency_key="acme", concurrency_limit=1)
        made = httpx.post(f"{server.url}/v1/workloads", headers=submitter, json=body)
        assert made.status_code == 201, made.text
    worker = server.headers(application)
    claimed = [httpx.post(f"{server.url}/v1/claims", headers=worker, json={}) for _ in range(2)]
    assert [answer.status_code for answer in claimed] == [200, 204]

    url = f"{server.url}/v1/limits/concurrency"
    reader = server.headers(application, subject=Subject.human("ada"), capabilities=[READ])
    listed = httpx.get(url, headers=reader)
    assert listed.status_code == 200, listed.text
    (key,) = listed.json()["keys"]
    assert key == {
        "key": "acme", "limit": 1, "holders": [claimed[0].json()["workload_id"]],
    }  # fmt: skip

    narrowed = server.headers(
        application, subject=Subject.human("ada"), capabilities=[READ], environments=["prod"]
    )
    assert httpx.get(url, headers=narrowed).status_code == 403
    claimer = server.headers(application, subject=Subject.human("ada"), capabilities=[CLAIM])
    assert httpx.get(url, headers=claimer).status_code == 403
    other = server.headers(f"app-{uuid.uuid4().hex[:8]}", capabilities=[READ])
    assert httpx.get(url, headers=other).json() == {"keys": [], "complete": True, "definitions": {}}


def test_a_definitions_default_is_set_over_http_and_from_the_command_line(
    server: Server, tmp_path: Path
) -> None:
    application = f"app-{uuid.uuid4().hex[:8]}"
    url = f"{server.url}/v1/limits/concurrency/definitions/send"
    operator = server.headers(application, subject=Subject.human("ada"), capabilities=[OPERATE])
    reader = server.headers(application, subject=Subject.human("ada"), capabilities=[READ])

    assert httpx.put(url, headers=reader, json={"limit": 2}).status_code == 403
    assert httpx.put(url, headers=operator, json={"limit": 0}).status_code == 422
    assert httpx.put(url, headers=operator, json={}).status_code == 422
    done = httpx.put(url, headers=operator, json={"limit": 2})
    assert done.status_code == 200, done.text
    listed = httpx.get(f"{server.url}/v1/limits/concurrency", headers=reader).json()
    assert listed["definitions"] == {"send": 2}
    submitter = server.headers(application, subject=Subject.agent("a1"), capabilities=[SUBMIT])
    made = httpx.post(f"{server.url}/v1/workloads", headers=submitter, json=submission("s1"))
    assert made.status_code == 201 and made.json()["concurrency_key"] == "definition:send"
    assert httpx.put(url, headers=operator, json={"limit": None}).status_code == 200
    assert (
        httpx.get(f"{server.url}/v1/limits/concurrency", headers=reader).json()["definitions"] == {}
    )

    db = str(tmp_path / "w.db")
    assert feltdb("submit", "x", "--db", db).returncode == 0  # makes the store
    said = feltdb("limits", "set", "send", "3", "--db", db, columns=80)
    assert said.returncode == 0 and said.stdout.strip() == (
        "definition send: at most 3 at once (work admitted from now on)"
    )
    assert "definition send: at most 3 at once" in feltdb("limits", "--db", db).stdout
    bad = feltdb("limits", "set", "send", "zero", "--db", db)
    assert bad.returncode == 2 and "1 to 1000, or none" in bad.stderr
