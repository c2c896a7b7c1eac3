"""Lists, the approvals inbox, dead letters and the audit, against a real server process:
pages in the store's order, each only of the grant's tenant and application.
"""

from __future__ import annotations

import base64

import httpx
import pytest
from support.server import WORK_CAPABILITY, Server, submission

from feltdb import Subject
from feltdb.auth.policy import APPROVE, AUDIT, CLAIM, OPERATE, READ, SUBMIT

WORKER = {"subject": Subject.worker("w1"), "capabilities": [CLAIM, WORK_CAPABILITY]}
READER = {"subject": Subject.human("ops"), "capabilities": [READ, APPROVE, OPERATE, AUDIT]}
LISTS = [
    ("/v1/workloads", READ),
    ("/v1/approvals", APPROVE),
    ("/v1/dead-letters", OPERATE),
    ("/v1/audit", AUDIT),
]


def fence(claim: dict) -> dict:
    return {"claim_id": claim["claim_id"], "fencing_token": claim["fencing_token"]}


def submit(http: httpx.Client, server: Server, app: str, key: str, tenant: str = "t", **fields):
    headers = server.headers(app, tenant=tenant, subject=Subject.agent("a1"), capabilities=[SUBMIT])
    answer = http.post("/v1/workloads", json=submission(key, **fields), headers=headers)
    assert answer.status_code == 201, answer.text
    return answer.json()


def walk(http: httpx.Client, path: str, headers: dict[str, str], limit: int, **params) -> list:
    items: list = []
    cursor = None
    for _ in range(50):  # bounded
        query = {**params, "limit": limit, **({"cursor": cursor} if cursor else {})}
        answer = http.get(path, params=query, headers=headers)
        assert answer.status_code == 200, answer.text
        page = answer.json()
        assert set(page) == {"items", "next_cursor"}
        assert len(page["items"]) <= limit
        items += page["items"]
        cursor = page["next_cursor"]
        if cursor is None:
            return items
    raise AssertionError("the pages did not end")


def dead_letter(http: httpx.Client, server: Server, app: str, key: str, tenant: str = "t") -> str:
    workload = submit(http, server, app, key, tenant, retry_policy={"max_attempts": 1})
    worker = server.headers(app, tenant=tenant, **WORKER)
    path = f"/v1/workloads/{workload['workload_id']}"
    claim = http.post(f"{path}/claim", headers=worker).json()
    assert http.post(f"{path}/start", json=fence(claim), headers=worker).status_code == 204
    failed = http.post(
        f"{path}/fail", json={**fence(claim), "kind": "permanent", "error": "x"}, headers=worker
    )
    assert failed.json()["state"] == "DEAD_LETTER", failed.text
    return str(workload["workload_id"])


def test_the_list_pages_in_priority_then_age_order(server: Server, http: httpx.Client, app):
    made = [submit(http, server, app, f"k{n}", priority=n % 3) for n in range(7)]
    made.append(submit(http, server, app, "other", definition_id="other"))
    reader = server.headers(app, **READER)
    expected = sorted(made, key=lambda w: (-w["priority"], w["created_at"], w["workload_id"]))
    for limit in (1, 3, 8, 500):
        listed = walk(http, "/v1/workloads", reader, limit)
        assert [w["workload_id"] for w in listed] == [w["workload_id"] for w in expected]
    first = http.get("/v1/workloads", headers=reader).json()
    assert len(first["items"]) == 8 and first["next_cursor"] is None  # default limit 50

    by_definition = walk(http, "/v1/workloads", reader, 2, definition="other")
    assert [w["definition_id"] for w in by_definition] == ["other"]
    assert walk(http, "/v1/workloads", reader, 3, state="READY") == walk(
        http, "/v1/workloads", reader, 3
    )
    assert walk(http, "/v1/workloads", reader, 3, state="SUCCEEDED") == []


def test_the_approvals_inbox_and_dead_letters(server: Server, http: httpx.Client, app):
    submit(http, server, app, "plain")
    waiting = [
        submit(http, server, app, f"ask{n}", approval={"approver_kinds": ["human"]})["workload_id"]
        for n in range(3)
    ]
    reader = server.headers(app, **READER)
    inbox = walk(http, "/v1/approvals", reader, 2)
    assert sorted(w["workload_id"] for w in inbox) == sorted(waiting)
    assert {w["state"] for w in inbox} == {"AWAITING_APPROVAL"}
    assert walk(http, "/v1/dead-letters", reader, 2) == []

    dead = dead_letter(http, server, app, "dies")
    assert [w["workload_id"] for w in walk(http, "/v1/dead-letters", reader, 2)] == [dead]


