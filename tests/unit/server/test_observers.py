"""The server's commit observers: metrics count what the store commits, and long-polls wake
for commits that may have made work claimable (issue 11, point 5)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from prometheus_client.parser import text_string_to_metric_families
from support.factories import CAPABILITIES, make_request

from feltdb import WorkloadStore
from feltdb.server.metrics import Metrics
from feltdb.server.wakeup import Wakeup, may_unblock
from feltdb.work.changes import Operation, WorkloadChange


@pytest.fixture
def store(tmp_path) -> Iterator[WorkloadStore]:
    with WorkloadStore.open(tmp_path / "work.db") as opened:
        yield opened


def counted(metrics: Metrics) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(metrics.render()[0].decode())
        for sample in family.samples
        if sample.name.endswith("_total")
    }


def test_metrics_count_commits_and_nothing_a_replay_answers(store):
    metrics = Metrics()
    store.observe(metrics.observe)
    w = store.create(make_request(idempotency_key="a"))
    store.admit(make_request(idempotency_key="a"))  # a replay commits nothing
    claim = store.claim(w.workload_id, "w1", CAPABILITIES, now=100)
    store.start(w.workload_id, claim.claim_id, "w1", claim.fencing_token, now=100)
    for _ in range(2):  # the same report twice: a lost answer, replayed
        store.complete(w.workload_id, claim.claim_id, "w1", claim.fencing_token, "r1", {}, now=101)
    failing = store.create(make_request(idempotency_key="b", retry_policy={"retry_on": []}))
    claim = store.claim(failing.workload_id, "w1", CAPABILITIES, now=100)
    store.fail(failing.workload_id, claim.claim_id, "w1", claim.fencing_token, "permanent",
               "bounced", now=101)  # fmt: skip

    totals = counted(metrics)
    assert totals[("feltdb_admissions_total", frozenset())] == 2
    assert totals[("feltdb_claims_total", frozenset())] == 2
    assert totals[("feltdb_completions_total", frozenset())] == 1
    assert totals[("feltdb_failures_total", frozenset({("kind", "permanent")}))] == 1
    assert totals[("feltdb_dead_letters_total", frozenset())] == 1


def test_dead_letters_are_counted_from_any_path_without_reading_work_again(store):
    metrics = Metrics()
    store.observe(metrics.observe)
    spent = store.create(make_request(idempotency_key="spent", retry_policy={"max_attempts": 1}))
    store.claim(spent.workload_id, "w1", CAPABILITIES, now=100, lease_ms=1000)
    store.create(make_request(idempotency_key="late", timeouts={"queue_ms": 1000}))

    assert store.enforce_deadlines(200) and store.recover_expired(200) == [spent.workload_id]

    totals = counted(metrics)
    assert totals[("feltdb_timeouts_total", frozenset())] == 1
    assert totals[("feltdb_recoveries_total", frozenset())] == 1
    # The spent budget's recovery dead-letters it; the late one's policy decides its own:
    # each commit into DEAD_LETTER is counted once, whatever the path.
    dead = [w for w in store.list("t", "app") if w.state == "DEAD_LETTER"]
    assert spent.workload_id in {w.workload_id for w in dead}
    assert totals[("feltdb_dead_letters_total", frozenset())] == len(dead)


def test_only_commits_that_may_unblock_work_wake_long_polls(store):
    changes: list[WorkloadChange] = []
    store.observe(changes.append)
    w = store.create(make_request(idempotency_key="a"))
    claim = store.claim(w.workload_id, "w1", CAPABILITIES, now=100)
    store.start(w.workload_id, claim.claim_id, "w1", claim.fencing_token, now=100)
    store.heartbeat(w.workload_id, claim.claim_id, "w1", claim.fencing_token, now=101)
    store.complete(w.workload_id, claim.claim_id, "w1", claim.fencing_token, "r1", {}, now=102)

    woken = {change.operation: may_unblock(change) for change in changes}
    assert woken == {
        Operation.ADMIT: True,  # READY: claimable
        Operation.CLAIM: False,
        Operation.START: False,
        Operation.HEARTBEAT: False,
        Operation.COMPLETE: True,  # SUCCEEDED: its dependents may be claimable
    }


def test_any_end_a_dependent_may_require_wakes_long_polls(store):
    changes: list[WorkloadChange] = []
    store.observe(changes.append)
    w = store.create(make_request(idempotency_key="b", retry_policy={"max_attempts": 1}))
    claim = store.claim(w.workload_id, "w1", CAPABILITIES, now=100)
    store.fail(w.workload_id, claim.claim_id, "w1", claim.fencing_token, "fatal", "x", now=101)
    other = store.create(make_request(idempotency_key="c"))
    store.cancel(other.workload_id, "human:op", now=102)
    woken = [(change.operation, may_unblock(change)) for change in changes]
    assert woken == [
        (Operation.ADMIT, True),
        (Operation.CLAIM, False),
        (Operation.FAIL, True),  # DEAD_LETTER: a dependent may require it
        (Operation.ADMIT, True),
        (Operation.CANCEL, True),  # CANCELLED, likewise
    ]


def test_a_wakeup_without_a_loop_ignores_commits(store):
    wakeup = Wakeup()
    store.observe(wakeup.on_commit)
    signal = wakeup.signal()
    store.create(make_request(idempotency_key="a"))  # no loop bound: nobody to wake
    assert not signal.is_set()
