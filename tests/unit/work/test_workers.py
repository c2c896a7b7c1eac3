"""The workers view, read from a real store's claims and log: each worker's leases, its
completions and failures, and whether it is stale.
"""

from __future__ import annotations

import time

from support.factories import CAPABILITIES, make_request

from feltdb import WorkloadStore
from feltdb.auth.scope import Scope
from feltdb.records.workers import RATE_MINUTES, STALE_AFTER_SECONDS, WorkersSeen
from feltdb.work.workers import workers_seen

SCOPE = Scope("t", "app")


def submitted(store: WorkloadStore, n: int, definition: str = "send") -> str:
    request = make_request(idempotency_key=f"k{n}", definition_id=definition)
    return store.create(request).workload_id


def test_two_workers_one_stale_by_an_expired_lease_and_completions_counted(store):
    now = int(time.time())  # the log's entries are stamped with the real clock
    done, held, lost = (submitted(store, n, d) for n, d in ((1, "send"), (2, "send"), (3, "bill")))
    for workload_id in (done, held):
        claim = store.claim(workload_id, "service:w1", CAPABILITIES, now=now - 5)
        if workload_id == done:
            store.start(done, claim.claim_id, "service:w1", claim.fencing_token, now=now)
            store.complete(
                done, claim.claim_id, "service:w1", claim.fencing_token, "r1", {}, now=now
            )
        else:
            store.heartbeat(held, claim.claim_id, "service:w1", claim.fencing_token, now=now)
    # Claimed long ago with a short lease, never renewed: the lease has expired.
    store.claim(lost, "service:w2", CAPABILITIES, now=now - 600, lease_ms=30_000)

    seen = workers_seen(store.db, SCOPE, now)

    assert seen.complete and seen.counted and seen.minutes == RATE_MINUTES
    first, second = seen.workers
    assert first.worker_id == "service:w1" and not first.stale and first.stale_reason is None
    assert first.definitions == ["send"] and first.lease_count == 1
    assert [lease.workload_id for lease in first.leases] == [held]
    assert first.last_heartbeat == now and first.leases[0].expires_at > now
    assert first.completed == 1 and first.failed == 0
    assert first.completed_per_minute == round(1 / RATE_MINUTES, 2)
    assert second.worker_id == "service:w2" and second.stale
    assert second.stale_reason == "1 lease expired" and second.definitions == ["bill"]
    assert second.last_heartbeat == now - 600 and second.completed == 0
    assert WorkersSeen.parse(seen.to_json()) == seen  # what the API answers reads back


def test_a_worker_silent_too_long_is_stale_and_a_narrowed_reader_sees_only_its_work(store):
    now = int(time.time())
    quiet = submitted(store, 1, "send")
    store.claim(quiet, "service:w1", CAPABILITIES, now=now - STALE_AFTER_SECONDS - 1,
                lease_ms=3_600_000)  # fmt: skip
    other = submitted(store, 2, "bill")
    store.claim(other, "service:w2", CAPABILITIES, now=now)

    (only,) = workers_seen(
        store.db, Scope("t", "app", definitions=frozenset({"send"})), now
    ).workers
    assert only.worker_id == "service:w1" and only.stale
    assert only.stale_reason == f"no heartbeat for over {STALE_AFTER_SECONDS} s"
    narrowed = workers_seen(store.db, Scope("t", "app", definitions=frozenset({"send"})), now)
    assert not narrowed.counted  # the log's records do not say the definition
