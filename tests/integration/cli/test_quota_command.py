"""Admission quotas through a real server (a refusal is ``429`` with ``Retry-After``, per
item in a batch; ``GET /v1/limits/quota``; the client) and a real ``feltdb`` process
(``feltdb limits quota set``, ``feltdb limits quota``, a submission refused).
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
from feltdb.auth.capabilities import CLAIM, READ, SUBMIT
from feltdb.client import Client, ClientError


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    yield from serve(tmp_path_factory.mktemp("quota-server"))


def fresh_tenant() -> str:
    # A tenant no admission of the server has asked about: its quotas are read at once.
    return f"tenant-{uuid.uuid4().hex[:8]}"


def test_a_refused_admission_is_429_with_retry_after_and_the_code(server: Server) -> None:
    tenant = fresh_tenant()
    with WorkloadStore.open(server.target) as store:  # the holder, behind the server's back
        store.limits.set_quota(tenant, max_unfinished=2, actor="human:ops", now=0)
    headers = server.headers("app", tenant=tenant, subject=Subject.agent("a1"))
    url = f"{server.url}/v1/workloads"
    made = [httpx.post(url, headers=headers, json=submission(f"k{n}")) for n in range(2)]
    assert [answer.status_code for answer in made] == [201, 201]

    refused = httpx.post(url, headers=headers, json=submission("k2"))

    assert refused.status_code == 429, refused.text
    assert refused.headers["Retry-After"] == "1"
    error = refused.json()["error"]
    assert error["code"] == "WORKLOAD_QUOTA_EXCEEDED"
    assert f"tenant {tenant!r}" in error["message"]
    assert error["details"]["max_unfinished"] == 2 and error["details"]["retry_after_s"] == 1
    # A replay admits nothing, so no quota refuses it; a batch is answered item by item.
    assert httpx.post(url, headers=headers, json=submission("k0")).status_code == 200
    batch = httpx.post(
        f"{server.url}/v1/batches/workloads",
        headers=headers,
        json={"items": [submission("k1"), submission("k3")]},
    )
    assert [item["status"] for item in batch.json()["items"]] == [200, 429]
    assert batch.json()["items"][1]["error"]["details"]["retry_after_s"] == 1

    shown = httpx.get(f"{server.url}/v1/limits/quota", headers=headers)
    assert shown.status_code == 200, shown.text
    (quota,) = shown.json()["quotas"]
    assert (quota["tenant_id"], quota["max_unfinished"], quota["unfinished"]) == (tenant, 2, 2)
    claimer = server.headers("app", tenant=tenant, capabilities=[CLAIM])
    assert httpx.get(f"{server.url}/v1/limits/quota", headers=claimer).status_code == 403
    reader = server.headers("app", tenant=tenant, capabilities=[READ])
    assert httpx.get(f"{server.url}/v1/limits/quota", headers=reader).status_code == 200


def test_a_grants_rate_is_refused_through_the_client_with_its_wait(server: Server) -> None:
    tenant = fresh_tenant()
    grant = server.grant("app", tenant=tenant, subject=Subject.agent("a1"), capabilities=[SUBMIT])
    with WorkloadStore.open(server.target) as store:
        # One admission in 1,000 s: a bucket of one, the next a deterministic wait away.
        store.limits.set_quota(tenant, grant_id=grant.id, per_second=0.001, actor="human:ops")
    with Client(server.url, server.keyring.sign(grant)) as client:
        assert client.admit(definition_id="send", input={}, idempotency_key="a")[1] is True
        with pytest.raises(ClientError) as refused:
            client.admit(definition_id="send", input={}, idempotency_key="b")
        assert refused.value.code == "WORKLOAD_QUOTA_EXCEEDED"
        assert refused.value.status == 429
        assert refused.value.retry_after is not None and 990 <= refused.value.retry_after <= 1000
        (quota,) = client.admission_quotas().quotas
        assert (quota.grant_id, quota.per_second, quota.unfinished) == (grant.id, 0.001, None)
    other = server.headers("app", tenant=tenant, subject=Subject.agent("a1"))  # another grant
    made = httpx.post(f"{server.url}/v1/workloads", headers=other, json=submission("c"))
    assert made.status_code == 201
    assert httpx.get(f"{server.url}/v1/limits/quota", headers=other).json()["quotas"] == []


def test_the_admission_routes_declare_429(server: Server) -> None:
    paths = httpx.get(f"{server.url}/openapi.json").json()["paths"]
    for path in ("/v1/workloads", "/v1/workflows"):
        answer = paths[path]["post"]["responses"]["429"]
        assert "Retry-After" in answer["headers"], path
    assert "429" in paths["/v1/batches/workloads"]["post"]["description"]
    assert "/v1/limits/quota" in paths


def test_the_holder_sets_and_lists_quotas_from_the_command_line(tmp_path: Path) -> None:
    db = str(tmp_path / "w.db")
    assert feltdb("submit", "x", "--db", db).returncode == 0  # makes the store
    assert feltdb("limits", "quota", "--db", db).stdout.strip() == "no admission quota is set"

    said = feltdb("limits", "quota", "set", "default", "--max-unfinished", "2", "--db", db)
    assert said.returncode == 0, said.stderr
    assert said.stdout.strip() == "tenant default: 1 of 2 unfinished"
    rate = feltdb("limits", "quota", "set", "default", "--per-second", "2.5", "--db", db)
    assert rate.stdout.strip() == (  # the cap kept: an option not given is kept
        "tenant default: 1 of 2 unfinished; 2.5 a second (3 admissible now)"
    )
    granted = feltdb(
        "limits", "quota", "set", "default", "--grant", "grant_x", "--max-unfinished", "9",
        "--db", db,
    )  # fmt: skip
    assert granted.stdout.strip() == "tenant default, grant grant_x: 0 of 9 unfinished"

    assert feltdb("submit", "y", "--db", db).returncode == 0
    refused = feltdb("submit", "z", "--db", db)
    assert refused.returncode == 1 and "error WORKLOAD_QUOTA_EXCEEDED" in refused.stderr
    assert "tenant 'default' is 2 unfinished workloads at most" in refused.stderr

    mine, grants = feltdb("limits", "quota", "--db", db).stdout.splitlines()
    # (What the bucket allows now depends on the seconds passed since the submission.)
    assert mine.startswith("tenant default: 2 of 2 unfinished; 2.5 a second (")
    assert grants == "tenant default, grant grant_x: 0 of 9 unfinished"
    as_json = json.loads(feltdb("limits", "quota", "--db", db, "--json").stdout)
    assert [q["grant_id"] for q in as_json["quotas"]] == [None, "grant_x"]
    assert as_json["complete"] is True
    only = feltdb("limits", "quota", "--db", db, "--tenant", "nobody").stdout.strip()
    assert only == "no admission quota is set"

    removed = feltdb(
        "limits", "quota", "set", "default", "--max-unfinished", "none", "--per-second",
        "none", "--db", db,
    )  # fmt: skip
    assert removed.stdout.strip() == "tenant default: no quota"
    assert feltdb("submit", "z", "--db", db).returncode == 0


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--max-unfinished", "0"], "--max-unfinished '0': 1 to 1000000, or none"),
        (["--per-second", "fast"], "--per-second 'fast': 0.001 to 1000000, or none"),
        ([], "give --max-unfinished, --per-second, or both"),
    ],
)
def test_a_bad_quota_is_a_usage_error(tmp_path: Path, args: list[str], said: str) -> None:
    db = str(tmp_path / "w.db")
    assert feltdb("submit", "x", "--db", db).returncode == 0
    run = feltdb("limits", "quota", "set", "default", *args, "--db", db)
    assert run.returncode == 2 and said in run.stderr and "Traceback" not in run.stderr


def test_only_the_holder_sets_a_quota(server: Server) -> None:
    run = feltdb("limits", "quota", "set", "t", "--max-unfinished", "5")
    assert run.returncode == 2 and "needs --db: only the store's holder sets" in run.stderr
    run = feltdb("limits", "quota", "set", "t", "--max-unfinished", "5", "--url", server.url)
    assert run.returncode == 2 and "No such option: --url" in run.stderr  # not a server's
    token = server.token("app", subject=Subject.agent("a1"), tenant=fresh_tenant())
    shown = feltdb("limits", "quota", "--url", server.url, "--token", token)
    assert shown.returncode == 0 and shown.stdout.strip() == "no admission quota is set"
