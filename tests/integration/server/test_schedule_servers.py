"""Two real ``feltdb serve`` processes on one store (a SQLite file, or one PostgreSQL
database), each running the scheduler in its maintenance every 0.2 s: every occurrence of
an every-second schedule is admitted once, and none is missed."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from support.server import Server, serve_several

from feltdb import Subject, WorkloadStore
from feltdb.auth.capabilities import READ, SCHEDULE, SUBMIT

pytestmark = pytest.mark.multiprocess

MANAGER = {"subject": Subject.human("ops"), "capabilities": [SCHEDULE, SUBMIT, READ]}
APP = "sched"


@pytest.fixture
def servers(new_target: Callable[..., str], backend: str, tmp_path: Path) -> Iterator[list[Server]]:
    """Two servers on one new store, sharing one keyring, maintaining every 0.2 s."""
    target, interval = new_target("shared"), ("--maintenance-interval", "0.2")
    yield from serve_several(tmp_path, target, backend, ("one", "two"), *interval)


def test_two_servers_admit_each_occurrence_once(servers: list[Server]) -> None:
    one, two = servers
    body = {"schedule_id": "tick", "interval_s": 1, "catch_up": "all",
            "template": {"definition_id": "tick", "input": None}}  # fmt: skip
    with httpx.Client(base_url=one.url, timeout=15) as http:
        made = http.post("/v1/schedules", json=body, headers=one.headers(APP, **MANAGER))
        assert made.status_code == 201, made.text
    deadline = time.monotonic() + 30
    with WorkloadStore.open(one.target) as store:
        while len(store.list("t", APP)) < 5:
            assert time.monotonic() < deadline, "the servers admitted too little"
            time.sleep(0.2)
    with httpx.Client(base_url=two.url, timeout=15) as http:
        paused = http.post("/v1/schedules/tick/pause", headers=two.headers(APP, **MANAGER))
        assert paused.status_code == 200, paused.text
    time.sleep(1)  # a pass that read the schedule before the pause ends meanwhile
    with WorkloadStore.open(one.target) as store:
        entries, _ = store.audit.after("t", APP, 0, 10_000)
        work = store.list("t", APP)  # read after the log: it holds every admission logged
    instants = sorted(w.next_attempt_at for w in work)
    assert instants == list(range(made.json()["created_at"] + 1, instants[-1] + 1))
    # One admission committed per workload, and each occurrence advanced past once.
    admissions = Counter(
        e.audit["work_id"] for e in entries if e.audit["kind"] == "workload.created"
    )
    assert set(admissions.values()) == {1}
    assert set(admissions) <= {w.workload_id for w in work} and len(admissions) >= 5
    advanced = Counter(
        instant
        for e in entries
        if e.audit["kind"] == "schedule.occurred"
        for instant in e.audit["occurrences"]
    )
    assert set(advanced.values()) == {1}
    assert set(advanced) <= set(instants)
