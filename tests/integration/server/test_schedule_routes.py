"""``/v1/schedules`` against a real server process, on each backend: create, list, read,
the dry run, pause, resume, delete; who may; and the server's own scheduler admitting
occurrences."""

from __future__ import annotations

import time

import httpx
from support.server import Server

from feltdb import Subject
from feltdb.auth.capabilities import READ, SCHEDULE, SUBMIT

TEMPLATE = {"definition_id": "report", "input": {"period": "day"}}
MANAGER = {"subject": Subject.human("ops"), "capabilities": [SCHEDULE, SUBMIT, READ]}


def test_a_schedule_is_managed_over_http(server: Server, http: httpx.Client, app):
    headers = server.headers(app, **MANAGER)
    body = {"schedule_id": "nightly", "cron": "30 2 * * *", "timezone": "Europe/Berlin",
            "template": TEMPLATE}  # fmt: skip
    created = http.post("/v1/schedules", json=body, headers=headers)
    assert created.status_code == 201, created.text
    made = created.json()
    assert (made["schedule_id"], made["cron"], made["timezone"]) == (
        "nightly", "30 2 * * *", "Europe/Berlin",
    )  # fmt: skip
    assert made["created_by"] == "human:ops" and made["paused"] is False
    assert made["catch_up"] == "skip" and made["next_occurrence"] > time.time()
    again = http.post("/v1/schedules", json=body, headers=headers)
    assert again.status_code == 409, again.text

    listed = http.get("/v1/schedules", headers=headers).json()["items"]
    assert [s["schedule_id"] for s in listed] == ["nightly"]
    assert http.get("/v1/schedules/nightly", headers=headers).json() == {
        **made,
        "updated_at": made["updated_at"],
    }
    upcoming = http.get("/v1/schedules/nightly/next", params={"count": 3}, headers=headers)
    assert upcoming.status_code == 200, upcoming.text
    instants = upcoming.json()["occurrences"]
    assert len(instants) == 3 and instants[0] == made["next_occurrence"]
    assert instants[1] - instants[0] in (23 * 3600, 24 * 3600, 25 * 3600)
    assert (
        http.get("/v1/schedules/nightly/next", params={"count": 51}, headers=headers).status_code
        == 422
    )

    paused = http.post("/v1/schedules/nightly/pause", headers=headers).json()
    assert paused["paused"] is True and paused["next_occurrence"] is None
    resumed = http.post("/v1/schedules/nightly/resume", headers=headers).json()
    assert resumed["paused"] is False and resumed["next_occurrence"] is not None
    deleted = http.delete("/v1/schedules/nightly", headers=headers)
    assert deleted.json() == {"schedule_id": "nightly", "deleted": True}
    gone = http.get("/v1/schedules/nightly", headers=headers)
    assert gone.status_code == 404 and gone.json()["error"]["code"] == "WORKLOAD_NOT_FOUND"


def test_a_bad_schedule_is_refused_naming_the_field(server: Server, http: httpx.Client, app):
    headers = server.headers(app, **MANAGER)
    cases = [
        ({"schedule_id": "x", "cron": "61 * * * *", "template": TEMPLATE}, "cron"),
        ({"schedule_id": "x", "interval_s": 60, "template": {"input": 1}},
         "template.definition_id"),
        ({"schedule_id": "x", "interval_s": 60, "template": {**TEMPLATE, "not_before": 1}},
         "template.not_before"),
        ({"schedule_id": "x", "cron": "0 * * * *", "timezone": "Nowhere/Land",
          "template": TEMPLATE}, "timezone"),
    ]  # fmt: skip
    for body, field in cases:
        refused = http.post("/v1/schedules", json=body, headers=headers)
        assert refused.status_code == 422, refused.text
        assert field in refused.json()["error"]["details"]["fields"], refused.text
    assert http.get("/v1/schedules", headers=headers).json()["items"] == []


def test_only_an_unconstrained_schedule_manager_may(server: Server, http: httpx.Client, app):
    body = {"schedule_id": "x", "interval_s": 60, "template": TEMPLATE}
    reader = server.headers(app, subject=Subject.human("r"), capabilities=[READ, SUBMIT])
    refused = http.post("/v1/schedules", json=body, headers=reader)
    assert (
        refused.status_code == 403 and refused.json()["error"]["details"]["missing"] == "capability"
    )
    assert http.get("/v1/schedules", headers=reader).status_code == 403
    # Managing without submitting: may list, may not create (its occurrences are submissions).
    manager = server.headers(app, subject=Subject.human("m"), capabilities=[SCHEDULE])
    assert http.get("/v1/schedules", headers=manager).status_code == 200
    assert http.post("/v1/schedules", json=body, headers=manager).status_code == 403
    # Another application's manager sees none of this one's schedules.
    owner = server.headers(app, **MANAGER)
    assert http.post("/v1/schedules", json=body, headers=owner).status_code == 201
    other = server.headers(f"{app}-other", **MANAGER)
    assert http.get("/v1/schedules", headers=other).json()["items"] == []
    assert http.get("/v1/schedules/x", headers=other).status_code == 404


def test_the_servers_scheduler_admits_each_occurrence(server: Server, http: httpx.Client, app):
    headers = server.headers(app, **MANAGER)
    body = {"schedule_id": "every-second", "interval_s": 1, "catch_up": "all",
            "template": TEMPLATE}  # fmt: skip
    assert http.post("/v1/schedules", json=body, headers=headers).status_code == 201
    deadline = time.monotonic() + 30
    work: list[dict] = []
    while time.monotonic() < deadline and len(work) < 3:
        time.sleep(0.2)
        items = http.get("/v1/workloads", headers=headers).json()["items"]
        work = [w for w in items if w["definition_id"] == "report"]
    assert len(work) >= 3, work
    http.post("/v1/schedules/every-second/pause", headers=headers)
    state = http.get("/v1/schedules/every-second", headers=headers).json()
    items = http.get("/v1/workloads", headers=headers, params={"limit": 500}).json()["items"]
    ids = [w["workload_id"] for w in items if w["definition_id"] == "report"]
    # A pass that read the schedule before the pause committed may have admitted one more
    # batch, which it could not count (its advance lost to the pause): never fewer.
    assert state["paused"] and 3 <= state["admitted"] <= len(ids)
    admitted = [http.get(f"/v1/workloads/{i}", headers=headers).json() for i in ids]
    keys = [w["idempotency_key"] for w in admitted]
    assert len(set(keys)) == len(keys)  # one workload per occurrence
    instants = sorted(int(key.removeprefix("schedule:every-second@")) for key in keys)
    assert instants == list(range(instants[0], instants[0] + len(instants)))  # none missed
    assert {w["trigger"] for w in admitted} == {"schedule:every-second"}
    assert {w["next_attempt_at"] for w in admitted} == set(instants)  # not_before
    assert all(w["requested_by"] == {"kind": "human", "id": "ops"} for w in admitted)
