"""The batch routes (``/v1/batches/{workloads,claims,completions,heartbeats}``): one store
call each, every item answered as its single route answers it, and one item's refusal
refusing no other.
"""

from __future__ import annotations

from typing import Any

import httpx
import msgspec
from support.server import WORK_CAPABILITY, Server, submission

from feltdb import GrantConstraints, Subject
from feltdb.auth.policy import CLAIM, SUBMIT
from feltdb.work.inputs import MAX_BATCH_ITEMS

Answer = tuple[int, str | None]
"""An item's (status, error code)."""


def worker(server: Server, app: str, name: str = "w1", **grant: Any) -> dict[str, str]:
    return server.headers(app, subject=Subject.worker(name), **grant)


def admit_n(server: Server, http: httpx.Client, app: str, n: int, prefix: str = "k") -> list[str]:
    items = [submission(f"{prefix}{i}") for i in range(n)]
    answer = http.post("/v1/batches/workloads", json={"items": items}, headers=server.headers(app))
    assert answer.status_code == 200, answer.text
    assert [item["status"] for item in answer.json()["items"]] == [201] * n
    return [item["workload"]["workload_id"] for item in answer.json()["items"]]


def running(server: Server, http: httpx.Client, app: str, n: int) -> list[dict[str, Any]]:
    """``n`` workloads claimed and started by w1, in one batch each."""
    admit_n(server, http, app, n)
    body = {"limit": n, "start": True}
    answer = http.post("/v1/batches/claims", json=body, headers=worker(server, app))
    assert answer.status_code == 200, answer.text
    claims: list[dict[str, Any]] = [item["claim"] for item in answer.json()["items"]]
    assert len(claims) == n
    return claims


def per_item(answer: httpx.Response) -> list[Answer]:
    assert answer.status_code == 200, answer.text
    return [(item["status"], item.get("error", {}).get("code")) for item in answer.json()["items"]]


def single(answer: httpx.Response) -> Answer:
    code = answer.json()["error"]["code"] if answer.status_code >= 400 else None
    return answer.status_code, code


def state_of(server: Server, http: httpx.Client, app: str, workload_id: str) -> str:
    state: str = http.get(f"/v1/workloads/{workload_id}", headers=server.headers(app)).json()[
        "state"
    ]
    return state


def admissions(foreign: str) -> list[dict[str, Any]]:
    return [
        submission("new"),
        submission("new"),  # a replay of the item before it: 200
        submission("changed", priority=1),
        submission("changed", priority=2),  # the key reused for another request: 409
        {**submission("mine"), "tenant_id": "t2"},  # a field of the token's: 422
        submission("secret", input={"password": "hunter2"}),  # 422
        {"environment": "production"},  # not a submission: 422
        submission("dep", dependencies=[{"workload_id": foreign}]),  # not visible: 422
    ]


def test_admissions_answer_each_item_as_the_single_route_does(
    server: Server, http: httpx.Client, app: str
) -> None:
    foreign = admit_n(server, http, f"{app}-other", 1)[0]
    batch = http.post(
        "/v1/batches/workloads", json={"items": admissions(foreign)}, headers=server.headers(app)
    )
    expected = [
        (201, None), (200, None), (201, None), (409, "IDEMPOTENCY_KEY_REUSED"),
        (422, "WORKLOAD_INVALID"), (422, "WORKLOAD_SECRET_REJECTED"), (422, "WORKLOAD_INVALID"),
        (422, "WORKLOAD_INVALID"),
    ]  # fmt: skip
    assert per_item(batch) == expected
    # The same requests one by one, in another application, answer the same.
    alone = f"{app}-alone"
    singles = [
        single(http.post("/v1/workloads", json=body, headers=server.headers(alone)))
        for body in admissions(foreign)
    ]
    assert singles == expected
    items = batch.json()["items"]
    assert items[0]["workload"] == items[1]["workload"]
    assert items[4]["error"]["details"] == {"fields": ["tenant_id"]}
    listed = http.get("/v1/workloads", headers=server.headers(app)).json()["items"]
    assert len(listed) == 2  # "new" and "changed": nothing of the refused items


