"""What only the PostgreSQL backend does: its revision scheme, SKIP LOCKED selection,
migrations, connection loss, query plans and the limits of its types.

The promises every backend keeps are checked once, on both, in test_database_contract.py.
"""

from __future__ import annotations

import functools
import itertools
import random
import re
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from importlib import resources
from typing import Any, LiteralString

import psycopg
import pytest
from psycopg import sql
from support.concurrency import JOIN_TIMEOUT_S, run_threads, wait_for_lock_waiter
from support.rows import keys, put, ready, work_index

from feltdb.errors import ErrorCode, WorkloadError
from feltdb.storage import (
    Mutation,
    PlannedCommit,
    Precondition,
    RowIndex,
    StorageConflict,
    StoredRow,
)
from feltdb.storage.base import RowReader
from feltdb.storage.postgres import (
    MIGRATION_LOCK_KEY,
    SCHEMA_VERSION,
    WRITE_ATTEMPTS,
    PostgresDatabase,
)
from feltdb.storage.sql import load_migrations, load_queries
from feltdb.storage.targets import open_database

QUERIES = load_queries("postgres")
STORAGE_FAILURE = ErrorCode.WORKLOAD_STORAGE_FAILURE.value
INVALID = ErrorCode.WORKLOAD_INVALID.value
WAIT_TIMEOUT_S = 30


@pytest.fixture
def url(new_pg_url: Callable[..., str]) -> str:
    return new_pg_url("store")


@pytest.fixture
def db(url: str) -> Iterator[PostgresDatabase]:
    database = PostgresDatabase(url)
    try:
        yield database
    finally:
        database.close()


def admin(url: str) -> psycopg.Connection[Any]:
    """A connection of the test's own to the store's database, outside the store's pool."""
    return psycopg.connect(url, autocommit=True)


def scalar(url: str, statement: str, params: Any = None) -> Any:
    with admin(url) as connection:
        return connection.execute(statement.encode(), params).fetchall()[0][0]


def terminate_store_connections(url: str) -> int:
    """End every other session of the database, waiting until each has gone."""
    with admin(url) as connection:
        ended = connection.execute(
            "SELECT count(*) FROM pg_stat_activity, pg_terminate_backend(pid, 10000) AS ended "
            "WHERE datname = current_database() AND pid <> pg_backend_pid() AND ended"
        ).fetchall()[0][0]
    assert isinstance(ended, int)
    return ended


def claim_first(rows: list[StoredRow], read: RowReader) -> PlannedCommit | None:
    """A choose that moves the first selected row to state "claimed"."""
    if not rows:
        return None
    row = rows[0]
    return PlannedCommit(
        f"claim:{row.key}",
        [Mutation(row.collection, row.key, {"claimed": row.key}, work_index("claimed"))],
        [Precondition(row.collection, row.key, expected_version=row.version)],
    )


# --- opening ------------------------------------------------------------------------------


def test_the_target_is_the_url_without_its_password(url: str) -> None:
    user_info = url.replace("postgresql://postgres@", "postgresql://postgres:s3cret@")
    with_password = user_info + "&password=s3cret"
    database = PostgresDatabase(with_password)
    try:
        assert "s3cret" not in database.target
        assert database.target == url
    finally:
        database.close()


@pytest.mark.parametrize("scheme", ["postgres", "postgresql+psycopg"])
def test_open_database_accepts_every_spelling_of_a_postgresql_url(url: str, scheme: str) -> None:
    database = open_database(url.replace("postgresql", scheme, 1))
    try:
        assert isinstance(database, PostgresDatabase)
        put(database, "a")
        assert database.get_row("work", "a") is not None
    finally:
        database.close()


def test_an_unreachable_server_is_a_storage_failure(url: str) -> None:
    wrong = re.sub(r"port=\d+", "port=1", url)
    with pytest.raises(WorkloadError) as raised:
        PostgresDatabase(wrong)
    assert raised.value.code == STORAGE_FAILURE
    assert "open" in raised.value.message
    assert isinstance(raised.value.__cause__, psycopg.OperationalError)


def test_a_missing_database_is_a_storage_failure(url: str) -> None:
    with pytest.raises(WorkloadError) as raised:
        PostgresDatabase(re.sub(r"/(\w+)\?", "/no_such_database?", url))
    assert raised.value.code == STORAGE_FAILURE
    assert "no_such_database" in raised.value.message


# --- migrations ---------------------------------------------------------------------------


def declared_objects() -> dict[str, set[str]]:
    """The tables, indexes and constraints the migration files create, by their names."""
    script = "\n".join(migration.script for migration in load_migrations("postgres"))
    script = re.sub(r"--[^\n]*", "", script)
    return {
        "tables": set(re.findall(r"CREATE TABLE (\w+)", script)),
        "indexes": set(re.findall(r"CREATE INDEX (\w+)", script)),
        "constraints": set(re.findall(r"CONSTRAINT (\w+)", script)),
    }


def existing_objects(url: str) -> dict[str, set[str]]:
    with admin(url) as connection:
        tables = connection.execute(
            "SELECT relname FROM pg_class WHERE relkind = 'r' "
            "AND relnamespace = 'public'::regnamespace"
        ).fetchall()
        indexes = connection.execute(
            "SELECT relname FROM pg_class WHERE relkind = 'i' "
            "AND relnamespace = 'public'::regnamespace"
        ).fetchall()
        constraints = connection.execute(
            "SELECT conname FROM pg_constraint WHERE connamespace = 'public'::regnamespace "
            "AND contype <> 'n'"
        ).fetchall()
    return {
        "tables": {name for (name,) in tables},
        "indexes": {name for (name,) in indexes},
        "constraints": {name for (name,) in constraints},
    }


MIGRATION_RECORD = {
    "tables": {"feltdb_schema_migrations"},
    "indexes": {"feltdb_schema_migrations_pkey"},
    "constraints": {"feltdb_schema_migrations_pkey"},
}


def test_the_migrations_are_numbered_from_one_and_give_the_schema_version() -> None:
    migrations = load_migrations("postgres")
    assert [m.version for m in migrations] == list(range(1, len(migrations) + 1))
    assert SCHEMA_VERSION == migrations[-1].version
    assert migrations[0].name == "initial"


def test_a_migrated_database_has_exactly_the_declared_objects(
    new_pg_url: Callable[..., str],
) -> None:
    url = new_pg_url("bare", bare=True)
    assert existing_objects(url) == {"tables": set(), "indexes": set(), "constraints": set()}
    PostgresDatabase(url).close()
    declared = declared_objects()
    # Every primary key and unique constraint is an index of the same name.
    unique = {name for name in declared["constraints"] if name.endswith(("_pkey", "_key"))}
    expected = {
        "tables": declared["tables"] | MIGRATION_RECORD["tables"],
        "indexes": declared["indexes"] | unique | MIGRATION_RECORD["indexes"],
        "constraints": declared["constraints"] | MIGRATION_RECORD["constraints"],
    }
    assert existing_objects(url) == expected
    assert declared["tables"] == {"rows", "transactions", "audit_chain"}
    versions = scalar(
        url, "SELECT array_agg(version ORDER BY version) FROM feltdb_schema_migrations"
    )
    assert versions == list(range(1, SCHEMA_VERSION + 1))


