"""The audit chain: a log edited, cut, reordered or extended behind the authority's back is
found, and named by its first altered transaction, on both backends.

Each tampering test commits real work through a store, seals, then edits the database with
a raw connection of its own (sqlite3 or psycopg), as someone with access to the file or the
server would, and verifies.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest
from support.factories import CAPABILITIES, make_request

from feltdb import Completion, WorkloadError, WorkloadStore
from feltdb.errors import ErrorCode
from feltdb.server.ui.sessions import prune_expired, spend_ticket
from feltdb.storage.audit_chain import GENESIS, entry_digest, next_link, row_hash
from feltdb.storage.base import Mutation, Precondition
from feltdb.storage.index_columns import INDEX_NAMES

WORK = "system_durable_work"


@pytest.fixture
def target(new_target: Callable[..., str]) -> str:
    return new_target()


@pytest.fixture
def store(target: str) -> Iterator[WorkloadStore]:
    with WorkloadStore.open(target) as opened:
        yield opened


def drive(store: WorkloadStore, count: int = 4, *, prefix: str = "k") -> None:
    """Admit ``count`` workloads one by one and two more in a batch, run half to success."""
    for number in range(count):
        store.admit(make_request(idempotency_key=f"{prefix}{number}"))
    store.admit_many([make_request(idempotency_key=f"{prefix}b{n}") for n in range(2)])
    for number in range(count // 2):
        claim = store.claim_next("t", "app", "w1", CAPABILITIES, now=20)
        assert claim is not None
        c = claim
        store.start(c.workload_id, c.claim_id, "w1", c.fencing_token, now=20)
        result = f"r-{prefix}{number}"
        store.complete(c.workload_id, c.claim_id, "w1", c.fencing_token, result, {}, now=21)


def raw(target: str, statement: str, params: tuple[Any, ...] = ()) -> list[Any]:
    """Run one statement on the database behind the store, as a tamperer would."""
    if target.startswith("postgresql"):
        with psycopg.connect(target, autocommit=True) as connection:
            cursor = connection.execute(statement.replace("?", "%s"), params)
            return cursor.fetchall() if cursor.description else []
    connection = sqlite3.connect(target, isolation_level=None)
    try:
        return connection.execute(statement, params).fetchall()
    finally:
        connection.close()


def revisions(store: WorkloadStore) -> list[int]:
    return [entry.commit_revision for entry in store.db.committed_transactions_after(0)]


def test_an_untouched_store_verifies_and_every_entry_and_row_is_covered(
    store: WorkloadStore,
) -> None:
    drive(store)
    report = store.audit.verify()
    logged = revisions(store)
    assert report.ok and report.problem is None
    assert report.transactions == report.sealed == len(logged)
    assert report.rows == len(store.db.list_rows(WORK)) == 6
    assert report.rows_not_covered == 0
    assert report.head_revision == logged[-1]
    assert store.audit.seal() == 0  # sealing again seals nothing
    assert store.audit.verify() == report


def test_the_chain_links_each_entry_to_the_one_before_from_genesis(
    store: WorkloadStore,
) -> None:
    drive(store, 2)
    store.audit.seal()
    entries = store.db.chain_entries_after(0, 1000)
    links = store.db.chain_links_between(0, entries[-1].commit_revision, 1000)
    assert [link.commit_revision for link in links] == [e.commit_revision for e in entries]
    previous_revision, previous_link = 0, GENESIS
    for entry, link in zip(entries, links, strict=True):
        assert link.previous_revision == previous_revision
        assert link.digest == entry_digest(entry)
        assert link.link == next_link(previous_link, entry.commit_revision, link.digest)
        previous_revision, previous_link = entry.commit_revision, link.link


def test_each_entry_logs_the_hash_of_every_row_it_wrote(store: WorkloadStore) -> None:
    drive(store, 2)
    for row in store.db.rows_after("", "", 1000):
        entry = store.db.chain_entries_at([row.revision])[row.revision]
        address = f"{row.collection}/{row.key}"
        assert entry.row_hashes is not None
        place = entry.keys.index(address)
        assert entry.row_hashes[place] == row_hash(address, row.version, row.document)


def sealed_entry(store: WorkloadStore, place: int = 2) -> tuple[int, str]:
    """The revision and transaction id of a sealed entry of the middle of the log."""
    store.audit.seal()
    entry = store.db.committed_transactions_after(0)[place]
    return entry.commit_revision, entry.transaction_id


def test_an_edited_audit_record_is_named(store: WorkloadStore, target: str) -> None:
    drive(store)
    revision, transaction_id = sealed_entry(store)
    raw(
        target,
        'UPDATE transactions SET audit = replace(audit, \'"tenant":"t"\', \'"tenant":"x"\') '
        "WHERE commit_revision = ?",
        (revision,),
    )
    report = store.audit.verify()
    assert not report.ok and report.problem is not None
    assert report.problem.kind == "altered"
    assert (report.problem.revision, report.problem.transaction_id) == (revision, transaction_id)
    assert f"revision {revision}" in report.problem.message


def test_an_edited_key_list_is_named(store: WorkloadStore, target: str) -> None:
    drive(store)
    revision, _ = sealed_entry(store, 3)
    if target.startswith("postgresql"):
        raw(target, "UPDATE transactions SET keys = ARRAY['x/y'] WHERE commit_revision = ?",
            (revision,))  # fmt: skip
    else:
        raw(target, "UPDATE transactions SET keys = 'not json' WHERE commit_revision = ?",
            (revision,))  # fmt: skip
    report = store.audit.verify()
    assert report.problem is not None
    assert (report.problem.kind, report.problem.revision) == ("altered", revision)


def test_a_deleted_entry_is_named(store: WorkloadStore, target: str) -> None:
    drive(store)
    revision, _ = sealed_entry(store)
    raw(target, "DELETE FROM transactions WHERE commit_revision = ?", (revision,))
    report = store.audit.verify()
    assert report.problem is not None
    assert (report.problem.kind, report.problem.revision) == ("removed", revision)


def test_an_entry_deleted_with_its_link_is_named_by_the_entry_after_it(
    store: WorkloadStore, target: str
) -> None:
    drive(store)
    revision, _ = sealed_entry(store)
    after = revisions(store)[3]
    for table in ("transactions", "audit_chain"):
        raw(target, f"DELETE FROM {table} WHERE commit_revision = ?", (revision,))
    report = store.audit.verify()
    assert report.problem is not None
    assert (report.problem.kind, report.problem.revision) == ("removed", after)
    assert f"at revision {revision}" in report.problem.message


def test_two_entries_swapped_are_named_by_the_first(store: WorkloadStore, target: str) -> None:
    drive(store)
    store.audit.seal()
    first, second = revisions(store)[1], revisions(store)[4]
    # Swap their contents: every column but the revisions (SQLite checks base = revision - 1).
    columns = "transaction_id, committed_at, operation_ids, keys, audit, row_hashes"
    rows = {
        r: raw(target, f"SELECT {columns} FROM transactions WHERE commit_revision = ?", (r,))[0]
        for r in (first, second)
    }
    raw(target, "UPDATE transactions SET transaction_id = 'tmp' WHERE commit_revision = ?",
        (first,))  # fmt: skip
    for into, source in ((second, first), (first, second)):
        assignments = ", ".join(f"{c.strip()} = ?" for c in columns.split(","))
        raw(target, f"UPDATE transactions SET {assignments} WHERE commit_revision = ?",
            (*rows[source], into))  # fmt: skip
    report = store.audit.verify()
    assert report.problem is not None
    assert (report.problem.kind, report.problem.revision) == ("altered", first)
    assert "moved there from another revision" in report.problem.message


def test_an_entry_inserted_below_the_sealed_head_is_named(
    store: WorkloadStore, target: str
) -> None:
    drive(store)
    store.audit.seal()
    logged = revisions(store)
    # A revision between two sealed ones: PostgreSQL's are sparse, SQLite's dense (make room
    # by cutting the first entry out of the chain and the log, and logging a forged one).
    if target.startswith("postgresql"):
        forged = logged[0] + 1
        raw(target, "INSERT INTO transactions VALUES (?, ?, 'tx_forged', 1.0, "
            "ARRAY['op'], ARRAY['x/y'], NULL, ARRAY[''])", (forged, logged[0]))  # fmt: skip
    else:
        forged = logged[0]
        raw(target, "DELETE FROM audit_chain WHERE commit_revision = ?", (forged,))
        raw(target, "UPDATE transactions SET transaction_id = 'tx_forged' "
            "WHERE commit_revision = ?", (forged,))  # fmt: skip
    report = store.audit.verify()
    assert report.problem is not None
    assert (report.problem.kind, report.problem.revision) == ("inserted", forged)


def test_an_edited_link_is_named(store: WorkloadStore, target: str) -> None:
    drive(store)
    revision, _ = sealed_entry(store)
    raw(target, "UPDATE audit_chain SET link = ? WHERE commit_revision = ?", ("0" * 64, revision))
    report = store.audit.verify()
    assert report.problem is not None
    assert (report.problem.kind, report.problem.revision) == ("chain_altered", revision)


@pytest.mark.parametrize(
    "edit",
    [
        "UPDATE rows SET document = replace(document, '\"id\":1', '\"id\":2') WHERE key = ?",
        "UPDATE rows SET version = version + 1 WHERE key = ?",
    ],
    ids=["document", "version"],
)
def test_an_edited_row_is_named_with_the_transaction_that_wrote_it(
    store: WorkloadStore, target: str, edit: str
) -> None:
    drive(store)
    store.audit.seal()
    victim = store.db.list_rows(WORK)[0]
    raw(target, edit, (victim.key,))
    report = store.audit.verify()
    assert report.problem is not None
    assert report.problem.kind == "row_altered"
    assert report.problem.address == f"{WORK}/{victim.key}"
    assert report.problem.revision == victim.revision
    assert report.transactions == report.sealed  # the log itself verified


def test_a_row_moved_to_another_revision_is_named(store: WorkloadStore, target: str) -> None:
    drive(store)
    store.audit.seal()
    victim = store.db.list_rows(WORK)[-1]
    other = revisions(store)[0]
    assert other != victim.revision
    raw(target, "UPDATE rows SET revision = ? WHERE key = ?", (other, victim.key))
    report = store.audit.verify()
    assert report.problem is not None
    assert (report.problem.kind, report.problem.address) == ("row_unlogged", f"{WORK}/{victim.key}")


def test_an_anchor_finds_a_log_cut_back_or_rewritten_with_new_hashes(
    store: WorkloadStore, target: str
) -> None:
    drive(store)
    store.admit(make_request(idempotency_key="last"))  # the last entry only makes a row
    noted = store.audit.verify()
    anchor = (noted.head_revision, noted.head_link)
    assert store.audit.verify(anchor=anchor).ok
    # Cut the last entry, its link and the row it made back to nothing: without the anchor
    # the shorter chain is consistent (no entry left wrote that row); with it, the cut is
    # found.
    last = noted.head_revision
    for table in ("transactions", "audit_chain", "rows"):
        column = "revision" if table == "rows" else "commit_revision"
        raw(target, f"DELETE FROM {table} WHERE {column} = ?", (last,))
    assert store.audit.verify().ok
    cut = store.audit.verify(anchor=anchor)
    assert cut.problem is not None
    assert (cut.problem.kind, cut.problem.revision) == ("anchor_mismatch", last)
    # An entry rewritten and the whole chain sealed anew: only an anchor finds it.
    drive(store, 2, prefix="later")
    noted = store.audit.verify()
    anchor = (noted.head_revision, noted.head_link)
    raw(
        target,
        "UPDATE transactions SET audit = NULL WHERE commit_revision = ?",
        (revisions(store)[0],),
    )
    raw(target, "DELETE FROM audit_chain")
    assert store.audit.verify().ok
    rewritten = store.audit.verify(anchor=anchor)
    assert rewritten.problem is not None and rewritten.problem.kind == "anchor_mismatch"


def test_entries_logged_without_row_hashes_are_counted_not_covered(
    store: WorkloadStore, target: str
) -> None:
    drive(store)
    if target.startswith("postgresql"):  # its fence refuses such an UPDATE too
        raw(target, "ALTER TABLE transactions DROP CONSTRAINT transactions_row_hashes_check")
    raw(target, "UPDATE transactions SET row_hashes = NULL")  # as before the chain existed
    report = store.audit.verify()
    assert report.ok
    assert report.rows_not_covered == report.rows == 6


def test_an_application_reader_learns_only_the_kind_and_revision_of_another_ones_problem(
    store: WorkloadStore, target: str
) -> None:
    drive(store)
    revision, transaction_id = sealed_entry(store)
    raw(target, "UPDATE transactions SET committed_at = 2.0 WHERE commit_revision = ?",
        (revision,))  # fmt: skip
    own = store.audit.verify("t", "app").problem
    assert own is not None and own.transaction_id == transaction_id
    other = store.audit.verify("t2", "app").problem
    assert other is not None
    assert (other.kind, other.revision, other.transaction_id) == ("altered", revision, None)
    assert "another application" in other.message
    with pytest.raises(WorkloadError) as refused:
        store.audit.verify("", "app")
    assert refused.value.code == ErrorCode.WORKLOAD_INVALID


def test_concurrent_writers_and_sealers_make_one_chain_in_revision_order(
    store: WorkloadStore, target: str
) -> None:
    writers_done = threading.Event()
    errors: list[BaseException] = []

    def write(number: int) -> None:
        try:
            with WorkloadStore.open(target) as own:
                for n in range(15):
                    own.admit(make_request(idempotency_key=f"w{number}-{n}"))
                    batch = [make_request(idempotency_key=f"w{number}-{n}-{m}") for m in range(6)]
                    own.admit_many(batch)
        except BaseException as error:
            errors.append(error)

    def seal() -> None:
        try:
            with WorkloadStore.open(target) as own:
                while not writers_done.is_set():
                    own.audit.seal()
        except BaseException as error:
            errors.append(error)

    writers = [threading.Thread(target=write, args=(n,)) for n in range(3)]
    sealers = [threading.Thread(target=seal) for _ in range(2)]
    for thread in [*writers, *sealers]:
        thread.start()
    for thread in writers:
        thread.join(timeout=120)
    writers_done.set()
    for thread in sealers:
        thread.join(timeout=120)
    assert not errors, errors
    report = store.audit.verify()
    logged = revisions(store)
    assert report.ok, report.problem
    assert report.transactions == report.sealed == len(logged) == 3 * 15 * 7
    links = store.db.chain_links_between(0, logged[-1], 1000)
    assert [link.commit_revision for link in links] == logged
    assert [link.previous_revision for link in links] == [0, *logged[:-1]]


def test_completions_in_a_batch_are_hashed_as_written(store: WorkloadStore) -> None:
    store.admit_many([make_request(idempotency_key=f"c{n}") for n in range(6)])
    claims = store.claim_many("t", "app", "w1", CAPABILITIES, 6, now=20, start=True)
    answers = store.complete_many(
        [
            Completion(c.workload_id, c.claim_id, "w1", c.fencing_token, f"r{n}", {})
            for n, c in enumerate(claims)
        ],
        now=21,
    )
    assert [type(answer).__name__ for answer in answers] == ["WorkloadResult"] * 6, answers
    report = store.audit.verify()
    assert report.ok and report.rows == 6 and report.rows_not_covered == 0


# --- what the hashes alone do not cover: index columns, rows deleted or put back ---------

REVOKED = "system_revoked_grants"


def every_state(store: WorkloadStore) -> None:
    """Work in every state a store keeps it in (leases held, deadlines and retries due
    later, work set aside by its dependencies and work released), a revoked grant, an index
    rebuilt, and rows the authority deleted (one of them made again).
    """

    def create(key: str, **fields: Any) -> str:
        return store.create(make_request(idempotency_key=key, **fields)).workload_id

    def claim(definition: str, now: int = 20) -> Any:
        found = store.claim_next("t", "app", "w1", CAPABILITIES, now=now, definitions={definition})
        assert found is not None, definition
        return found

    gates = [create(f"gate-{n}", definition_id="gate") for n in range(2)]
    for gate in gates:
        for n in range(2):
            create(f"after-{gate}-{n}", priority=100, dependencies=[{"workload_id": gate}])
    roles = ("running", "checkpointed", "done", "retried", "dead", "held", "expired")
    for role in roles:
        policy = {"max_attempts": 1} if role == "dead" else {"initial_delay_ms": 60_000}
        create(role, definition_id=role, retry_policy=policy, timeouts={"overall_ms": 10**9})
    create("claimed", timeouts={"heartbeat_ms": 60_000})
    create("later", not_before=10**6)
    create("approval", approval={}, timeouts={"approval_ms": 60_000})
    store.cancel(create("cancelled"), "human:h", 15)
    assert store.rebuild_indexes() > 0  # rewrites the index in place: no version, no entry
    claim("send")  # sets every dependent aside (its gate is READY), then claims "claimed"
    gate = claim("gate")
    store.start(gate.workload_id, gate.claim_id, "w1", gate.fencing_token, now=21)
    store.complete(gate.workload_id, gate.claim_id, "w1", gate.fencing_token, "r-g", {}, now=22)
    for role in roles:
        c = claim(role) if role != "expired" else store.claim_next(
            "t", "app", "w1", CAPABILITIES, now=20, lease_ms=1000, definitions={role}
        )  # fmt: skip
        assert c is not None
        if role == "held":
            store.cancel(c.workload_id, "human:h", 23)
            continue
        if role == "expired":
            continue
        store.start(c.workload_id, c.claim_id, "w1", c.fencing_token, now=21)
        if role == "checkpointed":
            store.checkpoint(c.workload_id, c.claim_id, "w1", c.fencing_token, {"at": 1}, now=22)
        elif role == "done":
            store.complete(c.workload_id, c.claim_id, "w1", c.fencing_token, "r-d", {}, now=22)
        elif role in ("retried", "dead"):
            store.fail(c.workload_id, c.claim_id, "w1", c.fencing_token, "timeout", "e", now=22)
    assert store.recover_expired(now=25)  # "expired"'s lease ran out, no other's
    assert store.grants.revoke("g", "human:h", 30, tenant_id="t", application_id="app")
    assert spend_ticket(store.db, "nonce", expires_at=40, now=30)
    assert prune_expired(store.db, now=10**6) == 1  # the spent ticket, deleted
    store.db.commit("op-1", [Mutation("system_other", "k", {"n": 1})])
    row = store.db.get_row("system_other", "k")
    assert row is not None
    guard = [Precondition("system_other", "k", expected_version=row.version)]
    store.db.commit("op-2", [Mutation("system_other", "k", None)], guard)
    store.db.commit("op-3", [Mutation("system_other", "k", {"n": 2})])  # made again


def test_a_store_of_work_in_every_state_verifies_with_nothing_reported(
    store: WorkloadStore, target: str
) -> None:
    every_state(store)
    report = store.audit.verify()
    assert report.ok, report.problem
    assert report.rows == len(store.db.rows_after("", "", 1000))
    assert report.rows_not_covered == report.rows_pending == 0
    states = {row.document["state"] for row in store.db.list_rows(WORK)}
    assert states >= {
        "READY", "CLAIMED", "RUNNING", "CHECKPOINTED", "SUCCEEDED", "DEAD_LETTER",
        "CANCELLED", "CANCELLATION_REQUESTED", "AWAITING_APPROVAL",
    }, states  # fmt: skip
    counted = (
        "count(waits_on), count(lease_expires_at), count(eligible_at), count(deadline_at), "
        "count(result_id), count(claim_group)"
    )
    # Every index column holds something somewhere: each was checked, not skipped.
    assert all(raw(target, f"SELECT {counted} FROM rows WHERE collection = ?", (WORK,))[0])
    assert [row.key for row in store.db.list_rows("system_ui_spent_tickets")] == []
    assert len(store.db.list_rows(REVOKED)) == 1


INDEX_EDITS = {
    "state": "SUCCEEDED",  # a claim no longer sees it; lists say it is done
    "tenant_id": "t2",  # listed in another tenant's work
    "priority": 99,
    "eligible_at": 10**9,
    "lease_expires_at": 5,
    "claim_group": None,  # ready work no claim reads
    "waits_on": "workload_x",  # set aside by half (waits_for left empty)
}


@pytest.mark.parametrize(("column", "value"), INDEX_EDITS.items(), ids=list(INDEX_EDITS))
def test_an_edited_index_column_is_named_with_its_row(
    store: WorkloadStore, target: str, column: str, value: Any
) -> None:
    drive(store)
    store.audit.seal()
    victim = store.db.list_rows(WORK, state="READY")[0]
    raw(target, f"UPDATE rows SET {column} = ? WHERE collection = ? AND key = ?",
        (value, WORK, victim.key))  # fmt: skip
    report = store.audit.verify()
    assert report.problem is not None
    problem = report.problem
    assert (problem.kind, problem.address) == ("index_altered", f"{WORK}/{victim.key}")
    assert problem.revision == victim.revision and column in problem.message
    assert report.transactions == report.sealed  # the log itself verified


def test_only_ready_work_may_keep_the_claim_group_its_migration_gave_it(
    store: WorkloadStore, target: str
) -> None:
    drive(store)
    raw(target, "UPDATE rows SET claim_group = 'unsorted' WHERE state = 'READY'")
    assert store.audit.verify().ok  # as the migration that added the column left it
    done = store.db.list_rows(WORK, state="SUCCEEDED")[0]
    raw(target, "UPDATE rows SET claim_group = 'unsorted' WHERE key = ?", (done.key,))
    problem = store.audit.verify().problem
    assert problem is not None
    assert (problem.kind, problem.address) == ("index_altered", f"{WORK}/{done.key}")


def test_a_deleted_workload_row_is_named_missing_with_its_last_write(
    store: WorkloadStore, target: str
) -> None:
    drive(store)
    store.audit.seal()
    victim = store.db.list_rows(WORK)[0]
    raw(target, "DELETE FROM rows WHERE collection = ? AND key = ?", (WORK, victim.key))
    report = store.audit.verify()
    assert report.problem is not None
    problem = report.problem
    assert (problem.kind, problem.address) == ("row_missing", f"{WORK}/{victim.key}")
    assert problem.revision == victim.revision
    writer = store.db.chain_entries_at([victim.revision])[victim.revision]
    assert problem.transaction_id == writer.transaction_id
    assert report.transactions == report.sealed and report.rows == 5  # all else verified


def test_a_row_deleted_pages_of_log_after_its_write_is_told_apart_from_one_lost(
    store: WorkloadStore, target: str
) -> None:
    for key in ("deleted", "lost"):
        store.db.commit(f"op-{key}", [Mutation("system_other", key, {"n": 1})])
    for n in range(11):  # 1,100 entries: more than a page of the walk
        store.admit_many([make_request(idempotency_key=f"p{n}-{m}") for m in range(100)])
    guard = [Precondition("system_other", "deleted", expected_version=1)]
    store.db.commit("op-delete", [Mutation("system_other", "deleted", None)], guard)
    assert store.audit.verify().ok  # written in the walk's first page, deleted in its second
    raw(target, "DELETE FROM rows WHERE collection = 'system_other' AND key = 'lost'")
    problem = store.audit.verify().problem
    assert problem is not None
    assert (problem.kind, problem.address) == ("row_missing", "system_other/lost")
    assert problem.revision == revisions(store)[1]


def test_a_deleted_revocation_is_named_missing_and_told_to_its_application_only(
    store: WorkloadStore, target: str
) -> None:
    drive(store, 2)
    assert store.grants.revoke("g", "human:h", 30, tenant_id="t", application_id="app")
    [revocation] = store.db.list_rows(REVOKED)
    raw(target, "DELETE FROM rows WHERE collection = ?", (REVOKED,))
    assert not store.grants.is_revoked("g", tenant_id="t", application_id="app")  # undone
    report = store.audit.verify()
    assert report.problem is not None
    problem = report.problem
    assert (problem.kind, problem.address) == ("row_missing", f"{REVOKED}/{revocation.key}")
    assert problem.revision == revocation.revision
    # The row is gone: the entry that wrote it says whose it was.
    assert store.audit.verify("t", "app").problem == problem
    other = store.audit.verify("t2", "app").problem
    assert other is not None and (other.kind, other.address) == ("row_missing", None)


def test_a_row_put_back_as_an_earlier_entry_wrote_it_is_named_stale(
    store: WorkloadStore, target: str
) -> None:
    store.admit(make_request(idempotency_key="one"))
    [row] = store.db.list_rows(WORK)
    columns = ("version", "revision", "document", *INDEX_NAMES)
    listed = ", ".join(columns)
    admitted = raw(target, f"SELECT {listed} FROM rows WHERE key = ?", (row.key,))[0]
    c = store.claim_next("t", "app", "w1", CAPABILITIES, now=20)
    assert c is not None
    store.start(c.workload_id, c.claim_id, "w1", c.fencing_token, now=20)
    store.complete(c.workload_id, c.claim_id, "w1", c.fencing_token, "r", {}, now=21)
    # Set back whole (document, version, revision, index) as the admission wrote it: every
    # row matches the entry its revision names, and the work is ready to run twice.
    assignments = ", ".join(f"{column} = ?" for column in columns)
    raw(target, f"UPDATE rows SET {assignments} WHERE key = ?", (*admitted, row.key))
    report = store.audit.verify()
    assert report.problem is not None
    problem = report.problem
    assert (problem.kind, problem.address) == ("row_stale", f"{WORK}/{row.key}")
    assert problem.revision == revisions(store)[1]  # the claim, the first write after it


def test_a_deleted_row_brought_back_is_named_stale(store: WorkloadStore, target: str) -> None:
    assert spend_ticket(store.db, "nonce", expires_at=40, now=30)
    [ticket] = store.db.list_rows("system_ui_spent_tickets")
    stored = raw(target, "SELECT * FROM rows WHERE key = ?", (ticket.key,))[0]
    assert prune_expired(store.db, now=10**6) == 1
    marks = ", ".join("?" for _ in stored)
    raw(target, f"INSERT INTO rows VALUES ({marks})", stored)  # a used sign-in link, unused
    report = store.audit.verify()
    assert report.problem is not None
    problem = report.problem
    assert (problem.kind, problem.address) == ("row_stale", f"system_ui_spent_tickets/{ticket.key}")
    assert problem.revision == revisions(store)[-1] and "deleted" in problem.message


def test_a_row_deleted_by_a_commit_the_walk_did_not_reach_is_pending_not_missing(
    store: WorkloadStore,
) -> None:
    # As if the deletion committed while the verification ran: the walk stops before it.
    from feltdb.storage.chain_writes import LogWrites

    store.db.commit("op-1", [Mutation("system_other", "k", {"n": 1})])
    walked = store.db.current_revision()
    store.db.commit("op-2", [Mutation("system_other", "k", None)])
    writes = LogWrites(store.db, 1000)
    writes.page(store.db.chain_entries_after(0, 1000)[:1])
    assert writes.finish(walked) == (1, None)


# --- PostgreSQL: the horizon, and a database of schema 3 ---------------------------------


def test_an_open_transaction_holds_back_the_seal_until_it_ends(
    new_pg_url: Callable[..., str],
) -> None:
    url = new_pg_url()
    with WorkloadStore.open(url) as store:
        store.admit(make_request(idempotency_key="before"))
        first = store.db.current_revision()
        with psycopg.connect(url) as holder:  # a transaction begun, holding an older id
            holder.execute("SELECT pg_current_xact_id()")
            store.admit(make_request(idempotency_key="after"))
            store.audit.seal()
            head = store.db.chain_head()
            assert head is not None and head.commit_revision == first
            holder.rollback()
        store.audit.seal()
        head = store.db.chain_head()
        assert head is not None and head.commit_revision == store.db.current_revision() > first
        assert store.audit.verify().ok


def test_a_database_of_schema_3_is_migrated_and_its_old_rows_counted_not_covered(
    new_pg_url: Callable[..., str],
) -> None:
    from feltdb.storage.sql import load_migrations

    url = new_pg_url("old", bare=True)
    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute(
            "CREATE TABLE feltdb_schema_migrations (version integer PRIMARY KEY, "
            "applied_at timestamptz NOT NULL DEFAULT now())"
        )
        for migration in load_migrations("postgres")[:3]:
            connection.execute(migration.script.encode(), prepare=False)
            connection.execute(
                "INSERT INTO feltdb_schema_migrations (version) VALUES (%s)", [migration.version]
            )
        # A commit as a schema-3 release logged it: the row, then its entry.
        connection.execute(
            "INSERT INTO rows (collection, key, version, revision, document) "
            "SELECT 'system_other', 'k', 1, pg_current_xact_id()::text::bigint * 1024, '{}'"
        )
    with psycopg.connect(url, autocommit=True) as connection:
        revision = connection.execute("SELECT revision FROM rows").fetchall()[0][0]
        connection.execute(
            "INSERT INTO transactions (commit_revision, base_revision, transaction_id, "
            "committed_at, operation_ids, keys, audit) "
            "VALUES (%s, 0, 'tx_old', 1.0, ARRAY['op'], ARRAY['system_other/k'], NULL)",
            [revision],
        )
    with WorkloadStore.open(url) as store:  # migrates to the newest schema
        store.admit(make_request(idempotency_key="new"))
        report = store.audit.verify()
    assert report.ok, report.problem
    assert report.transactions == report.sealed == 2
    assert (report.rows, report.rows_not_covered) == (2, 1)


def test_an_entry_without_row_hashes_as_an_older_release_logs_one_is_refused(
    target: str, store: WorkloadStore
) -> None:
    # A process of a release that knows no row hashes, left running while the store was
    # migrated, would log entries whose rows escape verification: the schema refuses them.
    drive(store, 2)
    before = revisions(store)
    if target.startswith("postgresql"):
        statement = (
            "INSERT INTO transactions (commit_revision, base_revision, transaction_id, "
            "committed_at, operation_ids, keys) "
            "SELECT pg_current_xact_id()::text::bigint * 1024, ?, 'tx_old', 1.0, '{}', '{}'"
        )
        fenced: type[Exception] = psycopg.errors.CheckViolation
    else:
        statement = (
            "INSERT INTO transactions (commit_revision, base_revision, transaction_id, "
            "committed_at, operation_ids, keys) VALUES (? + 1, ?, 'tx_old', 1.0, '[]', '[]')"
        )
        fenced = sqlite3.IntegrityError
    params = (before[-1],) if target.startswith("postgresql") else (before[-1], before[-1])
    with pytest.raises(fenced) as raised:
        raw(target, statement, params)
    assert "row_hashes" in str(raised.value) or "row hashes" in str(raised.value)
    assert revisions(store) == before
    store.admit(make_request(idempotency_key="after"))  # the store's own commits pass
    assert store.audit.verify().ok


def test_a_session_that_rounds_floats_reads_the_chain_as_sealed(
    new_pg_url: Callable[..., str],
) -> None:
    # committed_at is hashed as read: a role or database with extra_float_digits=0 would
    # read it rounded, and every entry would seem altered, but for the pool's own setting.
    url = new_pg_url()
    separator = "&" if "?" in url else "?"
    rounding = f"{url}{separator}options=-c%20extra_float_digits%3D0"
    with WorkloadStore.open(url) as store:
        drive(store, 2)
        assert store.audit.verify().ok
    with WorkloadStore.open(rounding) as store:
        report = store.audit.verify()
    assert report.ok, report.problem


def test_a_row_pointed_at_an_entry_the_walk_never_verified_is_unlogged(
    store: WorkloadStore, target: str
) -> None:
    drive(store)
    store.audit.seal()
    victim = store.db.list_rows(WORK)[0]
    # A forged entry outside the walk (SQLite: revision 0; PostgreSQL: far above every
    # transaction id), claiming to have written the row as it is edited.
    forged = 0 if not target.startswith("postgresql") else 2**60
    edited = raw(target, "SELECT document FROM rows WHERE key = ?", (victim.key,))[0][0]
    edited = edited.replace('"id":1', '"id":7')
    address = f"{WORK}/{victim.key}"
    hashes = [row_hash(address, victim.version, edited)]
    if target.startswith("postgresql"):
        raw(target, "INSERT INTO transactions VALUES (?, 0, 'tx_forged', 1.0, ARRAY['op'], "
            "ARRAY[?], NULL, ?)", (forged, address, hashes))  # fmt: skip
    else:
        raw(target, "INSERT INTO transactions VALUES (?, -1, 'tx_forged', 1.0, '[\"op\"]', ?, "
            "NULL, ?)", (forged, f'["{address}"]', f'["{hashes[0]}"]'))  # fmt: skip
    raw(target, "UPDATE rows SET document = ?, revision = ? WHERE key = ?",
        (edited, forged, victim.key))  # fmt: skip
    report = store.audit.verify()
    if target.startswith("postgresql"):
        # Above every transaction id: not final, so pending, and said so.
        assert report.ok and report.rows_pending == 1
    else:
        assert report.problem is not None
        assert (report.problem.kind, report.problem.address) == ("row_unlogged", address)


@pytest.mark.parametrize(
    "edit",
    [
        "UPDATE audit_chain SET digest = 'é' WHERE commit_revision = ?",
        "UPDATE audit_chain SET link = 'é' WHERE commit_revision = ?",
    ],
    ids=["digest", "link"],
)
def test_a_link_edited_to_anything_is_reported_not_raised(
    store: WorkloadStore, target: str, edit: str
) -> None:
    drive(store)
    revision, _ = sealed_entry(store)
    raw(target, edit, (revision,))
    report = store.audit.verify()
    assert report.problem is not None and report.problem.revision == revision
    assert report.problem.kind in ("chain_altered", "altered")


@pytest.mark.parametrize(
    "edit",
    [
        "UPDATE rows SET revision = 'x' WHERE key = ?",
        "UPDATE rows SET revision = 1.5 WHERE key = ?",
        "UPDATE rows SET version = 'x' WHERE key = ?",
    ],
)
def test_a_sqlite_column_edited_to_another_type_is_reported_not_raised(
    tmp_path: Any, edit: str
) -> None:
    target = str(tmp_path / "typed.db")
    with WorkloadStore.open(target) as store:
        drive(store, 2)
        victim = store.db.list_rows(WORK)[0]
        raw(target, edit, (victim.key,))
        report = store.audit.verify()
    assert report.problem is not None
    assert report.problem.kind in ("row_unlogged", "row_altered")
    assert report.problem.address == f"{WORK}/{victim.key}"
