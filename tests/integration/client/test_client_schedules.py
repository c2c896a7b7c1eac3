"""The clients' schedule calls: the same answers and refusals through :class:`Client` and
:class:`AsyncClient` (over the server) and :class:`LocalClient` (on its store)."""

from __future__ import annotations

import itertools

import pytest
from support.client_kinds import Clients
from support.server import Server

from feltdb import Subject, WorkloadError, WorkloadStore
from feltdb.auth.capabilities import READ, SCHEDULE, SUBMIT
from feltdb.auth.scope import Scope
from feltdb.client import LocalClient, ScheduleSpec, WorkloadClient

OPS = Subject.human("ops")
TEMPLATE = {"definition_id": "report", "input": {"period": "day"}}


@pytest.fixture
def client(clients: Clients, app: str) -> WorkloadClient:
    return clients(app, subject=OPS, capabilities=[SCHEDULE, SUBMIT, READ])


def refusal(call) -> str:
    with pytest.raises(WorkloadError) as refused:
        call()
    return refused.value.code


def test_a_schedules_life_through_either_client(client: WorkloadClient):
    made = client.create_schedule(
        ScheduleSpec("nightly", TEMPLATE, cron="30 2 * * *", timezone="Europe/Berlin")
    )
    assert made["schedule_id"] == "nightly" and made["created_by"] == "human:ops"
    assert made["catch_up"] == "skip" and made["max_catch_up"] == 100
    every = client.create_schedule(
        ScheduleSpec("often", TEMPLATE, interval_s=90, catch_up="all", max_catch_up=5)
    )
    assert (every["interval_s"], every["cron"], every["timezone"]) == (90, None, None)
    assert [s["schedule_id"] for s in client.schedules()] == ["nightly", "often"]
    assert client.schedule("nightly") == made
    upcoming = client.next_occurrences("often", 3)
    assert [b - a for a, b in itertools.pairwise(upcoming)] == [90, 90]
    assert client.pause_schedule("often")["paused"] is True
    assert client.resume_schedule("often")["paused"] is False
    client.delete_schedule("often")
    assert [s["schedule_id"] for s in client.schedules()] == ["nightly"]

    assert refusal(
        lambda: client.create_schedule(ScheduleSpec("nightly", TEMPLATE, interval_s=60))
    ) == ("WORKLOAD_CONFLICT")
    assert refusal(lambda: client.schedule("often")) == "WORKLOAD_NOT_FOUND"
    assert refusal(lambda: client.delete_schedule("often")) == "WORKLOAD_NOT_FOUND"
    assert refusal(lambda: client.next_occurrences("nightly", 0)) == "WORKLOAD_INVALID"
    assert refusal(lambda: client.create_schedule(ScheduleSpec("x", TEMPLATE, cron="nope"))) == (
        "WORKLOAD_INVALID"
    )


def test_a_local_client_without_a_grant_may_not_create_one(server: Server, app: str):
    with WorkloadStore.open(server.target) as store:
        holder = LocalClient(store, Scope("t", app), OPS)
        assert refusal(
            lambda: holder.create_schedule(ScheduleSpec("x", TEMPLATE, interval_s=60))
        ) == ("WORKLOAD_UNAUTHORIZED")
        assert holder.schedules() == []


def test_an_embedded_workers_maintenance_admits_due_occurrences(tmp_path):
    from feltdb.auth.policy import application_grant
    from feltdb.auth.signing import GrantSigner

    now = [1_800_000_000]
    grant = GrantSigner("k", bytes(32)).sign(application_grant(
        OPS, "t", "app", {SUBMIT}, issued_at=0, expires_at=now[0] * 2))  # fmt: skip
    with WorkloadStore.open(tmp_path / "w.db") as store:
        scope = Scope("t", "app")
        ops = LocalClient(store, scope, OPS, grant=grant, clock=lambda: now[0])
        ops.create_schedule(ScheduleSpec("tick", TEMPLATE, interval_s=60))
        worker = LocalClient(
            store, scope, Subject.worker("w"), clock=lambda: now[0], capabilities=[],
            maintenance_interval_s=0,
        )  # fmt: skip
        assert worker.claim_next() is None
        now[0] += 60
        claim = worker.claim_next()  # its maintenance admitted the occurrence first
        assert claim is not None
        assert store.get(claim.workload_id).trigger == "schedule:tick"
