"""Retention: finished work past its age is pruned in bounded, guarded, audited commits,
and the audit chain still verifies (and still names a row deleted behind its back).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from support.factories import CAPABILITIES, SIGNER, make_grant, make_request
from support.finished import finish_many, finish_one

from feltdb import (
    ResourceScope,
    ResourceScopeKind,
    Subject,
    WorkloadDependency,
    WorkloadError,
    WorkloadState,
    WorkloadStore,
)
from feltdb.auth.scope import Scope
from feltdb.limits import MAX_PLANS_PER_BATCH
from feltdb.records.workload import DURABLE_WORK_COLLECTION as WORK
from feltdb.storage.base import Mutation, Precondition
from feltdb.work.pruning import MAX_PRUNE_BATCH, PRUNED, delete_due
from feltdb.work.retention import DAY, RetentionPolicy, parse_policy

FINISHED_AT = 100
"""When the helpers below finish their work (unix seconds)."""


def succeeded(store: WorkloadStore, key: str, *, at: int = FINISHED_AT, **fields: object) -> str:
    """Admit work under idempotency key ``key`` and run it to success at ``at``."""
    return finish_one(store, key, at, **fields)


def dead_lettered(store: WorkloadStore, key: str, *, at: int = FINISHED_AT) -> str:
    """Admit work and fail it with a kind the policy does not retry: a dead letter."""
    workload = store.create(make_request(idempotency_key=key))
    claim = store.claim(workload.workload_id, "w", CAPABILITIES, now=at)
    store.start(workload.workload_id, claim.claim_id, "w", claim.fencing_token, now=at)
    state = store.fail(
        workload.workload_id, claim.claim_id, "w", claim.fencing_token, "validation", "bad",
        now=at, effect="none",
    )  # fmt: skip
    assert state is WorkloadState.DEAD_LETTER
    return workload.workload_id


def cancelled(store: WorkloadStore, key: str, *, at: int = FINISHED_AT) -> str:
    workload = store.create(make_request(idempotency_key=key))
    store.cancel(workload.workload_id, "ops", now=at)
    return workload.workload_id


def exists(store: WorkloadStore, workload_id: str) -> bool:
    return store.db.get_row(WORK, workload_id) is not None


def prune_entries(store: WorkloadStore) -> list[dict[str, object]]:
    """The audit records of every prune commit in the log, oldest first."""
    return [
        entry.audit
        for entry in store.db.committed_transactions_after(0)
        if entry.audit is not None and entry.audit.get("kind") == PRUNED
    ]


def test_finished_work_past_its_age_is_pruned_and_the_chain_still_verifies(store):
    done = succeeded(store, "done")
    gone = cancelled(store, "gone")
    young = succeeded(store, "young", at=FINISHED_AT + 20 * DAY)
    waiting = store.create(make_request(idempotency_key="waiting")).workload_id
    dead = dead_lettered(store, "dead")
    store.audit.seal()

    report = store.retention.prune("ops", now=FINISHED_AT + 31 * DAY)

    assert sorted(item["work_id"] for item in report.pruned) == sorted([done, gone])
    assert (report.changed, report.dry_run, report.more) == (0, False, False)
    assert not exists(store, done) and not exists(store, gone)
    assert all(exists(store, kept) for kept in (young, waiting, dead))  # DEAD_LETTER: 90 days
    with pytest.raises(WorkloadError) as missing:
        store.get(done)
    assert missing.value.code == "WORKLOAD_NOT_FOUND"
    (entry,) = prune_entries(store)
    assert entry["actor"] == "ops" and (entry["tenant"], entry["application"]) == ("t", "app")
    named = {item["work_id"]: item for item in entry["pruned"]}
    assert set(named) == {done, gone}
    assert named[done]["state"] == "SUCCEEDED" and named[done]["version"] >= 3
    verified = store.audit.verify()
    assert verified.ok, verified.problem

    later = store.retention.prune("ops", now=FINISHED_AT + 91 * DAY)
    assert sorted(item["work_id"] for item in later.pruned) == sorted([dead, young])
    assert store.audit.verify().ok


def test_a_row_deleted_outside_a_prune_is_still_named_missing(store, store_target):
    pruned = succeeded(store, "pruned")
    victim = succeeded(store, "victim", at=FINISHED_AT + 60 * DAY)
    store.retention.prune("ops", now=FINISHED_AT + 31 * DAY)
    assert not exists(store, pruned) and store.audit.verify().ok
    written = store.db.get_row(WORK, victim)
    assert written is not None
    # Deleted as a tamperer would: a commit that logs no deletion of it (its own key only).
    _delete_unlogged(store_target, victim)

    problem = store.audit.verify().problem
    assert problem is not None
    assert (problem.kind, problem.address) == ("row_missing", f"{WORK}/{victim}")
    assert problem.revision == written.revision


def _delete_unlogged(target: str, key: str) -> None:
    if target.startswith("postgresql"):
        import psycopg

        with psycopg.connect(target, autocommit=True) as connection:
            connection.execute("DELETE FROM rows WHERE collection = %s AND key = %s", (WORK, key))
        return
    import sqlite3

    connection = sqlite3.connect(target, isolation_level=None)
    try:
        connection.execute("DELETE FROM rows WHERE collection = ? AND key = ?", (WORK, key))
    finally:
        connection.close()


def test_a_pass_deletes_at_most_its_limit_and_says_more_may_be_due(store):
    ids = [succeeded(store, f"k{number}") for number in range(5)]
    now = FINISHED_AT + 31 * DAY

    first = store.retention.prune("ops", now=now, limit=3)
    assert (len(first.pruned), first.more) == (3, True)
    second = store.retention.prune("ops", now=now, limit=3)
    assert (len(second.pruned), second.more) == (2, False)
    assert sorted(item["work_id"] for item in [*first.pruned, *second.pruned]) == sorted(ids)
    assert [len(entry["pruned"]) for entry in prune_entries(store)] == [3, 2]
    for limit in (0, 5001):
        with pytest.raises(WorkloadError) as refused:
            store.retention.prune("ops", now=now, limit=limit)
        assert refused.value.code == "WORKLOAD_INVALID"


def test_a_pass_larger_than_a_batch_of_keys_prunes_its_whole_limit(store):
    # The candidates are read a batch of keys at a time (get_rows reads 1,024 at most).
    ids = finish_many(store, MAX_PLANS_PER_BATCH + 100, FINISHED_AT)
    report = store.retention.prune("ops", now=FINISHED_AT + 31 * DAY, limit=MAX_PRUNE_BATCH)
    assert sorted(item["work_id"] for item in report.pruned) == sorted(ids)
    assert not report.more


def test_a_dry_run_names_what_would_go_and_deletes_nothing(store):
    done = succeeded(store, "done")
    revision = store.db.current_revision()

    report = store.retention.prune("ops", now=FINISHED_AT + 31 * DAY, dry_run=True)

    assert [item["work_id"] for item in report.pruned] == [done] and report.dry_run
    assert exists(store, done) and store.db.current_revision() == revision
    assert [item.workload_id for item in store.retention.due(now=FINISHED_AT + 31 * DAY)] == [done]


def test_ages_are_set_per_state_and_per_definition(store):
    send = succeeded(store, "send")
    report = succeeded(store, "report", definition_id="report")
    policy = parse_policy(["SUCCEEDED=10d", "report:SUCCEEDED=1d", "DEAD_LETTER=never"])
    assert policy.age_for("report", WorkloadState.SUCCEEDED) == DAY
    assert policy.age_for("send", WorkloadState.DEAD_LETTER) is None

    early = store.retention.prune("ops", policy, now=FINISHED_AT + 2 * DAY)
    assert [item["work_id"] for item in early.pruned] == [report]
    late = store.retention.prune("ops", policy, now=FINISHED_AT + 11 * DAY)
    assert [item["work_id"] for item in late.pruned] == [send]


def test_one_definition_alone_is_pruned_when_asked(store):
    send = succeeded(store, "send")
    report = succeeded(store, "report", definition_id="report")

    pruned = store.retention.prune(
        "ops", RetentionPolicy().only("report"), now=FINISHED_AT + 31 * DAY
    )

    assert [item["work_id"] for item in pruned.pruned] == [report] and exists(store, send)


def test_work_changed_after_it_was_read_is_left(store):
    dead = dead_lettered(store, "dead")
    done = succeeded(store, "done")
    now = FINISHED_AT + 91 * DAY
    found = store.retention.due(now=now)
    assert {item.workload_id for item in found} == {dead, done}
    store.retry(dead, "ops", now=now)  # an operator re-arms it between the read and the delete

    deleted = delete_due(store.db, found, "ops", now)

    assert deleted == {done}
    assert store.get(dead).state is not WorkloadState.DEAD_LETTER
    assert store.audit.verify().ok


def test_an_idempotency_key_used_again_after_pruning_admits_new_work(store):
    done = succeeded(store, "once")
    store.retention.prune("ops", now=FINISHED_AT + 31 * DAY)

    again, created = store.admit(make_request(idempotency_key="once"))

    assert created and again.workload_id == done  # the id is the key's: the same, anew
    assert again.state is not WorkloadState.SUCCEEDED and again.result is None
    assert store.db.get_row(WORK, done).version == 1  # type: ignore[union-attr]
    assert store.audit.verify().ok


def test_the_archive_holds_each_pruned_workload_before_it_is_deleted(store, tmp_path: Path):
    ids = sorted([succeeded(store, "a"), cancelled(store, "b")])
    archive = tmp_path / "pruned.jsonl"
    archive.write_text('{"earlier": true}\n')

    store.retention.prune("ops", now=FINISHED_AT + 31 * DAY, archive=archive)

    lines = [json.loads(line) for line in archive.read_text().splitlines()]
    assert lines[0] == {"earlier": True}  # appended to, never truncated
    assert sorted(line["workload"]["workload_id"] for line in lines[1:]) == ids
    assert all(line["archived_at"] == FINISHED_AT + 31 * DAY for line in lines[1:])
    assert {line["workload"]["state"] for line in lines[1:]} == {"SUCCEEDED", "CANCELLED"}


def test_an_archive_that_cannot_be_written_deletes_nothing(store, tmp_path: Path):
    done = succeeded(store, "done")
    with pytest.raises(WorkloadError) as refused:
        store.retention.prune("ops", now=FINISHED_AT + 31 * DAY, archive=tmp_path / "no" / "x")
    assert refused.value.code == "WORKLOAD_STORAGE_FAILURE"
    assert exists(store, done)


def test_a_scope_prunes_only_its_own_application(store):
    mine = succeeded(store, "mine")
    grant = SIGNER.sign(
        make_grant(
            subject=Subject.agent("a1"),
            application_id="other",
            resources=[
                ResourceScope(kind=ResourceScopeKind.WORKLOAD, uri="flow://other/workloads/*")
            ],
        )
    )
    theirs = succeeded(store, "theirs", application_id="other", authorization_snapshot=grant)

    report = store.retention.prune("ops", now=FINISHED_AT + 31 * DAY, scope=Scope("t", "other"))

    assert [item["work_id"] for item in report.pruned] == [theirs] and exists(store, mine)
    (entry,) = prune_entries(store)
    assert entry["application"] == "other"


def test_work_depending_on_pruned_work_is_never_claimable(store):
    # Documented: a dependency pruned reads as absent, as work never admitted.
    first = succeeded(store, "first")
    dependency = WorkloadDependency(workload_id=first, required_state=WorkloadState.SUCCEEDED)
    dependent = store.create(make_request(idempotency_key="then", dependencies=[dependency]))
    store.retention.prune("ops", now=FINISHED_AT + 31 * DAY)

    assert not exists(store, first)
    assert store.claim_next("t", "app", "w", CAPABILITIES, now=FINISHED_AT + 31 * DAY) is None
    assert store.get(dependent.workload_id).state is WorkloadState.READY


def test_two_writers_pruning_at_once_delete_each_workload_once(
    store, open_store: Callable[..., WorkloadStore]
):
    ids = {succeeded(store, f"k{number}") for number in range(40)}
    writers = [open_store(), open_store()]
    reports: list[list[str]] = [[], []]
    barrier = threading.Barrier(2)

    def run(place: int) -> None:
        barrier.wait(timeout=30)
        while True:
            done = writers[place].retention.prune("ops", now=FINISHED_AT + 31 * DAY, limit=7)
            reports[place] += [item["work_id"] for item in done.pruned]
            if not done.more:
                return

    threads = [threading.Thread(target=run, args=(place,)) for place in (0, 1)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
        assert not thread.is_alive()
    assert sorted(reports[0] + reports[1]) == sorted(ids)  # each once, by one of them
    logged = [item["work_id"] for entry in prune_entries(store) for item in entry["pruned"]]
    assert sorted(logged) == sorted(ids)
    assert not any(exists(store, workload_id) for workload_id in ids)
    assert store.audit.verify().ok


def test_a_policy_is_refused_item_by_item():
    for item in ("SUCCEEDED", "RUNNING=1d", "SUCCEEDED=ten", "SUCCEEDED=1w", ":SUCCEEDED=1d"):
        with pytest.raises(WorkloadError) as refused:
            parse_policy([item])
        assert refused.value.code == "WORKLOAD_INVALID", item
    assert parse_policy(["finished=7d"]).describe()["ages"] == dict.fromkeys(
        ("SUCCEEDED", "CANCELLED", "REJECTED", "DEAD_LETTER"), "7d"
    )


def test_a_guarded_delete_of_pruned_work_conflicts(store):
    # What a second writer's late delete meets: the row is gone, its guard fails.
    done = succeeded(store, "done")
    version = store.db.get_row(WORK, done).version  # type: ignore[union-attr]
    store.retention.prune("ops", now=FINISHED_AT + 31 * DAY)
    with pytest.raises(WorkloadError) as conflict:
        store.db.commit(
            "late",
            [Mutation(WORK, done, None)],
            [Precondition(WORK, done, expected_version=version)],
        )
    assert conflict.value.code == "WORKLOAD_CONFLICT"
