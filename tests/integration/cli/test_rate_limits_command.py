"""Rate limits through a real server (set, listed, removed over HTTP; claims answered
``204`` with ``Retry-After`` while only rate-limited work is ready; a long-poll that takes
the work once its window opens) and a real ``feltdb`` process on a store file.
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
from feltdb.auth.capabilities import OPERATE, READ, SUBMIT


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    yield from serve(tmp_path_factory.mktemp("rate-server"))


def test_rate_limits_are_set_listed_and_removed_over_http(server: Server) -> None:
    application = f"app-{uuid.uuid4().hex[:8]}"
    url = f"{server.url}/v1/limits/rate"
    operator = server.headers(application, subject=Subject.human("ada"), capabilities=[OPERATE])
    reader = server.headers(application, subject=Subject.human("ada"), capabilities=[READ])

    body = {"starts": 5, "period_s": 60}
    assert httpx.put(f"{url}/smtp", headers=reader, json=body).status_code == 403
    for bad in ({"starts": 0, "period_s": 1}, {"starts": 1}, {"starts": 1, "period_s": 86_401}):
        assert httpx.put(f"{url}/smtp", headers=operator, json=bad).status_code == 422
    done = httpx.put(f"{url}/smtp", headers=operator, json=body)
    assert done.status_code == 200 and done.json() == body
    assert httpx.get(url, headers=reader).json() == {
        "limits": [{"name": "smtp", "starts": 5, "period_s": 60}]
    }
    narrowed = server.headers(
        application, subject=Subject.human("ada"), capabilities=[READ], environments=["prod"]
    )
    assert httpx.get(url, headers=narrowed).status_code == 403
    assert httpx.delete(f"{url}/smtp", headers=operator).status_code == 204
    assert httpx.get(url, headers=reader).json() == {"limits": []}


def test_a_claim_at_the_limit_answers_retry_after_and_a_long_poll_takes_the_next_start(
    server: Server,
) -> None:
    application = f"app-{uuid.uuid4().hex[:8]}"
    operator = server.headers(application, subject=Subject.human("ada"), capabilities=[OPERATE])
    url = f"{server.url}/v1/limits/rate"
    minute = {"starts": 1, "period_s": 60}
    assert httpx.put(f"{url}/smtp", headers=operator, json=minute).status_code == 200
    second = {"starts": 1, "period_s": 1}
    assert httpx.put(f"{url}/api", headers=operator, json=second).status_code == 200
    submitter = server.headers(application, subject=Subject.agent("a1"), capabilities=[SUBMIT])
    for n, limit in enumerate(("smtp", "smtp", "api", "api")):
        body = submission(f"k{n}", rate_limit=limit, rate_key="acme", definition_id=limit)
        made = httpx.post(f"{server.url}/v1/workloads", headers=submitter, json=body)
        assert made.status_code == 201 and made.json()["rate_key"] == "acme", made.text
    worker = server.headers(application)
    claims = f"{server.url}/v1/claims"

    # Under a start a minute, the second waits: 204, and Retry-After says how long.
    smtp = {"definitions": ["smtp"]}
    assert httpx.post(claims, headers=worker, json=smtp).status_code == 200
    held = httpx.post(claims, headers=worker, json=smtp)
    assert held.status_code == 204 and 1 <= int(held.headers["Retry-After"]) <= 60
    # Under a start a second, a long-poll takes the second one once its window opens.
    api = {"definitions": ["api"]}
    first = httpx.post(claims, headers=worker, json=api)
    assert first.status_code == 200, first.text
    waited = httpx.post(claims, headers=worker, json={**api, "wait_ms": 10_000}, timeout=20)
    assert waited.status_code == 200, waited.text
    assert waited.json()["workload_id"] != first.json()["workload_id"]
    # Nothing left of api: no Retry-After (it is only for work held back by a rate limit).
    assert "Retry-After" not in httpx.post(claims, headers=worker, json=api).headers


def test_the_command_line_sets_lists_and_removes_a_rate_limit(tmp_path: Path) -> None:
    db = str(tmp_path / "w.db")
    made = feltdb("submit", "send", "--db", db, "--rate-limit", "smtp", "--rate-key", "acme")
    assert made.returncode == 0, made.stderr
    said = feltdb("limits", "rate", "set", "smtp", "2", "60", "--db", db, columns=80)
    assert said.returncode == 0, said.stderr
    assert said.stdout.strip() == "rate limit smtp: at most 2 starts per 60 s, per key"
    listed = feltdb("limits", "rate", "--db", db, columns=80)
    assert listed.stdout.strip() == "smtp: at most 2 starts per 60 s, per key"
    assert json.loads(feltdb("limits", "rate", "--db", db, "--json").stdout) == {
        "limits": [{"name": "smtp", "starts": 2, "period_s": 60}]
    }
    with WorkloadStore.open(db) as store:
        (workload,) = store.list("default", "default")
        assert (workload.rate_limit, workload.rate_key) == ("smtp", "acme")
    bad = feltdb("limits", "rate", "set", "smtp", "0", "60", "--db", db)
    assert bad.returncode == 2 and "STARTS" in bad.stderr
    blank = feltdb("submit", "send", "--db", db, "--rate-key", "acme", "--key", "x")
    assert blank.returncode == 1 and "rate_limit: required with rate_key" in blank.stderr
    removed = feltdb("limits", "rate", "remove", "smtp", "--db", db)
    assert removed.returncode == 0 and "removed" in removed.stdout
    assert feltdb("limits", "rate", "--db", db).stdout.strip() == "no rate limit is set"


def test_aging_is_set_over_http_and_from_the_command_line(server: Server, tmp_path: Path) -> None:
    application = f"app-{uuid.uuid4().hex[:8]}"
    url = f"{server.url}/v1/limits/aging"
    operator = server.headers(application, subject=Subject.human("ada"), capabilities=[OPERATE])
    reader = server.headers(application, subject=Subject.human("ada"), capabilities=[READ])
    assert httpx.get(url, headers=reader).json() == {"aging_s": None}
    assert httpx.put(url, headers=reader, json={"aging_s": 60}).status_code == 403
    assert httpx.put(url, headers=operator, json={"aging_s": 0}).status_code == 422
    assert httpx.put(url, headers=operator, json={"aging_s": 60}).status_code == 200
    assert httpx.get(url, headers=reader).json() == {"aging_s": 60}

    db = str(tmp_path / "w.db")
    assert feltdb("submit", "send", "--db", db, "--fairness-key", "acme").returncode == 0
    assert feltdb("limits", "aging", "--db", db).stdout.strip() == "no aging"
    said = feltdb("limits", "aging", "300", "--db", db)
    assert said.returncode == 0 and said.stdout.strip() == "aging: one priority step per 300 s"
    assert feltdb("limits", "aging", "--db", db).stdout.strip() == said.stdout.strip()
    bad = feltdb("limits", "aging", "soon", "--db", db)
    assert bad.returncode == 2 and "1 to 2592000, or none" in bad.stderr
    with WorkloadStore.open(db) as store:
        assert store.limits.aging("default", "default") == 300
        assert store.list("default", "default")[0].fairness_key == "acme"