def test_documents_are_compressed_with_lz4_where_the_server_has_it(
    db: PostgresDatabase, url: str
) -> None:
    # Migration 8: a document passes the TOAST threshold, and lz4 costs the server less CPU
    # than pglz; a server built without lz4 keeps pglz rather than failing the migration.
    with admin(url) as connection:
        try:
            connection.execute("SET default_toast_compression = lz4")
            has_lz4 = True
        except psycopg.errors.InvalidParameterValue:
            has_lz4 = False
    declared = scalar(
        url,
        "SELECT attcompression FROM pg_attribute "
        "WHERE attrelid = 'rows'::regclass AND attname = 'document'",
    )
    assert declared == ("l" if has_lz4 else "")
    put(db, "big", text="compressible " * 400)  # about 5 KB: compressed, as a workload is
    written = scalar(url, "SELECT pg_column_compression(document) FROM rows WHERE key = 'big'")
    assert written == ("lz4" if has_lz4 else "pglz")


def test_reopening_applies_nothing_again(new_pg_url: Callable[..., str]) -> None:
    url = new_pg_url("bare", bare=True)
    PostgresDatabase(url).close()
    record = "SELECT array_agg((version, applied_at)::text ORDER BY version) FROM " + (
        "feltdb_schema_migrations"
    )
    before = scalar(url, record)
    database = PostgresDatabase(url)
    put(database, "a")
    database.close()
    PostgresDatabase(url).close()
    assert scalar(url, record) == before
    assert scalar(url, "SELECT count(*) FROM rows") == 1


def test_two_openers_of_a_new_database_migrate_it_once(new_pg_url: Callable[..., str]) -> None:
    for round_ in range(10):
        url = new_pg_url(f"race{round_}", bare=True)
        barrier = threading.Barrier(2)
        opened: list[PostgresDatabase] = []

        def open_store(
            url: str = url,
            barrier: threading.Barrier = barrier,
            opened: list[PostgresDatabase] = opened,
        ) -> None:
            barrier.wait(timeout=WAIT_TIMEOUT_S)
            opened.append(PostgresDatabase(url))

        try:
            run_threads([open_store, open_store])
            assert len(opened) == 2
            put(opened[0], "a")
            assert opened[1].get_row("work", "a") is not None
        finally:
            for database in opened:
                database.close()
        assert scalar(url, "SELECT count(*) FROM feltdb_schema_migrations") == SCHEMA_VERSION


def test_opening_waits_for_a_migration_in_progress(new_pg_url: Callable[..., str]) -> None:
    url = new_pg_url("bare", bare=True)
    opened: list[PostgresDatabase] = []
    with admin(url) as holder:
        # Another opener in the middle of migrating: it holds the migration lock.
        holder.execute("BEGIN")
        holder.execute("SELECT pg_advisory_xact_lock(%s)", [MIGRATION_LOCK_KEY])
        opener = threading.Thread(target=lambda: opened.append(PostgresDatabase(url)))
        opener.start()
        wait_for_lock_waiter(url)
        assert not opened
        holder.execute("COMMIT")
        opener.join(JOIN_TIMEOUT_S)
    assert len(opened) == 1
    opened[0].close()


def test_a_database_of_a_newer_schema_is_refused(url: str) -> None:
    with admin(url) as connection:
        connection.execute(
            "INSERT INTO feltdb_schema_migrations (version) VALUES (%s)", [SCHEMA_VERSION + 1]
        )
    with pytest.raises(WorkloadError) as raised:
        PostgresDatabase(url)
    assert raised.value.code == STORAGE_FAILURE
    assert "newer feltdb" in raised.value.message
    assert f"schema {SCHEMA_VERSION + 1}" in raised.value.message
    assert "password" not in raised.value.message


def test_a_database_with_other_tables_of_the_same_names_is_refused_untouched(
    new_pg_url: Callable[..., str],
) -> None:
    url = new_pg_url("bare", bare=True)
    with admin(url) as connection:
        connection.execute("CREATE TABLE rows (id int)")
    with pytest.raises(WorkloadError) as raised:
        PostgresDatabase(url)
    assert raised.value.code == STORAGE_FAILURE
    assert "already exists" in raised.value.message
    assert isinstance(raised.value.__cause__, psycopg.errors.DuplicateTable)
    # The migration ran in one transaction: not even its record was left behind.
    assert existing_objects(url)["tables"] == {"rows"}


def test_schema_9_reads_each_workloads_environment_from_its_document(
    new_pg_url: Callable[..., str],
) -> None:
    url = new_pg_url("bare", bare=True)
    with admin(url) as connection, connection.transaction():
        connection.execute(QUERIES["create_migrations_table"])
        for migration in load_migrations("postgres")[:8]:
            connection.execute(migration.script, prepare=False)
            connection.execute(QUERIES["record_migration"], {"version": migration.version})
        for collection, key, document in [
            ("system_durable_work", "w1", '{"environment": "prod", "state": "READY"}'),
            # An escaped NUL anywhere in a document cannot be read as json text.
            ("system_durable_work", "w0", '{"input": "a\\u0000b", "environment": "qa"}'),
            ("system_durable_work", "w2", '{"state": "READY"}'),
            ("other", "o1", '{"environment": "not-a-workload"}'),
        ]:
            connection.execute(
                "INSERT INTO rows (collection, key, version, revision, document)"
                " VALUES (%s, %s, 1, 1, %s)",
                (collection, key, document),
            )
    PostgresDatabase(url).close()  # migrates to the newest schema
    with admin(url) as connection:
        backfilled = connection.execute(
            "SELECT collection, key, environment FROM rows ORDER BY collection, key"
        ).fetchall()
    assert backfilled == [
        ("other", "o1", None),
        ("system_durable_work", "w0", "qa"),
        ("system_durable_work", "w1", "prod"),
        ("system_durable_work", "w2", None),
    ]


# --- revisions ------------------------------------------------------------------------------