def test_claims_batch_claims_up_to_the_limit_and_may_start(
    server: Server, http: httpx.Client, app: str
) -> None:
    ids = admit_n(server, http, app, 3)
    headers = worker(server, app)
    first = http.post("/v1/batches/claims", json={"limit": 2}, headers=headers)
    assert first.status_code == 200, first.text
    claimed = [item["claim"]["workload_id"] for item in first.json()["items"]]
    assert len(claimed) == 2 and {state_of(server, http, app, w) for w in claimed} == {"CLAIMED"}
    rest = http.post("/v1/batches/claims", json={"limit": 5, "start": True}, headers=headers)
    items = rest.json()["items"]
    assert [item["claim"]["workload_id"] for item in items] == sorted(set(ids) - set(claimed))
    assert state_of(server, http, app, items[0]["claim"]["workload_id"]) == "RUNNING"
    # Each claim carries the workload as its commit left it (what the worker runs it with,
    # so it needs no read), disclosed as a read discloses it: the evidence signature withheld.
    carried = items[0]["workload"]
    assert carried["workload_id"] == items[0]["claim"]["workload_id"]
    assert carried["state"] == "RUNNING" and carried["current_claim"] == items[0]["claim"]
    assert carried["authorization_snapshot"]["signature"] == "redacted"
    none = http.post("/v1/batches/claims", json={"limit": 5}, headers=headers)
    assert none.status_code == 200 and none.json() == {"items": []}


def completions(claims: list[dict[str, Any]], foreign: str) -> list[dict[str, Any]]:
    def item(claim: dict[str, Any], result_id: str, **changes: Any) -> dict[str, Any]:
        fields = {
            "workload_id": claim["workload_id"],
            "claim_id": claim["claim_id"],
            "fencing_token": claim["fencing_token"],
            "result_id": result_id,
            "output": {"ok": True},
        }
        return {**fields, **changes}

    first, stale, secret, duplicate = claims
    return [
        item(first, "r-first"),
        item(stale, "r-stale", fencing_token=stale["fencing_token"] + 1),
        item(first, "r-other", workload_id=foreign),  # another application's: 404
        item(secret, "r-secret", output={"api_key": "sk-live-0123456789abcdef"}),
        item(duplicate, "r-first"),  # the first item's result id: 409
        item(first, "r-first"),  # the first item repeated: its recorded result
    ]


def test_completions_answer_per_item_and_commit_the_rest(
    server: Server, http: httpx.Client, app: str
) -> None:
    foreign = admit_n(server, http, f"{app}-other", 1)[0]
    claims = running(server, http, app, 4)
    batch = http.post(
        "/v1/batches/completions",
        json={"items": completions(claims, foreign)},
        headers=worker(server, app),
    )
    expected = [
        (200, None), (409, "WORKLOAD_STALE_FENCE"), (404, "WORKLOAD_NOT_FOUND"),
        (422, "WORKLOAD_SECRET_REJECTED"), (409, "WORKLOAD_RESULT_DUPLICATE"), (200, None),
    ]  # fmt: skip
    assert per_item(batch) == expected
    assert batch.json()["items"][0]["result"] == batch.json()["items"][5]["result"]
    states = [state_of(server, http, app, claim["workload_id"]) for claim in claims]
    assert states == ["SUCCEEDED", "RUNNING", "RUNNING", "RUNNING"]
    # The same, one by one in another application, answers the same.
    alone = f"{app}-alone"
    fresh = running(server, http, alone, 4)
    singles = [
        single(
            http.post(
                f"/v1/workloads/{item.pop('workload_id')}/complete",
                json=item,
                headers=worker(server, alone),
            )
        )
        for item in completions(fresh, foreign)
    ]
    assert singles == expected


def test_heartbeats_answer_per_item(server: Server, http: httpx.Client, app: str) -> None:
    good, stale = running(server, http, app, 2)
    items = [
        {"workload_id": good["workload_id"], "claim_id": good["claim_id"],
         "fencing_token": good["fencing_token"], "extend_ms": 60_000},
        {"workload_id": stale["workload_id"], "claim_id": "claim_wrong",
         "fencing_token": stale["fencing_token"]},
        {"workload_id": "workload_missing", "claim_id": "c", "fencing_token": 1},
    ]  # fmt: skip
    batch = http.post("/v1/batches/heartbeats", json={"items": items}, headers=worker(server, app))
    assert per_item(batch) == [
        (200, None),
        (409, "WORKLOAD_STALE_FENCE"),
        (404, "WORKLOAD_NOT_FOUND"),
    ]
    extended = batch.json()["items"][0]["claim"]
    assert batch.json()["items"][0]["cancellation_requested"] is False
    assert extended["expires_at"] >= good["expires_at"] and extended["claim_id"] == good["claim_id"]


