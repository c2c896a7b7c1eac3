"""``feltdb prune`` through a real ``feltdb`` process (on a store file, and against a real
server), ``POST /v1/retention/prune``, and ``feltdb serve --retain`` pruning in its
maintenance loop.
"""

from __future__ import annotations

import json
import re
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import msgspec
import pytest
from support.factories import SIGNER, make_request
from support.finished import finish_one
from support.server import Server, serve
from test_newcomer import default_snapshot, feltdb

from feltdb import ResourceScope, ResourceScopeKind, Subject, WorkloadStore
from feltdb.auth.capabilities import OPERATE, READ
from feltdb.records.workload import DURABLE_WORK_COLLECTION as WORK
from feltdb.work.pruning import PRUNED
from feltdb.work.retention import DAY


def in_default() -> dict[str, object]:
    """The fields of a request in tenant and application ``default`` (where ``--db`` acts)."""
    return {
        "tenant_id": "default", "application_id": "default",
        "authorization_snapshot": default_snapshot(),
    }  # fmt: skip


def test_prune_on_a_store_file_lists_archives_and_deletes_in_passes(tmp_path: Path) -> None:
    db = str(tmp_path / "w.db")
    old = int(time.time()) - 31 * DAY
    with WorkloadStore.open(db) as store:
        ids = sorted(finish_one(store, f"k{n}", old, **in_default()) for n in range(3))
        young = finish_one(store, "young", int(time.time()), **in_default())

    listed = feltdb("prune", "--db", db, "--dry-run", columns=80)
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    assert all(len(line) <= 80 for line in lines), listed.stdout
    assert sorted(re.findall(r"workload_[0-9a-f]{24}", listed.stdout)) == ids
    assert lines[-1] == "would prune 3 finished workloads"

    archive = tmp_path / "pruned.jsonl"
    pruned = feltdb("prune", "--db", db, "--limit", "2", "--archive", str(archive), columns=80)
    assert pruned.returncode == 0, pruned.stderr
    # Then the pages the deletions freed, given back to the file system (a new store file
    # returns them: auto_vacuum INCREMENTAL).
    first, returned = pruned.stdout.strip().splitlines()
    assert first == "pruned 3 finished workloads"
    assert re.fullmatch(r"returned [1-9][0-9]* KB of free space to the file system", returned)
    assert "pass 1: pruned 2 (2 in all)" in pruned.stderr
    assert "pass 2: pruned 1 (3 in all)" in pruned.stderr
    kept = [
        json.loads(line)["workload"]["workload_id"] for line in archive.read_text().splitlines()
    ]
    assert sorted(kept) == ids
    with WorkloadStore.open(db) as store:
        assert store.db.get_rows(WORK, [*ids, young]).keys() == {young}
    verified = feltdb("audit", "verify", "--db", db)
    assert verified.returncode == 0, verified.stdout + verified.stderr


def test_a_bad_age_is_refused_and_changes_nothing(tmp_path: Path) -> None:
    db = str(tmp_path / "w.db")
    with WorkloadStore.open(db) as store:
        done = finish_one(store, "k", int(time.time()) - 31 * DAY, **in_default())
    refused = feltdb("prune", "--db", db, "--older-than", "a week")
    assert refused.returncode == 1
    assert "WORKLOAD_INVALID" in refused.stderr and "'a week' is not an age" in refused.stderr
    with WorkloadStore.open(db) as store:
        assert store.db.get_row(WORK, done) is not None


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    yield from serve(tmp_path_factory.mktemp("prune-server"))


def finished_in(target: str, application: str, count: int, at: int) -> list[str]:
    """``count`` workloads of tenant ``t``'s ``application`` run to success at ``at`` in
    the store at ``target`` (a server's, behind its back)."""
    everything = ResourceScope(
        kind=ResourceScopeKind.WORKLOAD, uri=f"flow://{application}/workloads/*"
    )
    grant = msgspec.structs.replace(
        make_request().authorization_snapshot.grant,
        **{"application_id": application, "resources": (everything,)},
    )
    snapshot = SIGNER.sign(grant)
    with WorkloadStore.open(target) as store:
        return [
            finish_one(
                store, f"k{n}", at, application_id=application, authorization_snapshot=snapshot
            )
            for n in range(count)
        ]


def test_prune_over_http_needs_operate_and_prunes_only_the_application(server: Server) -> None:
    application, other = f"app-{uuid.uuid4().hex[:8]}", f"app-{uuid.uuid4().hex[:8]}"
    old = int(time.time()) - 31 * DAY
    ids = finished_in(server.target, application, 3, old)
    theirs = finished_in(server.target, other, 1, old)
    url = f"{server.url}/v1/retention/prune"
    reader = server.headers(application, subject=Subject.human("ada"), capabilities=[READ])
    operator = server.headers(application, subject=Subject.human("ada"), capabilities=[OPERATE])

    refused = httpx.post(url, headers=reader, json={"dry_run": True})
    assert refused.status_code == 403, refused.text
    assert refused.json()["error"]["code"] == "WORKLOAD_UNAUTHORIZED"
    bad = httpx.post(url, headers=operator, json={"limit": 0})
    assert bad.status_code == 422, bad.text

    listed = httpx.post(url, headers=operator, json={"dry_run": True})
    assert listed.status_code == 200, listed.text
    assert sorted(item["work_id"] for item in listed.json()["pruned"]) == sorted(ids)
    assert listed.json()["dry_run"] is True

    token = server.token(application, subject=Subject.human("ada"), capabilities=[OPERATE])
    pruned = feltdb("prune", "--url", server.url, "--token", token, "--json", columns=80)
    assert pruned.returncode == 0, pruned.stderr
    answer = json.loads(pruned.stdout)
    reclaimed = answer.pop("reclaimed_bytes")  # the server's store file gave pages back
    assert answer == {"pruned": 3, "changed": 0}
    assert reclaimed > 0 and reclaimed % 4096 == 0
    with WorkloadStore.open(server.target) as store:
        assert store.db.get_rows(WORK, [*ids, *theirs]).keys() == set(theirs)
        (entry,) = [
            transaction.audit
            for transaction in store.db.committed_transactions_after(0)
            if transaction.audit is not None and transaction.audit.get("kind") == PRUNED
        ]
        assert entry["actor"] == "human:ada" and entry["application"] == application
        assert store.audit.verify().ok

    archived = feltdb("prune", "--url", server.url, "--token", token, "--archive", "x.jsonl")
    assert archived.returncode == 1 and "--db" in archived.stderr


def test_serve_with_retain_prunes_in_its_maintenance_loop(tmp_path: Path) -> None:
    application = "pruned-by-the-loop"
    old = int(time.time()) - 2 * DAY
    home = tmp_path / "home"
    home.mkdir()
    ids = finished_in(str(home / "work.db"), application, 2, old)
    young = finished_in(str(home / "work.db"), "young-app", 1, int(time.time()))
    servers = serve(home, None, "--retain", "SUCCEEDED=1d", "--maintenance-interval", "0.2")
    started = next(servers)
    try:
        assert "retention: finished work pruned past SUCCEEDED 1d" in started.log.read_text()
        deadline = time.monotonic() + 30
        with WorkloadStore.open(started.target) as store:
            while store.db.get_rows(WORK, ids) and time.monotonic() < deadline:
                time.sleep(0.1)
            assert store.db.get_rows(WORK, [*ids, *young]).keys() == set(young)
    finally:
        servers.close()