def test_the_audit_holds_the_application_s_commits_after_a_revision(
    server: Server, http: httpx.Client, app
):
    reader = server.headers(app, **READER)
    start = http.get("/v1/audit", headers=reader).json()
    assert start["items"] == []
    submitted = submit(http, server, app, "audited")
    answer = http.get("/v1/audit", params={"after": 0, "limit": 500}, headers=reader).json()
    assert [e["work_id"] for e in answer["items"]] == [submitted["workload_id"]]
    entry = answer["items"][0]
    assert entry["audit"]["tenant"] == "t" and entry["audit"]["application"] == app
    assert entry["audit"]["kind"] == "workload.created"
    after = answer["next_after"]
    assert after == entry["commit_revision"]
    assert http.get("/v1/audit", params={"after": after}, headers=reader).json()["items"] == []


def test_no_list_nor_the_audit_shows_another_tenant_s_work(server: Server, http: httpx.Client, app):
    # The other tenant uses the same application name: only the tenant tells them apart.
    theirs = {
        submit(http, server, app, "theirs", tenant="t2")["workload_id"],
        submit(
            http, server, app, "theirs-ask", tenant="t2", approval={"approver_kinds": ["human"]}
        )["workload_id"],
        dead_letter(http, server, app, "theirs-dead", tenant="t2"),
    }
    ours = submit(http, server, app, "ours")["workload_id"]
    ours_too = submit(http, server, f"{app}-b", "ours-b")["workload_id"]  # our other app
    reader = server.headers(app, **READER)
    seen = set()
    for path, _ in LISTS:
        answer = http.get(path, params={"limit": 500}, headers=reader)
        assert answer.status_code == 200, answer.text
        for item in answer.json()["items"]:
            seen.add(item.get("workload_id") or item.get("work_id"))
            if path == "/v1/audit":
                assert (item["audit"]["tenant"], item["audit"]["application"]) == ("t", app)
            else:
                assert (item["tenant_id"], item["application_id"]) == ("t", app)
    assert ours in seen
    assert seen.isdisjoint(theirs | {ours_too})

    # The other tenant sees its own, and none of ours.
    foreign = server.headers(app, tenant="t2", **READER)
    listed = {w["workload_id"] for w in walk(http, "/v1/workloads", foreign, 2)}
    assert listed == theirs
    audited = http.get("/v1/audit", params={"limit": 500}, headers=foreign).json()["items"]
    assert {e["work_id"] for e in audited} == theirs


@pytest.mark.parametrize(("path", "capability"), LISTS)
def test_each_list_needs_its_capability_and_the_whole_application(
    server: Server, http: httpx.Client, app, path, capability
):
    everything_else = [c for c in (READ, APPROVE, OPERATE, AUDIT, CLAIM) if c != capability]
    lacking = server.headers(app, capabilities=everything_else)
    refused = http.get(path, headers=lacking)
    assert refused.status_code == 403
    assert refused.json()["error"]["details"]["missing"] == "capability"

    one_workload = server.headers(
        app, capabilities=[capability], resources=[f"flow://{app}/workloads/workload_1"]
    )
    narrow = http.get(path, headers=one_workload)
    assert narrow.status_code == 403
    assert narrow.json()["error"]["details"]["missing"] == "resource"
    assert http.get(path).status_code == 401
    assert http.get(path, headers=server.headers(app, capabilities=[capability])).status_code == 200


@pytest.mark.parametrize(
    "params",
    [
        {"limit": 0},
        {"limit": 501},
        {"limit": "x"},
        {"state": "NOPE"},
        {"cursor": "!!!"},
        {"cursor": base64.urlsafe_b64encode(b'{"a": 1}').decode()},
        {"cursor": base64.urlsafe_b64encode(b"[1, 2]").decode()},
        {"cursor": base64.urlsafe_b64encode(b'[1.5, 2, "k"]').decode()},
        {"cursor": base64.urlsafe_b64encode(b'[1, 2, "k\\u0000"]').decode()},
        {"cursor": "A" * 2000},
    ],
)
def test_bad_list_parameters_are_refused_with_422(server: Server, http: httpx.Client, app, params):
    answer = http.get("/v1/workloads", params=params, headers=server.headers(app, **READER))
    assert answer.status_code == 422, answer.text
    assert answer.json()["error"]["code"] == "WORKLOAD_INVALID"


@pytest.mark.parametrize("params", [{"after": -1}, {"limit": 0}, {"limit": 501}, {"after": "x"}])
def test_bad_audit_parameters_are_refused_with_422(server: Server, http: httpx.Client, app, params):
    answer = http.get("/v1/audit", params=params, headers=server.headers(app, **READER))
    assert answer.status_code == 422, answer.text


def test_a_cursor_names_a_position_not_a_grant(server: Server, http: httpx.Client, app):
    # A cursor made under one grant, replayed under another tenant's, pages that tenant's
    # work only: the cursor carries a position, never a scope.
    for n in range(3):
        submit(http, server, app, f"k{n}")
    reader = server.headers(app, **READER)
    cursor = http.get("/v1/workloads", params={"limit": 1}, headers=reader).json()["next_cursor"]
    assert cursor is not None
    foreign = server.headers(app, tenant="t3", **READER)
    answer = http.get("/v1/workloads", params={"cursor": cursor}, headers=foreign)
    assert answer.status_code == 200 and answer.json()["items"] == []