def test_a_token_without_workload_claim_is_refused_whole(
    server: Server, http: httpx.Client, app: str
) -> None:
    (claim,) = running(server, http, app, 1)
    headers = worker(server, app, capabilities={SUBMIT, WORK_CAPABILITY})
    fence = {k: claim[k] for k in ("workload_id", "claim_id", "fencing_token")}
    for path, body in (
        ("/v1/batches/claims", {"limit": 1}),
        ("/v1/batches/heartbeats", {"items": [fence]}),
        ("/v1/batches/completions", {"items": [{**fence, "result_id": "r", "output": 1}]}),
    ):
        answer = http.post(path, json=body, headers=headers)
        assert answer.status_code == 403, (path, answer.text)
        assert answer.json()["error"]["details"] == {"missing": "capability"}
    no_submit = worker(server, app, capabilities={CLAIM})
    refused = http.post("/v1/batches/workloads", json={"items": []}, headers=no_submit)
    assert refused.status_code == 403, refused.text
    unauthenticated = http.post("/v1/batches/workloads", json={"items": []})
    assert unauthenticated.status_code == 401


def test_a_grant_constrained_to_a_definition_gets_404_for_another_definitions_items(
    server: Server, http: httpx.Client, app: str
) -> None:
    items = [submission("mine", definition_id="mine"), submission("other", definition_id="other")]
    http.post("/v1/batches/workloads", json={"items": items}, headers=server.headers(app))
    everything = worker(server, app, "w0")
    answer = http.post("/v1/batches/claims", json={"limit": 2}, headers=everything)
    claims = [item["claim"] for item in answer.json()["items"]]
    grant = msgspec.structs.replace(
        server.grant(app, subject=Subject.worker("w0")),
        constraints=GrantConstraints(definitions=["mine"]),
    )
    constrained = {"Authorization": f"Bearer {server.keyring.sign(grant)}"}
    beats = [{k: c[k] for k in ("workload_id", "claim_id", "fencing_token")} for c in claims]
    answer = http.post("/v1/batches/heartbeats", json={"items": beats}, headers=constrained)
    definitions = [
        http.get(f"/v1/workloads/{c['workload_id']}", headers=server.headers(app)).json()[
            "definition_id"
        ]
        for c in claims
    ]
    assert per_item(answer) == [
        (200, None) if d == "mine" else (404, "WORKLOAD_NOT_FOUND") for d in definitions
    ]


def test_a_grant_not_covering_an_items_workload_refuses_that_item_403(
    server: Server, http: httpx.Client, app: str
) -> None:
    first, second = running(server, http, app, 2)
    narrow = worker(server, app, resources=[f"flow://{app}/workloads/{first['workload_id']}"])
    beats = [
        {k: c[k] for k in ("workload_id", "claim_id", "fencing_token")} for c in (first, second)
    ]
    answer = http.post("/v1/batches/heartbeats", json={"items": beats}, headers=narrow)
    assert per_item(answer) == [(200, None), (403, "WORKLOAD_UNAUTHORIZED")]


def test_more_than_the_batch_limit_is_refused_whole(
    server: Server, http: httpx.Client, app: str
) -> None:
    over = MAX_BATCH_ITEMS + 1
    beat = {"workload_id": "w", "claim_id": "c", "fencing_token": 1}
    for path, body in (
        ("/v1/batches/workloads", {"items": [{}] * over}),
        ("/v1/batches/heartbeats", {"items": [beat] * over}),
        ("/v1/batches/completions", {"items": [{**beat, "result_id": "r", "output": 1}] * over}),
        ("/v1/batches/claims", {"limit": over}),
        ("/v1/batches/claims", {"limit": 0}),
        # Over the server's lease cap (a day), which the schema declares: the body's shape.
        ("/v1/batches/heartbeats", {"items": [beat, {**beat, "extend_ms": 86_400_001}]}),
    ):
        answer = http.post(path, json=body, headers=worker(server, app))
        assert answer.status_code == 422, (path, answer.text)
        assert answer.json()["error"]["code"] == "WORKLOAD_INVALID"
    empty = http.post("/v1/batches/completions", json={"items": []}, headers=worker(server, app))
    assert empty.status_code == 200 and empty.json() == {"items": []}
