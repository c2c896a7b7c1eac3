"""``feltdb workers`` through a real ``feltdb`` subprocess on a store file: a table that
fits 80 columns, a stale worker said in words, and ``--json``.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from support.factories import CAPABILITIES, make_request
from test_newcomer import default_snapshot, feltdb

from feltdb import WorkloadStore


def test_workers_fit_80_columns_and_say_which_is_stale(tmp_path: Path) -> None:
    db = str(tmp_path / "w.db")
    now = int(time.time())
    with WorkloadStore.open(db) as store:
        ids = [
            store.create(
                make_request(
                    tenant_id="default", application_id="default", idempotency_key=f"k{n}",
                    authorization_snapshot=default_snapshot(), definition_id="send-newsletter",
                )
            ).workload_id
            for n in range(3)
        ]  # fmt: skip
        claim = store.claim(ids[0], "worker:fresh", CAPABILITIES, now=now)
        store.start(ids[0], claim.claim_id, "worker:fresh", claim.fencing_token, now=now)
        store.complete(
            ids[0], claim.claim_id, "worker:fresh", claim.fencing_token, "r", {}, now=now
        )
        store.claim(ids[1], "worker:fresh", CAPABILITIES, now=now)
        store.claim(ids[2], "worker:lost", CAPABILITIES, now=now - 900, lease_ms=30_000)

    shown = feltdb("workers", "--db", db, columns=80)
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert all(len(line) <= 80 for line in lines), "\n".join(lines)
    fresh = next(line for line in lines if "worker:fresh" in line)
    lost = next(line for line in lines if "worker:lost" in line)
    assert "STALE" not in fresh and "0.1" in fresh  # one completion in 10 minutes
    assert "STALE" in lost and "15m ago" in lost
    assert "send-newsletter" in shown.stdout

    answer = feltdb("workers", "--db", db, "--json")
    assert answer.returncode == 0, answer.stderr
    seen = json.loads(answer.stdout)
    by_id = {w["worker_id"]: w for w in seen["workers"]}
    assert by_id["worker:lost"]["stale"] and not by_id["worker:fresh"]["stale"]
    assert by_id["worker:fresh"]["completed"] == 1 and by_id["worker:fresh"]["lease_count"] == 1