def test_revisions_are_the_committing_transactions_ids_times_1024(
    db: PostgresDatabase, url: str
) -> None:
    commits = [db.commit(f"op{n}", [Mutation("work", f"k{n}", {"n": n})]) for n in range(5)]
    revisions = [commit.revision for commit in commits]
    assert revisions == sorted(set(revisions))
    with admin(url) as connection:
        logged = connection.execute(
            "SELECT commit_revision, xmin::text::bigint FROM transactions ORDER BY 1"
        ).fetchall()
        # Each row was written by the transaction whose id, times 1024, is its revision
        # (xmin is the 32-bit id; the revision's id has its epoch above it), at position 0.
        assert [revision for revision, _ in logged] == revisions
        assert all(revision % 1024 == 0 for revision in revisions)
        assert all((revision // 1024) % 2**32 == xmin for revision, xmin in logged)
        # Ids are shared with every other transaction, so revisions are not dense.
        connection.execute("SELECT pg_current_xact_id()")
    later = db.commit("later", [Mutation("work", "later", {})])
    assert later.revision > revisions[-1] + 1
    log = db.committed_transactions_after(0)
    assert [entry.base_revision for entry in log] == [0, *revisions]
    assert db.current_revision() == later.revision
    assert all(row.revision == later.revision for row in later.rows)


def test_a_batch_s_revisions_are_its_transaction_id_times_1024_plus_each_plan_s_place(
    db: PostgresDatabase, url: str
) -> None:
    put(db, "taken")
    before = db.current_revision()
    answers = db.commit_many(
        [
            PlannedCommit(f"p{n}", [Mutation("work", key, {})], [Precondition("work", key, True)])
            for n, key in enumerate(["a", "taken", "b", "taken", "c"])
        ]
    )
    commits = [answer for answer in answers if not isinstance(answer, StorageConflict)]
    revisions = [commit.revision for commit in commits]
    # The lost plans take no place: the committed ones are at 0, 1, 2 of one transaction.
    first = revisions[0]
    assert first % 1024 == 0 and revisions == [first, first + 1, first + 2]
    assert [row.revision for commit in commits for row in commit.rows] == revisions
    with admin(url) as connection:
        logged = connection.execute(
            "SELECT commit_revision, base_revision, xmin::text::bigint FROM transactions "
            "WHERE commit_revision > %s ORDER BY 1",
            [before],
        ).fetchall()
    assert logged == [
        (first, before, (first // 1024) % 2**32),
        (first + 1, first, (first // 1024) % 2**32),
        (first + 2, first + 1, (first // 1024) % 2**32),
    ]
    assert db.current_revision() == first + 2


def test_an_older_release_s_writer_is_fenced_off_after_migration_3(url: str) -> None:
    # An older release logs at its bare transaction id, which readers past the revisions of
    # this one would never see: migration 3's constraint refuses it.
    with admin(url) as connection, pytest.raises(psycopg.errors.CheckViolation) as raised:
        connection.execute(
            "INSERT INTO transactions (commit_revision, base_revision, transaction_id, "
            "committed_at, operation_ids, keys, row_hashes) "
            "SELECT pg_current_xact_id()::text::bigint, 0, 'tx_old', 0, '{}', '{}', '{}'"
        )
    assert "transactions_revision_scheme_check" in str(raised.value)


def test_a_transaction_left_open_holds_back_readers_but_not_writers(
    db: PostgresDatabase, url: str
) -> None:
    first = db.commit("first", [Mutation("work", "a", {})])
    with admin(url) as holder:
        holder.execute("BEGIN")
        held: int = holder.execute("SELECT pg_current_xact_id()::text::bigint").fetchall()[0][0]
        second = db.commit("second", [Mutation("work", "b", {})])
        assert first.revision < held * 1024 < second.revision
        # The second commit is durable and readable, but the log does not show it yet: a
        # transaction with a smaller id might still commit before it.
        assert db.get_row("work", "b") is not None
        assert db.current_revision() == first.revision
        assert [t.commit_revision for t in db.committed_transactions_after(0)] == [first.revision]
        holder.execute("COMMIT")
    assert db.current_revision() == second.revision
    log = db.committed_transactions_after(first.revision)
    assert [(t.base_revision, t.commit_revision) for t in log] == [
        (first.revision, second.revision)
    ]


def test_a_log_reader_never_skips_a_commit_while_writers_race(
    db: PostgresDatabase, url: str
) -> None:
    """THE test of the revision scheme.

    Four writers commit 200 times each, a fifth commits through commit_selected and holds
    its transaction open for a few milliseconds after it has its id (its choose sleeps),
    so commits end out of the order of their revisions, and a sixth commits batches of one
    to nine plans (some lost) through commit_many, so a reader's page often ends inside a
    batch. A reader pages through the log all along, in small random pages, from where it
    stopped. At the end it must have seen every logged transaction exactly once, in
    increasing order, and the commits must really have ended out of order.
    """
    writers, per_writer, slow_commits, batches = 4, 200, 40, 40
    for n in range(slow_commits):
        ready(db, f"slow{n:03d}", 0)
    db.commit("taken", [Mutation("log", "taken", {})])  # the batches' lost plans guard it
    setup_revision = db.current_revision()
    finished = threading.Event()
    lock = threading.Lock()
    committed: list[tuple[int, str]] = []  # (revision, transaction id), in order of return
    seen: list[tuple[int, str]] = []
    rng = random.Random(3)

    def record(revision: int, transaction_id: str) -> None:
        with lock:
            committed.append((revision, transaction_id))

    def writer(number: int) -> Callable[[], None]:
        def run() -> None:
            for n in range(per_writer):
                commit = db.commit(f"w{number}:{n}", [Mutation("log", f"w{number}:{n}", {})])
                record(commit.revision, commit.transaction_id)

        return run

    def slow_writer() -> None:
        def choose(rows: list[StoredRow], read: RowReader) -> PlannedCommit | None:
            # The transaction has its id since it locked the rows; others commit meanwhile.
            time.sleep(0.005)
            return claim_first(rows, read)

        for _ in range(slow_commits):
            commit = db.commit_selected("work", "t1", "app1", "ready", 0, choose, limit=1)
            assert commit is not None
            record(commit.revision, commit.transaction_id)

    def batch_writer() -> None:
        batch_rng = random.Random(5)
        for n in range(batches):
            plans = []
            for p in range(batch_rng.randint(1, 9)):
                key = "taken" if p % 4 == 3 else f"b{n}:{p}"  # every fourth plan is lost
                guard = Precondition("log", key, require_absent=True)
                plans.append(PlannedCommit(f"b{n}:{p}", [Mutation("log", key, {})], [guard]))
            for answer in db.commit_many(plans):
                if isinstance(answer, StorageConflict):
                    continue
                record(answer.revision, answer.transaction_id)
                batched.append(answer.revision)

    batched: list[int] = []

    def reader() -> None:
        last = setup_revision
        current = 0
        while True:
            done = finished.is_set()  # read before the page, so a final page follows it
            page = db.committed_transactions_after(last, limit=rng.randint(1, 7))
            seen.extend((entry.commit_revision, entry.transaction_id) for entry in page)
            if page:
                last = page[-1].commit_revision
            revision = db.current_revision()
            assert revision >= current, "current_revision() went backwards"
            current = revision
            if done and not page:
                return

    errors: list[BaseException] = []

    def read_all() -> None:
        try:
            reader()
        except BaseException as error:
            errors.append(error)

    reading = threading.Thread(target=read_all)
    reading.start()
    run_threads([*(writer(n) for n in range(writers)), slow_writer, batch_writer])
    finished.set()
    reading.join(JOIN_TIMEOUT_S)
    assert not reading.is_alive()
    if errors:
        raise errors[0]

    total = writers * per_writer + slow_commits + len(batched)
    assert len(committed) == total
    revisions = [revision for revision, _ in seen]
    assert revisions == sorted(revisions), "the reader saw the log out of order"
    assert len(set(revisions)) == len(revisions), "the reader saw a commit twice"
    assert sorted(seen) == sorted(committed), "the reader missed a commit"
    logged = [(t.commit_revision, t.transaction_id) for t in db.committed_transactions_after(0)]
    assert sorted(committed) == logged[-total:]
    # The scheme was put to the test: some commit returned before one with a smaller
    # revision, so a reader taking every visible commit would have skipped that one.
    returned = [revision for revision, _ in committed]
    assert any(later < earlier for earlier, later in itertools.pairwise(returned)), (
        "every commit ended in revision order; the test did not race"
    )


# --- commit_selected ------------------------------------------------------------------------


def test_concurrent_selectors_get_disjoint_rows(db: PostgresDatabase) -> None:
    for n in range(6):
        ready(db, f"w{n}", 10 - n)
    first_selected = threading.Event()
    second_selected = threading.Event()
    picked: dict[str, list[str]] = {}

    def claim_all(name: str) -> Callable[[list[StoredRow], RowReader], PlannedCommit | None]:
        def choose(rows: list[StoredRow], read: RowReader) -> PlannedCommit | None:
            picked[name] = keys(rows)
            if name == "first":
                first_selected.set()
                # Hold the transaction, and the row locks, until the second has selected.
                assert second_selected.wait(WAIT_TIMEOUT_S)
            else:
                second_selected.set()
            return PlannedCommit(
                f"claim:{name}",
                [Mutation("work", row.key, {"by": name}, work_index("claimed")) for row in rows],
                [Precondition("work", row.key, expected_version=row.version) for row in rows],
            )

        return choose

    def first() -> None:
        db.commit_selected("work", "t1", "app1", "ready", 0, claim_all("first"), limit=3)

    def second() -> None:
        assert first_selected.wait(WAIT_TIMEOUT_S)
        # A plain read does not wait for the locks, and sees every row still ready.
        assert len(db.list_rows("work", tenant_id="t1", application_id="app1", state="ready")) == 6
        db.commit_selected("work", "t1", "app1", "ready", 0, claim_all("second"), limit=3)

    run_threads([first, second])
    assert picked == {"first": ["w0", "w1", "w2"], "second": ["w3", "w4", "w5"]}
    for n in range(6):
        row = db.get_row("work", f"w{n}")
        assert row is not None
        assert row.document["by"] == ("first" if n < 3 else "second")
    assert db.list_rows("work", tenant_id="t1", application_id="app1", state="ready") == []


def test_nothing_to_do_writes_nothing_and_releases_the_rows(db: PostgresDatabase, url: str) -> None:
    ready(db, "a", 0)
    revision = db.current_revision()
    assert db.commit_selected("work", "t1", "app1", "ready", 0, lambda r, _: None, limit=5) is None
    assert db.current_revision() == revision
    assert scalar(url, "SELECT count(*) FROM transactions") == 1
    # The row is not left locked: another selector gets it at once.
    commit = db.commit_selected("work", "t1", "app1", "ready", 0, claim_first, limit=5)
    assert commit is not None and keys(commit.rows) == ["a"]


def test_an_error_in_choose_writes_nothing(db: PostgresDatabase, url: str) -> None:
    ready(db, "a", 0)
    revision = db.current_revision()

    def choose(rows: list[StoredRow], read: RowReader) -> PlannedCommit | None:
        raise WorkloadError(ErrorCode.WORKLOAD_INVALID, "refused by choose")

    with pytest.raises(WorkloadError, match="refused by choose"):
        db.commit_selected("work", "t1", "app1", "ready", 0, choose, limit=5)
    assert db.current_revision() == revision
    commit = db.commit_selected("work", "t1", "app1", "ready", 0, claim_first, limit=5)
    assert commit is not None


# --- guards under concurrency ----------------------------------------------------------------


def insert_uncommitted(connection: psycopg.Connection[Any], key: str) -> None:
    connection.execute("BEGIN")
    connection.execute(
        "INSERT INTO rows (collection, key, version, revision, document) "
        "VALUES ('work', %s, 1, pg_current_xact_id()::text::bigint, '{}')",
        [key],
    )


def test_an_absent_guard_waits_for_an_uncommitted_insert_and_loses_to_it(
    db: PostgresDatabase, url: str
) -> None:
    # The guard is its INSERT … ON CONFLICT DO NOTHING: it waits for the other inserter.
    outcome: list[BaseException | None] = []

    def commit() -> None:
        try:
            db.commit(
                "op",
                [Mutation("work", "k", {"mine": True})],
                [Precondition("work", "k", require_absent=True)],
            )
            outcome.append(None)
        except BaseException as error:
            outcome.append(error)

    with admin(url) as other:
        insert_uncommitted(other, "k")
        committing = threading.Thread(target=commit)
        committing.start()
        wait_for_lock_waiter(url)
        other.execute("COMMIT")
        committing.join(JOIN_TIMEOUT_S)
    assert isinstance(outcome[0], StorageConflict)
    assert "expected no row, found version 1" in outcome[0].message
    row = db.get_row("work", "k")
    assert row is not None and row.document == {"__version": 1}


def test_an_absent_guard_wins_when_the_other_insert_rolls_back(
    db: PostgresDatabase, url: str
) -> None:
    outcome: list[Any] = []

    def commit() -> None:
        outcome.append(
            db.commit(
                "op",
                [Mutation("work", "k", {"mine": True})],
                [Precondition("work", "k", require_absent=True)],
            )
        )

    with admin(url) as other:
        insert_uncommitted(other, "k")
        committing = threading.Thread(target=commit)
        committing.start()
        wait_for_lock_waiter(url)
        other.execute("ROLLBACK")
        committing.join(JOIN_TIMEOUT_S)
    assert len(outcome) == 1
    row = db.get_row("work", "k")
    assert row is not None and row.document == {"mine": True, "__version": 1}


def test_a_version_guard_waits_for_an_uncommitted_update_and_loses_to_it(
    db: PostgresDatabase, url: str
) -> None:
    # The guard is its UPDATE … WHERE version = 1: it waits for the other writer of the
    # row, then re-checks the row as that writer committed it.
    put(db, "parent")
    with admin(url) as other:
        other.execute("BEGIN")
        other.execute("UPDATE rows SET version = version + 1 WHERE key = 'parent'")
        outcome: list[BaseException | None] = []

        def commit() -> None:
            try:
                db.commit(
                    "mine",
                    [Mutation("work", "parent", {"mine": True})],
                    [Precondition("work", "parent", expected_version=1)],
                )
                outcome.append(None)
            except BaseException as error:
                outcome.append(error)

        committing = threading.Thread(target=commit)
        committing.start()
        wait_for_lock_waiter(url)
        other.execute("COMMIT")
        committing.join(JOIN_TIMEOUT_S)
    assert isinstance(outcome[0], StorageConflict)
    assert "expected version 1, found version 2" in outcome[0].message
    row = db.get_row("work", "parent")
    assert row is not None and row.version == 2 and "mine" not in row.document


# --- retries and connection loss -------------------------------------------------------------


def test_a_lock_timeout_is_retried_then_reported(url: str) -> None:
    database = PostgresDatabase(url + "&options=-c%20lock_timeout%3D50")
    try:
        put(database, "held")
        calls: list[int] = []

        def choose(rows: list[StoredRow], read: RowReader) -> PlannedCommit:
            calls.append(1)
            return PlannedCommit("op", [Mutation("work", "held", {"n": 2})])

        with admin(url) as holder:
            holder.execute("BEGIN")
            holder.execute("SELECT * FROM rows WHERE key = 'held' FOR UPDATE")
            revision = database.current_revision()
            with pytest.raises(WorkloadError) as raised:
                database.commit_selected("work", "t1", "app1", "ready", 0, choose, limit=1)
            holder.execute("ROLLBACK")
        assert raised.value.code == STORAGE_FAILURE
        assert f"failed {WRITE_ATTEMPTS} times" in raised.value.message
        assert isinstance(raised.value.__cause__, psycopg.errors.LockNotAvailable)
        assert len(calls) == WRITE_ATTEMPTS
        assert database.current_revision() == revision
    finally:
        database.close()


def test_a_lock_released_between_attempts_lets_the_retry_commit(url: str) -> None:
    database = PostgresDatabase(url + "&options=-c%20lock_timeout%3D50")
    holder = admin(url)
    try:
        put(database, "held")
        holder.execute("BEGIN")
        holder.execute("SELECT * FROM rows WHERE key = 'held' FOR UPDATE")
        calls: list[int] = []

        def choose(rows: list[StoredRow], read: RowReader) -> PlannedCommit:
            calls.append(1)
            if len(calls) == 2:
                holder.execute("ROLLBACK")
            return PlannedCommit("op", [Mutation("work", "held", {"n": 2})])

        commit = database.commit_selected("work", "t1", "app1", "ready", 0, choose, limit=1)
        assert commit is not None and commit.rows[0].version == 2
        assert len(calls) == 2
    finally:
        holder.close()
        database.close()


def outcome_of(operation: Callable[[], Any]) -> Any:
    """The operation's result, or the WORKLOAD_STORAGE_FAILURE it raised for a lost
    connection (checked here); anything else fails the test.
    """
    try:
        return operation()
    except WorkloadError as error:
        assert error.code == STORAGE_FAILURE, error
        assert isinstance(error.__cause__, psycopg.OperationalError), error.__cause__
        return error


@pytest.mark.parametrize("operation", ["read", "commit"])
def test_connections_lost_while_idle_are_replaced(
    db: PostgresDatabase, url: str, operation: str
) -> None:
    # Several connections in the pool, so that several are lost at once.
    def warm(n: int) -> Callable[[], None]:
        return lambda: put(db, f"warm{n}")

    run_threads([warm(n) for n in range(6)])
    put(db, "a")
    for round_ in range(3):
        assert terminate_store_connections(url) >= 1
        if operation == "read":
            first = outcome_of(lambda: db.get_row("work", "a"))
        else:
            first = outcome_of(functools.partial(put, db, f"after{round_}"))
        # The protocol allows the first operation to fail cleanly (outcome_of checks
        # that); this pool checks a connection before handing it out and replaces every
        # lost one, so here it succeeds...
        assert not isinstance(first, WorkloadError), first
        # ... and the next one works in any case.
        assert db.get_row("work", "a") is not None
        put(db, f"next{round_}")
        assert db.get_row("work", f"next{round_}") is not None


def test_a_commit_whose_connection_is_lost_writes_nothing(db: PostgresDatabase, url: str) -> None:
    ready(db, "a", 0)
    row = db.get_row("work", "a")
    assert row is not None
    revision = db.current_revision()

    def choose(rows: list[StoredRow], read: RowReader) -> PlannedCommit | None:
        # From another connection, end this transaction's session before it writes.
        assert terminate_store_connections(url) >= 1
        return claim_first(rows, read)

    with pytest.raises(WorkloadError) as raised:
        db.commit_selected("work", "t1", "app1", "ready", 0, choose, limit=1)
    assert raised.value.code == STORAGE_FAILURE
    assert isinstance(raised.value.__cause__, psycopg.OperationalError)
    assert url.split("@")[1].split("?")[0] in raised.value.message
    # Nothing was written, and the store works again on a new connection.
    assert db.current_revision() == revision
    after = db.get_row("work", "a")
    assert after is not None and after.version == row.version
    commit = db.commit_selected("work", "t1", "app1", "ready", 0, claim_first, limit=1)
    assert commit is not None and commit.rows[0].version == row.version + 1


def test_a_closed_store_refuses_every_call(url: str) -> None:
    database = PostgresDatabase(url)
    database.close()
    database.close()
    with pytest.raises(WorkloadError) as raised:
        database.get_row("work", "a")
    assert raised.value.code == STORAGE_FAILURE
    assert "closed" in raised.value.message


# --- values PostgreSQL cannot store ----------------------------------------------------------


@pytest.mark.parametrize(
    "call",
    [
        lambda db: db.commit("op", [Mutation("work", "a", {}, RowIndex(priority=2**63))]),
        lambda db: db.commit("op", [Mutation("work", "a", {}, RowIndex(deadline_at=-(2**63) - 1))]),
        lambda db: db.commit_selected(
            "work", "t1", "app1", "ready", 2**64, lambda r, g: None, limit=1
        ),
        lambda db: db.rows_due("work", "deadline_at", 2**63, limit=1),
        lambda db: db.commit(
            "op", [Mutation("work", "a", {})], [Precondition("work", "a", expected_version=2**63)]
        ),
        lambda db: db.commit(
            "op",
            [Mutation("work", "a", {}, RowIndex(created_at=2**70))],
            [Precondition("work", "a", expected_version=1)],
        ),
        lambda db: db.committed_transactions_after(2**63),
        lambda db: db.commit("op", [Mutation("work", "a\x00b", {})]),
        lambda db: db.commit("op", [Mutation("work", "a", {"text": "\ud800"})]),
    ],
    ids=[
        "index-above",
        "index-below",
        "now",
        "due",
        "expected-version",
        "guarded-index",
        "log-revision",
        "nul-in-key",
        "lone-surrogate",
    ],
)
def test_values_postgresql_cannot_store_are_invalid(
    db: PostgresDatabase, call: Callable[[PostgresDatabase], Any]
) -> None:
    put(db, "a")
    revision = db.current_revision()
    with pytest.raises(WorkloadError) as raised:
        call(db)
    assert raised.value.code == INVALID
    assert db.current_revision() == revision
    row = db.get_row("work", "a")
    assert row is not None and row.version == 1


def test_the_64_bit_limits_themselves_are_stored(db: PostgresDatabase) -> None:
    index = RowIndex(priority=2**63 - 1, created_at=-(2**63))
    db.commit("op", [Mutation("work", "a", {"big": 2**100}, index)])
    row = db.get_row("work", "a")
    assert row is not None and row.document["big"] == 2**100
    # The largest version a guard can name is compared, not refused.
    with pytest.raises(StorageConflict, match=f"expected version {2**63 - 1}, found version 1"):
        db.commit(
            "op",
            [Mutation("work", "a", {})],
            [Precondition("work", "a", expected_version=2**63 - 1)],
        )


# --- query plans -----------------------------------------------------------------------------


def _as_numbered(query: str) -> tuple[str, list[str]]:
    """A queries.sql statement with $1, $2… for its %(name)s parameters, and the names."""
    names: list[str] = []

    def number(match: re.Match[str]) -> str:
        if match[1] not in names:
            names.append(match[1])
        return f"${names.index(match[1]) + 1}"

    return re.sub(r"%\((\w+)\)s", number, query).rstrip().rstrip(";"), names


PLAN_PARAMS: dict[str, Any] = {
    "addresses": '[["work", "w00042"], ["work", "w00007"]]',
    "collection": "work",
    "key": "w00042",
    "tenant_id": "t1",
    "application_id": "app1",
    "state": "ready",
    "now": 1500,
    "limit": 10,
    "offset": 0,
    "result_id": "r42",
    "result_ids": "{r42,r7}",
    "definition": "d1",
    "definition_id": "d1",
    "claim_group": "g1",
    "waits_on": "w00007",
    "waits_for": "succeeded",
    "waits_on_version": 3,
    "environment": "e1",
    "collections": "{work,work}",
    "tenant_ids": "{t1,t1}",
    "application_ids": "{app1,app1}",
    "revision": 100,
    "position": 0,
    "expected_version": 1,
    "version": 1,
    "document": "{}",
    "priority": 1,
    "created_at": 1,
    "eligible_at": None,
    "lease_expires_at": None,
    "deadline_at": None,
    "transaction_id": "tx",
    "operation_ids": "{op}",
    "keys": "{work/a}",
    "audit": None,
    "row_hashes": "{h}",
    "after": 100,
    "through": 200,
    "depth": 10,
    "scan": 100,
    "since": 0.0,
    "revisions": "[100, 200]",
    "states": "{ready,running}",
    "grant_id": "g1",
}


@pytest.fixture(scope="module")
def planned_url(pg_databases: Any) -> Iterator[str]:
    """A database of a few thousand rows over several collections, tenants and states,
    and a few thousand logged transactions, all sealed in the audit chain, analyzed.
    """
    databases = pg_databases
    name = databases.create("plans")
    url = databases.url_of(name)
    PostgresDatabase(url).close()
    with admin(url) as connection:
        connection.execute(
            """
            INSERT INTO rows (collection, key, version, revision, document, tenant_id,
                application_id, state, priority, created_at, eligible_at, lease_expires_at,
                deadline_at, result_id, definition_id, claim_group)
            SELECT CASE WHEN n % 4 = 0 THEN 'other' ELSE 'work' END, 'w' || lpad(n::text, 5, '0'),
                1, n, '{}', 't' || (n % 5), 'app' || (n % 3),
                (ARRAY['ready', 'claimed', 'succeeded', 'failed'])[1 + n % 4], n % 5, n,
                CASE WHEN n % 7 = 0 THEN n END, CASE WHEN n % 10 = 1 THEN n END,
                CASE WHEN n % 10 = 2 THEN n END, CASE WHEN n % 10 = 3 THEN 'r' || n END,
                'd' || (n % 6), CASE WHEN n % 4 = 1 THEN 'g' || (n % 8) END
            FROM generate_series(1, 4000) AS n
            """
        )
        connection.execute(
            """
            INSERT INTO transactions (commit_revision, base_revision, transaction_id,
                committed_at, operation_ids, keys, audit, row_hashes)
            SELECT r, r - 1, 'tx' || n, n, ARRAY['op' || n], ARRAY['work/w' || n], NULL,
                ARRAY['']
            FROM generate_series(1, 4000) AS n,
                 LATERAL (SELECT pg_current_xact_id()::text::bigint * 1024 + n AS r) AS revision
            """
        )
        connection.execute(
            """
            INSERT INTO audit_chain (commit_revision, previous_revision, digest, link)
            SELECT commit_revision, base_revision, 'd', 'l' FROM transactions
            """
        )
        connection.execute("ANALYZE")
    yield url
    databases.drop(name)


PLANS: dict[str, str | tuple[str, ...]] = {
    "list_rows_of_definition": "rows_by_definition",
    "page_rows_of_definition_same_priority": "rows_by_definition",
    "page_rows_of_definition_lower_priority": "rows_by_definition",
    "list_rows_of_environment": "rows_by_environment",
    "page_rows_of_environment_same_priority": "rows_by_environment",
    "page_rows_of_environment_lower_priority": "rows_by_environment",
    "rows_indexed_after": "rows_pkey",
    "row_revisions_at": "rows_pkey",
    "chain_keys_after": "transactions_pkey",
    "joined_position": "transactions_pkey",
    "claimable_rows": "rows_by_state",
    "claim_groups_after": "rows_ready",
    "next_claim_definition": "rows_ready",
    "claimable_rows_in_group": "rows_ready",
    "claimable_rows_in_group_same_priority": "rows_ready",
    "claimable_rows_in_group_lower_priority": "rows_ready",
    "list_rows_by_state": "rows_by_state",
    "list_rows_by_application": "rows_by_application",
    "page_rows_by_state_same_priority": "rows_by_state",
    "page_rows_by_state_lower_priority": "rows_by_state",
    "page_rows_by_application_same_priority": "rows_by_application",
    "page_rows_by_application_lower_priority": "rows_by_application",
    "rows_due_lease_expires_at": "rows_by_lease_expiry",
    "rows_due_deadline_at": "rows_by_deadline",
    "rows_with_result_ids": "rows_by_result_id",
    "get_row": "rows_pkey",
    "get_row_held": "rows_pkey",
    # The tenant's applications, then each one's range (an index of the application's
    # rows by state: the planner picks among those that lead with it).
    "count_in_states_of_tenant": ("rows_by_state", "rows_by_definition", "rows_by_environment"),
    "count_in_states_of_grant": ("rows_by_state", "rows_by_definition", "rows_by_environment"),
    "get_rows": "rows_pkey",
    "row_version": "rows_pkey",
    "update_row_if_version": "rows_pkey",
    "delete_row_if_version": "rows_pkey",
    "delete_row": "rows_pkey",
    "update_index": "rows_pkey",
    "set_aside": "rows_pkey",
    "release_waiting": "rows_waiting",
    "release_waiting_arrays": "rows_waiting",
    "current_revision": "transactions_pkey",
    "transactions_after": "transactions_pkey",
    "transactions_before": "transactions_pkey",
    "recent_operations": "transactions_pkey",
    "log_time_at_depth": "transactions_pkey",
    # One application's range of either index: the planner picks by the statistics.
    "count_in_application": ("rows_by_definition", "rows_by_application"),
    "insert_transaction": "transactions_pkey",
    "chain_entries_after": "transactions_pkey",
    "chain_entries_at": "transactions_pkey",
    "chain_head": "audit_chain_pkey",
    "chain_links_between": "audit_chain_pkey",
    "delete_log_through": "transactions_pkey",
    "rows_after": "rows_pkey",
    "row_version_held": "rows_pkey",
}


def _prepared_plan(
    url: str,
    query_name: str,
    arguments: dict[str, Any],
    plan_cache_mode: str,
    explain: LiteralString,
) -> str:
    """The plan of the named statement, prepared under ``plan_cache_mode`` and run with
    ``arguments`` by ``explain`` (``"EXPLAIN"``, or with ``ANALYZE``: run, then rolled back).
    """
    statement, names = _as_numbered(QUERIES[query_name])
    execute: sql.SQL | sql.Composed = sql.SQL(explain + " EXECUTE planned")
    if names:
        values = sql.SQL(", ").join(sql.Literal(arguments[name]) for name in names)
        execute = execute + sql.SQL("({})").format(values)
    with admin(url) as connection, connection.transaction(force_rollback=True):
        connection.execute(sql.SQL("SET plan_cache_mode = {}").format(sql.Literal(plan_cache_mode)))
        connection.execute(sql.SQL("PREPARE planned AS ") + sql.SQL(statement))
        return "\n".join(row[0] for row in connection.execute(execute).fetchall())


@pytest.mark.parametrize("plan_cache_mode", ["force_custom_plan", "force_generic_plan"])
@pytest.mark.parametrize("query_name", sorted(PLANS))
def test_protocol_queries_never_scan_nor_sort(
    planned_url: str, query_name: str, plan_cache_mode: str
) -> None:
    # A prepared statement (psycopg prepares a statement on its fifth use) may run with a
    # plan made for any parameters, so both the custom and the generic plan are checked.
    plan = _prepared_plan(planned_url, query_name, PLAN_PARAMS, plan_cache_mode, "EXPLAIN")
    expected = PLANS[query_name]
    assert any(
        index in plan for index in (expected if isinstance(expected, tuple) else (expected,))
    ), plan
    assert "Seq Scan" not in plan, plan
    if plan_cache_mode == "force_generic_plan":
        assert not re.search(r"\bSort\b", plan), plan


def test_a_selection_goes_on_when_the_statistics_cannot_be_gathered(
    db: PostgresDatabase, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # Statistics only make a plan better: a failure to gather them (a timeout, a lost
    # connection) is logged, and the claim's selection goes on.
    def refused() -> bool:
        raise WorkloadError(ErrorCode.WORKLOAD_STORAGE_FAILURE, "statement timeout")

    monkeypatch.setattr(db, "refresh_statistics", refused)
    put(db, "w1", RowIndex("t1", "app1", "ready", 0, 1, definition_id="d", claim_group="g"))
    seen: list[str] = []

    def choose(rows: Any, read: Any) -> list[Any]:
        seen.extend(row.key for row in rows)
        return []

    db.commit_selected_many("work", "t1", "app1", "ready", 10, choose, limit=5)
    assert seen == ["w1"]
    assert "statistics were not gathered: statement timeout" in caplog.text


def test_a_user_who_may_not_analyze_the_rows_is_told_so_and_not_asked_again(
    db: PostgresDatabase, url: str, caplog: pytest.LogCaptureFixture
) -> None:
    # ANALYZE of a table its user does not own is skipped with a warning, not an error:
    # the refresh must not take that for statistics gathered.
    put(db, "w1", RowIndex("t1", "app1", "ready", 0, 1))
    role = f"reader_{uuid.uuid4().hex[:8]}"
    with admin(url) as connection:
        connection.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(role)))
        connection.execute(
            sql.SQL("GRANT SELECT ON ALL TABLES IN SCHEMA public TO {}").format(
                sql.Identifier(role)
            )
        )
    try:
        other = PostgresDatabase(psycopg.conninfo.make_conninfo(url, user=role))
        try:
            assert other.refresh_statistics() is False
            assert other.refresh_statistics() is False  # not asked again
        finally:
            other.close()
    finally:
        with admin(url) as connection:
            connection.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(role)))
            connection.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))
    assert "could not be gathered (does the database user own the tables?)" in caplog.text
    assert scalar(url, "SELECT reltuples FROM pg_class WHERE oid = 'rows'::regclass") < 0


@pytest.fixture(scope="module")
def stale_url(pg_databases: Any) -> Iterator[str]:
    """A database analyzed while every row was ready, then mostly drained: 4,000 rows of
    one application, definition and claim group, priority and age as PLAN_PARAMS ask; the
    statistics say all are ready and none has a result, but three in four have succeeded
    (no claim group, a result id) since, as after a backlog's first drain.
    """
    name = pg_databases.create("stale")
    url = pg_databases.url_of(name)
    try:
        PostgresDatabase(url).close()
        with admin(url) as connection:
            # Autovacuum would gather fresh statistics: the point is that they are stale.
            connection.execute("ALTER TABLE rows SET (autovacuum_enabled = off)")
            connection.execute(
                "INSERT INTO rows (collection, key, version, revision, document, tenant_id,"
                " application_id, state, priority, created_at, definition_id, claim_group)"
                " SELECT 'work', 'w' || lpad(n::text, 5, '0'), 1, n, '{}', 't1', 'app1',"
                " 'ready', 1, n / 1000, 'd1', 'g1' FROM generate_series(1, 4000) n"
            )
            connection.execute("ANALYZE rows")
            connection.execute(
                "UPDATE rows SET state = 'succeeded', claim_group = NULL, result_id = 'r' || key"
                " WHERE right(key, 1) <> '0' AND right(key, 1) <> '5'"
            )
        yield url
    finally:
        pg_databases.drop(name)


STALE_PLANS = {
    "claimable_rows": "rows_by_state",
    "claimable_rows_in_group": "rows_ready",
    "claimable_rows_in_group_same_priority": "rows_ready",
    "claimable_rows_in_group_lower_priority": "rows_ready",
    "list_rows_by_state": "rows_by_state",
    "page_rows_by_state_same_priority": "rows_by_state",
    "page_rows_by_state_lower_priority": "rows_by_state",
    "rows_with_result_ids": "rows_by_result_id",
}
"""The statements whose plan stale statistics led astray, and the index each must seek."""


@pytest.mark.parametrize("plan_cache_mode", ["force_custom_plan", "force_generic_plan"])
@pytest.mark.parametrize("query_name", sorted(STALE_PLANS))
def test_statistics_taken_before_the_work_was_done_never_turn_a_seek_into_a_scan(
    stale_url: str, query_name: str, plan_cache_mode: str
) -> None:
    # Analyzed while all rows were ready and none had a result, the planner took
    # rows_by_application for a claim or a listing by state (the same order, every row
    # already done filtered out) and read the whole rows_by_result_id range for a result
    # id lookup: each read grew with the work done before it.
    arguments = {**PLAN_PARAMS, "created_at": 2, "result_ids": "{rw00001,rw00002,rw03999}"}
    explain = "EXPLAIN (ANALYZE, BUFFERS)"
    plan = _prepared_plan(stale_url, query_name, arguments, plan_cache_mode, explain)
    assert STALE_PLANS[query_name] in plan, plan
    assert "Seq Scan" not in plan and "rows_by_application" not in plan, plan
    assert "Rows Removed by Filter" not in plan, plan


def test_every_statement_that_reads_rows_or_the_log_has_a_plan_check() -> None:
    unchecked = {
        "list_rows",  # any filters: sorts the collection, as on SQLite
        # Over most of the table (as here) a sequential scan is the cheaper plan; the
        # contract test checks the index-only scan where the collection is a small part.
        "count_by_state",
        "oldest_by_definition",  # likewise: one GROUP BY over a state's rows of every tenant
        "insert_row_if_absent",  # INSERT … VALUES: no scan to plan
        "upsert_row",
        "migration_lock",
        "migrations_table_exists",
        "create_migrations_table",
        "schema_version",
        "record_migration",
        "savepoint",  # commit_many's savepoints: no scan to plan
        "rollback_to_savepoint",
        "release_savepoint",
        "joined_savepoint",  # a caller's transaction (storage/joined.py): likewise
        "joined_rollback",
        "joined_release",
        "joined_database",  # the connection's database: no table read
        "commit_without_sync",  # the wake-up hint's transaction: no row read or written
        "notify_wakeup",
        "listen_wakeup",
        "configure_session",  # SET, on each new pooled connection
        # The array path's statements: their plans are checked by test_array_writes.py
        # (array-literal parameters, and a generic plan made over an empty table).
        "lock_batch_rows",
        "insert_batch_rows_if_absent",
        "update_batch_rows_if_version",
        "insert_batch_transactions",
        "seal_chain",  # INSERT … SELECT from a JSON parameter: no table scanned to plan
        "renumber_batch_rows",
        "statistics_missing",  # a catalog row, and EXISTS: the first row of any scan
        "gather_statistics",  # ANALYZE
        "write_probe",  # readyz: WHERE false, planned as a one-time filter: no row read
        # Retention's candidates: the oldest keys of one state, a top-N sort (no index leads
        # with the state), off the write lock; bench/bench_retention.py measures it.
        "keys_created_before",
    }
    assert set(QUERIES) == set(PLANS) | unchecked


def test_a_new_database_s_rows_are_analyzed_once_so_a_claim_walk_seeks_rows_ready(
    db: PostgresDatabase, url: str
) -> None:
    # Never analyzed, the planner guesses one row everywhere and may walk the claim groups
    # through rows_by_application (every row of the application); the maintenance pass
    # gathers the statistics once, as soon as there are rows to gather them from.
    reltuples = "SELECT reltuples FROM pg_class WHERE oid = 'rows'::regclass"
    assert db.refresh_statistics() is False  # no row yet: nothing to gather
    assert scalar(url, reltuples) < 0
    for n in range(300):
        put(db, f"w{n}", RowIndex("t1", "app1", "ready", 0, n, definition_id="d", claim_group="g"))
    assert db.refresh_statistics() is True
    assert scalar(url, reltuples) == 300
    assert db.refresh_statistics() is False  # known now: not read again
    params = {"collection": "work", "tenant_id": "t1", "application_id": "app1", "definition": "d"}
    with admin(url) as connection:
        plan = connection.execute(
            ("EXPLAIN " + QUERIES["claim_groups_after"]).encode(),
            {**params, "claim_group": "", "limit": 8},
        ).fetchall()
    assert "rows_ready" in "".join(line[0] for line in plan), plan


def test_a_claim_s_selection_gathers_missing_statistics_itself_and_asks_rarely(
    db: PostgresDatabase, url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A store used as a library has no maintenance pass: its first claims behind a new
    # backlog would be planned without statistics. The selection asks, at most every
    # SELECTION_RECHECK_S while they are missing, and never once they exist.
    from feltdb.storage import statistics

    reltuples = "SELECT reltuples FROM pg_class WHERE oid = 'rows'::regclass"
    with admin(url) as connection:  # no autovacuum gathering them meanwhile
        connection.execute("ALTER TABLE rows SET (autovacuum_enabled = off)")
    asked: list[bool] = []
    refresh = db.refresh_statistics

    def counted() -> bool:
        asked.append(refresh())
        return asked[-1]

    monkeypatch.setattr(db, "refresh_statistics", counted)
    monkeypatch.setattr(statistics, "SELECTION_RECHECK_S", 3600.0)

    def select() -> None:
        db.commit_selected_many("work", "t1", "app1", "ready", 0, lambda rows, read: [], limit=1)

    select()
    select()  # within the recheck interval: not asked again
    assert asked == [False] and scalar(url, reltuples) < 0  # no row yet: nothing gathered
    for n in range(300):
        put(db, f"w{n}", RowIndex("t1", "app1", "ready", 0, n, definition_id="d", claim_group="g"))
    select()
    assert asked == [False] and scalar(url, reltuples) < 0
    monkeypatch.setattr(statistics, "SELECTION_RECHECK_S", 0.0)
    select()
    assert asked == [False, True] and scalar(url, reltuples) == 300
    select()  # known now: nothing asked, nothing read
    assert asked == [False, True]


def test_the_sql_files_are_part_of_the_package() -> None:
    files = resources.files("feltdb.storage.sql").joinpath("postgres")
    assert files.joinpath("queries.sql").is_file()
    assert files.joinpath("migrations", "0001_initial.sql").is_file()


# --- connections ---------------------------------------------------------------------------


def test_an_exhausted_pool_answers_a_storage_failure_and_works_again_once_freed(url: str) -> None:
    # One connection, held by a claim whose choice waits: every other operation waits at
    # most the pool's timeout for a connection, then is refused; none hangs.
    db = PostgresDatabase(url, max_size=1, timeout=0.5)
    try:
        put(db, "a")
        choosing, release = threading.Event(), threading.Event()

        def choose(rows: Any, read: Any) -> None:
            choosing.set()
            assert release.wait(WAIT_TIMEOUT_S)

        holder = threading.Thread(
            target=lambda: db.commit_selected("work", "t1", "app1", "ready", 0, choose, limit=1)
        )
        holder.start()
        assert choosing.wait(WAIT_TIMEOUT_S)
        with pytest.raises(WorkloadError) as refused:
            db.get_row("work", "a")
        assert refused.value.code == STORAGE_FAILURE
        assert "no connection to the server within 0.5 s" in refused.value.message
        release.set()
        holder.join(JOIN_TIMEOUT_S)
        row = db.get_row("work", "a")
        assert row is not None and row.version == 1
    finally:
        db.close()


def test_a_row_only_read_that_is_being_written_loses_the_guard_without_waiting(
    db: PostgresDatabase, url: str
) -> None:
    # A claim that read a dependency at version 1 must not commit beside a write of that
    # dependency it never saw; nor may it wait for that write while holding its own rows
    # (a cycle of waits with the dependency's writer): it loses its guard at once.
    db.commit("seed", [Mutation("work", "parent", {"state": "DEAD_LETTER"})])
    outcome: list[Any] = []

    def claim() -> None:
        try:
            outcome.append(
                db.commit(
                    "claim",
                    [Mutation("work", "child", {})],
                    [Precondition("work", "parent", expected_version=1)],
                )
            )
        except StorageConflict as conflict:
            outcome.append(conflict)

    with admin(url) as other:
        other.execute("BEGIN")
        other.execute("UPDATE rows SET version = 2 WHERE collection = 'work' AND key = 'parent'")
        committing = threading.Thread(target=claim)
        committing.start()
        committing.join(JOIN_TIMEOUT_S)  # the writer has not committed: nothing may wait for it
        assert not committing.is_alive(), "the read guard waited for the dependency's writer"
        other.execute("COMMIT")
    [answer] = outcome
    assert isinstance(answer, StorageConflict), answer
    assert answer.message == "work/parent: another transaction is writing it"
    assert db.get_row("work", "child") is None


def test_a_row_only_read_is_held_against_writers_until_the_commit_ends(
    db: PostgresDatabase, url: str
) -> None:
    db.commit("seed", [Mutation("work", "parent", {"state": "DEAD_LETTER"})])
    with admin(url) as reader:
        reader.execute("BEGIN")
        # What the read guard takes, as a commit that read the parent holds it meanwhile.
        reader.execute(QUERIES["row_version_held"], {"collection": "work", "key": "parent"})
        written: list[Any] = []
        writer = threading.Thread(
            target=lambda: written.append(
                db.commit(
                    "retry",
                    [Mutation("work", "parent", {"state": "READY"})],
                    [Precondition("work", "parent", expected_version=1)],
                )
            )
        )
        writer.start()
        wait_for_lock_waiter(url)  # the dependency's writer waits for the reader to end
        assert written == []
        reader.execute("COMMIT")
        writer.join(JOIN_TIMEOUT_S)
    assert [commit.rows[0].version for commit in written] == [2]
