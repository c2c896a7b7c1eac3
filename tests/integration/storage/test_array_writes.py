"""PostgreSQL's array path of commit_many (feltdb.storage.array_writes): a batch of
single-row plans written in a few statements answers, stores and logs exactly what the
per-plan path does; batches it does not cover take the per-plan path; an insert beaten by a
concurrent transaction between the lock and the write loses as it would plan by plan, the
winners after it renumbered in the same transaction; and concurrent batches keep every
guard exact.

The same batch is run twice, on two fresh databases of the same contents: once as the
store runs it, once with the dialect's ``array_writes`` turned off, and the two compared
field by field (transaction ids are random and revisions are transaction ids: they are
compared by position and by their relation to each other).
"""

from __future__ import annotations

import random
import re
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import psycopg
import pytest
from psycopg import sql
from support.concurrency import JOIN_TIMEOUT_S, run_threads, wait_for_lock_waiter

from feltdb.errors import ErrorCode, WorkloadError
from feltdb.storage import (
    Commit,
    Mutation,
    PlannedCommit,
    Precondition,
    RowIndex,
    StorageConflict,
    StoredRow,
    array_writes,
)
from feltdb.storage.base import RowReader
from feltdb.storage.postgres import PostgresDatabase
from feltdb.storage.sql import load_queries

QUERIES = load_queries("postgres")
ARRAY_STATEMENTS = (
    "lock_batch_rows",
    "insert_batch_rows_if_absent",
    "update_batch_rows_if_version",
    "insert_batch_transactions",
    "renumber_batch_rows",
)
WAIT_TIMEOUT_S = 30


# --- fixtures and helpers ----------------------------------------------------------------


@pytest.fixture
def url(new_pg_url: Callable[..., str]) -> str:
    return new_pg_url("arrays")


@pytest.fixture
def db(url: str) -> Iterator[PostgresDatabase]:
    database = PostgresDatabase(url)
    try:
        yield database
    finally:
        database.close()


@pytest.fixture
def plain_url(new_pg_url: Callable[..., str]) -> str:
    return new_pg_url("plain")


@pytest.fixture
def plain(plain_url: str) -> Iterator[PostgresDatabase]:
    """A second store whose batches are all written plan by plan."""
    database = PostgresDatabase(plain_url)
    database._dialect.array_writes = False
    try:
        yield database
    finally:
        database.close()


@pytest.fixture
def array_calls(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The size of every batch written by arrays; batches of 2 plans or more qualify (not
    :data:`~feltdb.storage.array_writes.MIN_PLANS`), so that small batches test the path.
    """
    monkeypatch.setattr(array_writes, "MIN_PLANS", 2)
    calls: list[int] = []
    original = array_writes.write_arrays

    def counted(session: Any, queries: Any, batch: Sequence[Any]) -> Any:
        calls.append(len(batch))
        return original(session, queries, batch)

    monkeypatch.setattr(array_writes, "write_arrays", counted)
    return calls


def admin(url: str) -> psycopg.Connection[Any]:
    """A connection of the test's own to the store's database, outside the store's pool."""
    return psycopg.connect(url, autocommit=True)


def index(state: str, n: int) -> RowIndex:
    return RowIndex(
        "t1", "app1", state, n % 3, n, None if n % 2 else n, n + 7, None, f"r{n}", f"d{n % 2}"
    )


def insert(key: str, n: int = 0, **audit: Any) -> PlannedCommit:
    return PlannedCommit(
        f"ins:{key}",
        [Mutation("work", key, {"n": n, "key": key}, index("ready", n))],
        [Precondition("work", key, require_absent=True)],
        audit or None,
    )


def update(key: str, expected: int, n: int = 0, **audit: Any) -> PlannedCommit:
    return PlannedCommit(
        f"upd:{key}:{n}",
        [Mutation("work", key, {"n": n, "key": key}, index("claimed", n))],
        [Precondition("work", key, expected_version=expected)],
        audit or None,
    )


def seed(*databases: PostgresDatabase) -> None:
    """The same rows in every database: a at version 1, b at 2, c at 3, d at 1."""
    for database in databases:
        for version, key in [(1, "a"), (2, "b"), (3, "c"), (1, "d")]:
            for n in range(version):
                database.commit(f"seed:{key}:{n}", [Mutation("work", key, {"seed": n})])


def stored_rows(url: str) -> list[tuple[Any, ...]]:
    """Every row, every column, the revision as (its transaction's id, its position)."""
    with admin(url) as connection:
        return connection.execute(
            "SELECT collection, key, version, revision / 1024, revision % 1024, document, "
            "tenant_id, application_id, state, priority, created_at, eligible_at, "
            "lease_expires_at, deadline_at, result_id, definition_id FROM rows ORDER BY 1, 2"
        ).fetchall()


def logged(url: str) -> list[tuple[Any, ...]]:
    """Every log entry, oldest first, as the columns it holds."""
    with admin(url) as connection:
        return connection.execute(
            "SELECT commit_revision, base_revision, transaction_id, committed_at, "
            "operation_ids, keys, audit FROM transactions ORDER BY commit_revision"
        ).fetchall()


def comparable_rows(url: str, *, excluding: str | None = None) -> list[tuple[Any, ...]]:
    """:func:`stored_rows` (but the key ``excluding``), the transaction ids numbered in
    order.
    """
    rows = [row for row in stored_rows(url) if row[1] != excluding]
    numbering = {xid: n for n, xid in enumerate(sorted({row[3] for row in rows}))}
    return [(*row[:3], numbering[row[3]], *row[4:]) for row in rows]


def comparable_log(url: str) -> list[tuple[Any, ...]]:
    """:func:`logged` but the random transaction ids and the clock, each revision as its
    position and each base as the number of the entry it is (-1: none).
    """
    entries = logged(url)
    numbers = {entry[0]: n for n, entry in enumerate(entries)}
    return [
        (revision % 1024, numbers.get(base, -1), ops, keys, audit)
        for revision, base, _, _, ops, keys, audit in entries
    ]


def comparable(answers: Sequence[Commit | StorageConflict]) -> list[Any]:
    """The answers but their random transaction ids; a commit's revision as its position."""
    out: list[Any] = []
    for answer in answers:
        if isinstance(answer, StorageConflict):
            out.append(("conflict", answer.code, answer.message, answer.details))
        else:
            rows = [
                (row.collection, row.key, row.version, row.revision % 1024, row.document, row.text)
                for row in answer.rows
            ]
            out.append(("commit", answer.revision % 1024, rows))
    return out


def assert_same_as_plan_by_plan(
    db: PostgresDatabase,
    url: str,
    plain: PostgresDatabase,
    plain_url: str,
    plans: Sequence[PlannedCommit],
) -> list[Commit | StorageConflict]:
    """Run ``plans`` on both stores and compare answers, rows and log entries."""
    answers = db.commit_many(plans)
    expected = plain.commit_many(plans)
    assert comparable(answers) == comparable(expected)
    assert comparable_rows(url) == comparable_rows(plain_url)
    assert comparable_log(url) == comparable_log(plain_url)
    return answers


# --- the same answers as plan by plan ------------------------------------------------------


def test_a_mixed_batch_answers_stores_and_logs_as_plan_by_plan(
    db: PostgresDatabase,
    url: str,
    plain: PostgresDatabase,
    plain_url: str,
    array_calls: list[int],
) -> None:
    seed(db, plain)
    plans = [
        insert("new1", 1, work_id="w1", agent_id="ag"),  # wins
        update("a", 1, 2, kind="claimed"),  # wins: a is at 1
        insert("d", 3),  # lost: d exists (version 1)
        update("c", 2, 4),  # lost: c is at 3
        update("ghost", 1, 5),  # lost: no row
        insert("new2", 6),  # wins
        update("b", 2, 7),  # wins: b is at 2
        PlannedCommit(  # wins; a precondition that guards nothing is no guard
            "ins:new3",
            [Mutation("work", "new3", {"x": [1, "é", None]})],
            [Precondition("work", "new3", require_absent=True), Precondition("work", "zz")],
        ),
    ]
    answers = assert_same_as_plan_by_plan(db, url, plain, plain_url, plans)
    assert array_calls == [len(plans)]
    kinds = ["commit" if isinstance(a, Commit) else a.message for a in answers]
    assert kinds == [
        "commit",
        "commit",
        "work/d: expected no row, found version 1",
        "work/c: expected version 2, found version 3",
        "work/ghost: expected version 1, found no row",
        "commit",
        "commit",
        "commit",
    ]
    lost = answers[3]
    assert isinstance(lost, StorageConflict)
    assert lost.code == ErrorCode.WORKLOAD_CONFLICT.value
    assert lost.details == {
        "collection": "work",
        "key": "c",
        "expected_version": 2,
        "found_version": 3,
    }


def test_a_database_or_role_that_turns_array_nulls_off_changes_nothing(
    url: str, plain: PostgresDatabase, plain_url: str, array_calls: list[int]
) -> None:
    # With array_nulls off an unquoted NULL in an array literal is the text "NULL": every
    # pooled connection turns it back on (configure_session), so NULLs stay NULL.
    with admin(url) as connection:
        name = connection.execute("SELECT current_database()").fetchall()[0][0]
        connection.execute(
            sql.SQL("ALTER DATABASE {} SET array_nulls = off").format(sql.Identifier(name))
        )
    with admin(url) as connection:
        assert connection.execute("SHOW array_nulls").fetchall()[0][0] == "off"
    db = PostgresDatabase(url)
    try:
        plans = [insert(f"n{n}", n) for n in range(5)]  # no audit, odd n: no eligible_at
        assert_same_as_plan_by_plan(db, url, plain, plain_url, plans)
        assert array_calls == [5]
        with admin(url) as connection:
            audits = connection.execute("SELECT audit FROM transactions").fetchall()
            eligible = connection.execute(
                "SELECT count(*) FROM rows WHERE eligible_at IS NULL"
            ).fetchall()
        assert audits == [(None,)] * 5 and eligible == [(2,)]
        assert [t.audit for t in db.committed_transactions_after(0)] == [None] * 5
    finally:
        db.close()


def test_winners_take_dense_positions_and_each_base_is_the_previous_commit(
    db: PostgresDatabase, url: str, array_calls: list[int]
) -> None:
    seed(db)
    before = db.current_revision()
    answers = db.commit_many(
        [insert("a"), insert("x"), update("b", 1), update("b2", 1), update("c", 3), insert("y")]
    )
    assert array_calls == [6]
    commits = [answer for answer in answers if isinstance(answer, Commit)]
    assert [c.rows[0].key for c in commits] == ["x", "c", "y"]
    first = commits[0].revision
    assert first % 1024 == 0
    assert [c.revision for c in commits] == [first, first + 1, first + 2]
    assert [row.revision for c in commits for row in c.rows] == [first, first + 1, first + 2]
    assert [row.version for c in commits for row in c.rows] == [1, 4, 1]
    log = db.committed_transactions_after(before)
    assert [(t.base_revision, t.commit_revision) for t in log] == [
        (before, first),
        (first, first + 1),
        (first + 1, first + 2),
    ]
    assert [t.transaction_id for t in log] == [c.transaction_id for c in commits]
    assert [t.operation_ids for t in log] == [["ins:x"], ["upd:c:0"], ["ins:y"]]
    assert [t.keys for t in log] == [["work/x"], ["work/c"], ["work/y"]]
    assert log[0].committed_at <= log[1].committed_at <= log[2].committed_at
    assert db.current_revision() == first + 2
    with admin(url) as connection:
        xmins = connection.execute(
            "SELECT DISTINCT xmin::text::bigint FROM transactions WHERE commit_revision >= %s",
            [first],
        ).fetchall()
    assert xmins == [((first // 1024) % 2**32,)]


def test_a_batch_that_loses_every_plan_writes_and_logs_nothing(
    db: PostgresDatabase, url: str, array_calls: list[int]
) -> None:
    seed(db)
    before = logged(url)
    answers = db.commit_many([insert("a"), update("b", 1), update("nothing", 1)])
    assert array_calls == [3]
    assert all(isinstance(answer, StorageConflict) for answer in answers)
    assert logged(url) == before


@pytest.mark.parametrize(
    "plans",
    [
        pytest.param([insert("k"), update("k", 1, 2)], id="a row twice: the second sees the first"),
        pytest.param([insert("p")], id="one plan"),
        pytest.param(
            [
                insert("p"),
                PlannedCommit(
                    "two rows",
                    [Mutation("work", "q", {}), Mutation("work", "r", {})],
                    [Precondition("work", "q", require_absent=True)],
                ),
            ],
            id="a plan of two rows",
        ),
        pytest.param(
            [insert("p"), PlannedCommit("unguarded", [Mutation("work", "a", {"u": 1})])],
            id="an unguarded plan",
        ),
        pytest.param(
            [
                insert("p"),
                PlannedCommit(
                    "delete", [Mutation("work", "b", None)], [Precondition("work", "b", False, 2)]
                ),
            ],
            id="a guarded deletion",
        ),
        pytest.param(
            [
                insert("p"),
                PlannedCommit(
                    "two guards",
                    [Mutation("work", "q", {}), Mutation("work", "a", {})],
                    [
                        Precondition("work", "q", require_absent=True),
                        Precondition("work", "a", expected_version=9),
                    ],
                ),
            ],
            id="a plan of two guards, the second lost",
        ),
    ],
)
def test_batches_the_array_path_does_not_cover_are_written_plan_by_plan(
    db: PostgresDatabase,
    url: str,
    plain: PostgresDatabase,
    plain_url: str,
    array_calls: list[int],
    plans: list[PlannedCommit],
) -> None:
    seed(db, plain)
    answers = assert_same_as_plan_by_plan(db, url, plain, plain_url, plans)
    assert array_calls == []
    if plans[0].operation_id == "ins:k":  # the second plan guards on what the first wrote
        assert all(isinstance(answer, Commit) for answer in answers)
        assert [a.rows[0].version for a in answers if isinstance(a, Commit)] == [1, 2]


def test_batches_of_fewer_than_min_plans_are_written_plan_by_plan(
    db: PostgresDatabase, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[int] = []
    original = array_writes.write_arrays

    def counted(session: Any, queries: Any, batch: Sequence[Any]) -> Any:
        calls.append(len(batch))
        return original(session, queries, batch)

    monkeypatch.setattr(array_writes, "write_arrays", counted)
    smallest = array_writes.MIN_PLANS
    for size in (smallest - 1, smallest, smallest + 1):
        answers = db.commit_many([insert(f"s{size}:{n}") for n in range(size)])
        assert all(isinstance(answer, Commit) for answer in answers)
        assert [a.revision % 1024 for a in answers if isinstance(a, Commit)] == list(range(size))
    assert calls == [smallest, smallest + 1]


@pytest.mark.parametrize(
    ("loser", "message"),
    [
        pytest.param(
            Mutation("work", "c", {}, encoded='{"nul":"\x00"}'), "cannot be stored", id="NUL"
        ),
        pytest.param(
            Mutation("work", "c", {}, RowIndex(priority=2**63)),
            "outside the 64-bit range",
            id="a priority past 64 bits",
        ),
    ],
)
def test_a_value_postgresql_refuses_refuses_the_batch_as_plan_by_plan(
    db: PostgresDatabase, url: str, array_calls: list[int], loser: Mutation, message: str
) -> None:
    # The per-plan path sends a lost plan's values too, and PostgreSQL refuses them: so
    # such a batch is not predicted by arrays, where the lost plan's values are not sent.
    seed(db)
    before = logged(url)
    plans = [insert("p"), PlannedCommit("lost", [loser], [Precondition("work", "c", False, 1)])]
    with pytest.raises(WorkloadError, match=message) as raised:
        db.commit_many(plans)
    assert raised.value.code == ErrorCode.WORKLOAD_INVALID.value
    assert array_calls == []
    assert logged(url) == before and db.get_row("work", "p") is None


def test_the_largest_version_is_compared_and_a_larger_one_refused_as_plan_by_plan(
    db: PostgresDatabase,
    url: str,
    plain: PostgresDatabase,
    plain_url: str,
    array_calls: list[int],
) -> None:
    seed(db, plain)
    answers = assert_same_as_plan_by_plan(
        db, url, plain, plain_url, [insert("p"), update("a", 2**63 - 1)]
    )
    assert array_calls == [2]
    assert isinstance(answers[1], StorageConflict)
    assert answers[1].message == f"work/a: expected version {2**63 - 1}, found version 1"
    for database in (db, plain):
        with pytest.raises(WorkloadError, match="outside the 64-bit range") as raised:
            database.commit_many([insert("q"), update("b", 2**63)])
        assert raised.value.code == ErrorCode.WORKLOAD_INVALID.value
    assert db.get_row("work", "q") is None


TRICKY = [
    "",
    "NULL",
    "null",
    " padded ",
    'a "quoted" word',
    "back\\slash",
    "\\",
    '\\"',
    "{braces}, commas",
    "new\nline\ttab\r",
    "é ü 日本 🎉",
    "\x01\x1f",
    '{"json":"\\u0000 escaped, not a NUL"}',
]


def test_array_literals_read_back_as_the_values(url: str) -> None:
    rng = random.Random(7)
    alphabet = '\\"{},NUL l\n\t é🎉'
    values: list[str | None] = [*TRICKY, None]
    values += ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 12))) for _ in range(300)]
    integers = [0, 1, -1, None, 2**63 - 1, -(2**63)]
    with admin(url) as connection:
        [(texts, numbers)] = connection.execute(
            "SELECT %s::text[], %s::bigint[]",
            [array_writes.text_array(values), array_writes.bigint_array(integers)],
        ).fetchall()
        assert connection.execute(
            "SELECT %s::text[]", [array_writes.text_array([])]
        ).fetchall() == [([],)]
    assert texts == values
    assert numbers == integers


def test_tricky_texts_are_stored_as_plan_by_plan(
    db: PostgresDatabase,
    url: str,
    plain: PostgresDatabase,
    plain_url: str,
    array_calls: list[int],
) -> None:
    seed(db, plain)
    plans = [
        PlannedCommit(
            f"op {text}",
            [Mutation("work", f"key {text}", {"t": text}, RowIndex(text, text, text))],
            [Precondition("work", f"key {text}", require_absent=True)],
            {"note": text},
        )
        for text in TRICKY
    ]
    plans.append(update("a", 1))
    plans.append(
        PlannedCommit(
            "raw",
            # A text alone (as a workload's commit writes it), an escape in it to keep.
            [Mutation("work", "raw", None, encoded=TRICKY[-1])],
            [Precondition("work", "raw", True)],
        )
    )
    answers = assert_same_as_plan_by_plan(db, url, plain, plain_url, plans)
    assert array_calls == [len(plans)]
    assert all(isinstance(answer, Commit) for answer in answers)
    row = db.get_row("work", "key " + TRICKY[4])
    assert row is not None and row.document["t"] == TRICKY[4]
    with admin(url) as connection:
        assert connection.execute("SELECT document FROM rows WHERE key = 'raw'").fetchall() == [
            (TRICKY[-1],)
        ]


# --- a prediction that fails -----------------------------------------------------------------


def insert_from_elsewhere(url: str, key: str) -> None:
    with admin(url) as other:
        other.execute(
            "INSERT INTO rows (collection, key, version, revision, document) "
            "VALUES ('work', %s, 1, pg_current_xact_id()::text::bigint * 1024, '{}')",
            [key],
        )


@pytest.fixture
def inserted_between_lock_and_write(
    monkeypatch: pytest.MonkeyPatch, url: str
) -> Callable[[str], list[int]]:
    """``arm(key)``: the next array write finds ``key`` inserted (and committed) by another
    transaction after it locked its rows; answers the list of such interventions.
    """

    def arm(key: str) -> list[int]:
        original = array_writes._write_rows
        done: list[int] = []

        def intervened(session: Any, queries: Any, winners: Sequence[Any]) -> Any:
            if not done:
                insert_from_elsewhere(url, key)
                done.append(1)
            return original(session, queries, winners)

        monkeypatch.setattr(array_writes, "_write_rows", intervened)
        return done

    return arm


@pytest.mark.parametrize(
    "order",
    [
        pytest.param(["early", "a", "late", "z"], id="an insert after it moves up"),
        pytest.param(["late", "early", "a", "z"], id="every plan after it moves up"),
        pytest.param(["early", "a", "z", "late"], id="nothing after it"),
    ],
)
def test_a_row_inserted_after_the_lock_loses_its_plan_and_the_winners_after_it_move_up(
    db: PostgresDatabase,
    url: str,
    plain: PostgresDatabase,
    plain_url: str,
    array_calls: list[int],
    inserted_between_lock_and_write: Callable[[str], list[int]],
    order: list[str],
) -> None:
    # The plan by plan store meets the row already there, as its late write would.
    seed(db, plain)
    insert_from_elsewhere(plain_url, "late")
    before = db.current_revision()
    done = inserted_between_lock_and_write("late")
    plans = [update("a", 1, 9) if key == "a" else insert(key) for key in order]
    answers = db.commit_many(plans)
    assert done == [1] and array_calls == [4]  # one transaction, by arrays
    expected = plain.commit_many(plans)
    assert comparable(answers) == comparable(expected)
    assert comparable_log(url) == comparable_log(plain_url)
    assert comparable_rows(url, excluding="late") == comparable_rows(plain_url, excluding="late")
    late = answers[order.index("late")]
    assert isinstance(late, StorageConflict)
    assert late.message == "work/late: expected no row, found version 1"
    assert late.details == {
        "collection": "work",
        "key": "late",
        "expected_version": None,
        "found_version": 1,
    }
    commits = [answer for answer in answers if isinstance(answer, Commit)]
    first = commits[0].revision
    assert [c.revision for c in commits] == [first, first + 1, first + 2]
    for commit in commits:  # each row where its commit is, the moved ones too
        row = db.get_row("work", commit.rows[0].key)
        assert row is not None and row.revision == commit.revision
    log = db.committed_transactions_after(before)
    assert [t.transaction_id for t in log] == [c.transaction_id for c in commits]
    assert [t.base_revision for t in log] == [before, first, first + 1]


def test_an_uncommitted_insert_is_waited_for_and_its_commit_mispredicts(
    db: PostgresDatabase, url: str, array_calls: list[int]
) -> None:
    # Not visible to the lock, so not locked; the batch's INSERT waits for it.
    outcome: list[list[Commit | StorageConflict]] = []
    with admin(url) as other:
        other.execute("BEGIN")
        other.execute(
            "INSERT INTO rows (collection, key, version, revision, document) "
            "VALUES ('work', 'k', 1, pg_current_xact_id()::text::bigint * 1024, '{}')"
        )
        committing = threading.Thread(
            target=lambda: outcome.append(db.commit_many([insert("j"), insert("k")]))
        )
        committing.start()
        wait_for_lock_waiter(url)
        other.execute("COMMIT")
        committing.join(JOIN_TIMEOUT_S)
    [(j, k)] = outcome
    assert array_calls == [2]
    assert isinstance(j, Commit) and j.revision % 1024 == 0
    assert isinstance(k, StorageConflict) and "expected no row, found version 1" in k.message
    row = db.get_row("work", "k")
    assert row is not None and row.document == {"__version": 1}


def test_an_uncommitted_insert_that_rolls_back_lets_the_batch_win(
    db: PostgresDatabase, url: str, array_calls: list[int]
) -> None:
    outcome: list[list[Commit | StorageConflict]] = []
    with admin(url) as other:
        other.execute("BEGIN")
        other.execute(
            "INSERT INTO rows (collection, key, version, revision, document) "
            "VALUES ('work', 'k', 1, pg_current_xact_id()::text::bigint * 1024, '{}')"
        )
        committing = threading.Thread(
            target=lambda: outcome.append(db.commit_many([insert("j"), insert("k", 5)]))
        )
        committing.start()
        wait_for_lock_waiter(url)
        other.execute("ROLLBACK")
        committing.join(JOIN_TIMEOUT_S)
    [(j, k)] = outcome
    assert isinstance(j, Commit) and isinstance(k, Commit)
    assert k.revision == j.revision + 1
    row = db.get_row("work", "k")
    assert row is not None and row.document["n"] == 5


def test_a_version_guard_waits_for_an_uncommitted_update_and_loses_to_it(
    db: PostgresDatabase, url: str, array_calls: list[int]
) -> None:
    seed(db)
    outcome: list[list[Commit | StorageConflict]] = []
    with admin(url) as other:
        other.execute("BEGIN")
        other.execute("UPDATE rows SET version = version + 1 WHERE key = 'a'")
        committing = threading.Thread(
            target=lambda: outcome.append(db.commit_many([update("a", 1), update("b", 2)]))
        )
        committing.start()
        wait_for_lock_waiter(url)
        other.execute("COMMIT")
        committing.join(JOIN_TIMEOUT_S)
    [(a, b)] = outcome
    assert array_calls == [2]
    assert isinstance(a, StorageConflict) and a.message == (
        "work/a: expected version 1, found version 2"
    )
    assert isinstance(b, Commit) and b.revision % 1024 == 0 and b.rows[0].version == 3


def test_a_row_deleted_while_waited_for_is_absent(
    db: PostgresDatabase, url: str, array_calls: list[int]
) -> None:
    seed(db)
    outcome: list[list[Commit | StorageConflict]] = []
    with admin(url) as other:
        other.execute("BEGIN")
        other.execute("DELETE FROM rows WHERE key IN ('a', 'b')")
        committing = threading.Thread(
            target=lambda: outcome.append(db.commit_many([update("a", 1), insert("b")]))
        )
        committing.start()
        wait_for_lock_waiter(url)
        other.execute("COMMIT")
        committing.join(JOIN_TIMEOUT_S)
    [(a, b)] = outcome
    assert (
        isinstance(a, StorageConflict) and a.message == "work/a: expected version 1, found no row"
    )
    assert isinstance(b, Commit) and b.rows[0].version == 1 and b.revision % 1024 == 0


def test_a_misprediction_in_commit_selected_many_is_corrected_in_its_transaction(
    db: PostgresDatabase,
    url: str,
    array_calls: list[int],
    inserted_between_lock_and_write: Callable[[str], list[int]],
) -> None:
    for n in range(3):
        db.commit(f"ready{n}", [Mutation("work", f"w{n}", {"n": n}, index("ready", n))])
    chosen: list[list[str]] = []

    def choose(rows: Sequence[StoredRow], read: RowReader) -> list[PlannedCommit]:
        chosen.append([row.key for row in rows])
        claims = [update(row.key, row.version, 1) for row in rows]
        return [insert("result"), *claims]

    done = inserted_between_lock_and_write("result")
    answers = db.commit_selected_many("work", "t1", "app1", "ready", 10**6, choose, limit=10)
    assert done == [1] and array_calls == [4]
    assert chosen == [["w2", "w1", "w0"]]  # one transaction: choose ran once
    assert [isinstance(answer, Commit) for answer in answers] == [False, True, True, True]
    commits = [answer for answer in answers if isinstance(answer, Commit)]
    assert [c.revision % 1024 for c in commits] == [0, 1, 2]
    assert db.list_rows("work", state="ready") == []


# --- concurrency -------------------------------------------------------------------------------


def test_concurrent_batches_over_the_same_rows_keep_every_guard_exact(
    db: PostgresDatabase, url: str, array_calls: list[int]
) -> None:
    """Six threads commit batches of 2 to 30 plans over 40 keys: updates guarded by the
    version each thread last saw (often stale), and inserts of keys that others insert
    too. Every row's version must be the number of committed plans that wrote it, and the
    log must hold exactly one entry per committed plan.
    """
    threads, rounds, keys = 6, 25, [f"k{n:02d}" for n in range(40)]
    for key in keys[:20]:
        db.commit(f"seed:{key}", [Mutation("work", key, {})])
    lock = threading.Lock()
    committed: list[Commit] = []
    base = db.current_revision()

    def worker(number: int) -> Callable[[], None]:
        def run() -> None:
            rng = random.Random(number)
            seen: dict[str, int] = {}
            for n in range(rounds):
                chosen = rng.sample(keys, rng.randint(2, 30))
                plans = [
                    update(key, seen[key], n) if key in seen else insert(key, n) for key in chosen
                ]
                for key, answer in zip(chosen, db.commit_many(plans), strict=True):
                    if isinstance(answer, Commit):
                        seen[key] = answer.rows[0].version
                        with lock:
                            committed.append(answer)
                    else:
                        found = answer.details["found_version"]
                        if found is None:
                            seen.pop(key, None)
                        else:
                            seen[key] = found

        return run

    run_threads([worker(number) for number in range(threads)])
    # Each batch by arrays (more than once if a deadlock retried it).
    assert len(array_calls) >= threads * rounds
    writes: dict[str, int] = {}
    for commit in committed:
        writes[commit.rows[0].key] = writes.get(commit.rows[0].key, 0) + 1
    for key in keys:
        row = db.get_row("work", key)
        seeded = 1 if key in keys[:20] else 0
        if row is None:
            assert writes.get(key, 0) == 0
        else:
            assert row.version == seeded + writes.get(key, 0), key
    # Each (row, version) was won by exactly one commit.
    won = [(c.rows[0].key, c.rows[0].version) for c in committed]
    assert len(won) == len(set(won))
    log = db.committed_transactions_after(base)
    assert sorted(t.transaction_id for t in log) == sorted(c.transaction_id for c in committed)
    assert {t.commit_revision for t in log} == {c.revision for c in committed}
    assert all(t.base_revision < t.commit_revision for t in log)


def test_concurrent_selected_batches_claim_each_row_once(
    db: PostgresDatabase, url: str, array_calls: list[int]
) -> None:
    rows, threads = 120, 4
    for n in range(rows):
        db.commit(f"ready{n}", [Mutation("work", f"w{n:03d}", {"n": n}, index("ready", n))])
    base = db.current_revision()
    lock = threading.Lock()
    claimed: list[Commit] = []

    def choose(selected: Sequence[StoredRow], read: RowReader) -> list[PlannedCommit]:
        return [update(row.key, row.version, 1, kind="started") for row in selected]

    def worker() -> None:
        while True:
            answers = db.commit_selected_many("work", "t1", "app1", "ready", 10**6, choose, limit=7)
            if not answers:
                return
            assert all(isinstance(answer, Commit) for answer in answers)
            with lock:
                claimed.extend(answer for answer in answers if isinstance(answer, Commit))

    run_threads([worker for _ in range(threads)])
    assert sorted(c.rows[0].key for c in claimed) == [f"w{n:03d}" for n in range(rows)]
    assert all(c.rows[0].version == 2 for c in claimed)
    assert array_calls and all(size >= 2 for size in array_calls)
    log = db.committed_transactions_after(base)
    assert len(log) == rows
    assert all(t.audit == {"kind": "started"} for t in log)


# --- query plans -------------------------------------------------------------------------------


def _as_numbered(query: str) -> tuple[str, list[str]]:
    """A queries.sql statement with $1, $2… for its %(name)s parameters, and the names."""
    names: list[str] = []

    def number(match: re.Match[str]) -> str:
        if match[1] not in names:
            names.append(match[1])
        return f"${names.index(match[1]) + 1}"

    return re.sub(r"%\((\w+)\)s", number, query).rstrip().rstrip(";"), names


@pytest.fixture(scope="module")
def planned_url(pg_databases: Any) -> Iterator[str]:
    """A database of 4000 rows and 4000 logged transactions, analyzed."""
    name = pg_databases.create("array_plans")
    url = pg_databases.url_of(name)
    PostgresDatabase(url).close()
    with admin(url) as connection:
        connection.execute(
            "INSERT INTO rows (collection, key, version, revision, document) "
            "SELECT 'work', 'w' || lpad(n::text, 5, '0'), 1, n, '{}' "
            "FROM generate_series(1, 4000) AS n"
        )
        connection.execute(
            "INSERT INTO transactions (commit_revision, base_revision, transaction_id, "
            "committed_at, operation_ids, keys, audit, row_hashes) "
            "SELECT r, r - 1, 'tx' || n, n, ARRAY['op' || n], ARRAY['work/w' || n], NULL, "
            "ARRAY[''] "
            "FROM generate_series(1, 4000) AS n, "
            "LATERAL (SELECT pg_current_xact_id()::text::bigint * 1024 + n AS r) AS revision"
        )
        connection.execute("ANALYZE")
    yield url
    pg_databases.drop(name)


BATCH = 10
_TEXT_PARAMS = ("collection", "document", "tenant_id", "application_id", "state", "result_id")
_INT_PARAMS = ("priority", "created_at", "eligible_at", "lease_expires_at", "deadline_at")
PLAN_PARAMS: dict[str, str] = {
    "key": array_writes.text_array([f"w{n:05d}" for n in range(1, BATCH + 1)]),
    "position": array_writes.bigint_array(range(BATCH)),
    "expected_version": array_writes.bigint_array([1] * BATCH),
    **{name: array_writes.text_array(["work" if name == "collection" else "x"] * BATCH)
       for name in _TEXT_PARAMS},
    "definition_id": array_writes.text_array([None] * BATCH),
    "claim_group": array_writes.text_array([None] * BATCH),
    "waits_on": array_writes.text_array([None] * BATCH),
    "waits_for": array_writes.text_array([None] * BATCH),
    "environment": array_writes.text_array([None] * BATCH),
    **{name: array_writes.bigint_array([1] * BATCH) for name in _INT_PARAMS},
    "transaction_id": array_writes.text_array([f"tx_{n}" for n in range(BATCH)]),
    "operation_id": array_writes.text_array([f"op{n}" for n in range(BATCH)]),
    "written_key": array_writes.text_array([f"work/w{n}" for n in range(BATCH)]),
    "audit": array_writes.text_array([None] * BATCH),
    "row_hash": array_writes.text_array(["h"] * BATCH),
}  # fmt: skip


def explain(url: str, query_name: str, plan_cache_mode: str) -> str:
    """The plan of a prepared statement over a batch of 10, under ``plan_cache_mode``."""
    statement, names = _as_numbered(QUERIES[query_name])
    arguments = sql.SQL(", ").join(sql.Literal(PLAN_PARAMS[name]) for name in names)
    with admin(url) as connection:
        connection.execute(sql.SQL("SET plan_cache_mode = {}").format(sql.Literal(plan_cache_mode)))
        connection.execute(sql.SQL("PREPARE planned AS ") + sql.SQL(statement))
        with connection.transaction(force_rollback=True):
            execute = sql.SQL("EXPLAIN EXECUTE planned({})").format(arguments)
            return "\n".join(row[0] for row in connection.execute(execute).fetchall())


@pytest.mark.parametrize("plan_cache_mode", ["force_custom_plan", "force_generic_plan"])
@pytest.mark.parametrize("query_name", ARRAY_STATEMENTS)
def test_the_array_statements_seek_the_primary_keys(
    planned_url: str, query_name: str, plan_cache_mode: str
) -> None:
    plan = explain(planned_url, query_name, plan_cache_mode)
    assert "Seq Scan" not in plan and "Hash" not in plan, plan
    if query_name != "insert_batch_rows_if_absent":  # which reads nothing but its arbiter
        index = "transactions_pkey" if query_name == "insert_batch_transactions" else "rows_pkey"
        assert index in plan, plan


@pytest.mark.parametrize("query_name", ARRAY_STATEMENTS)
def test_a_generic_plan_made_over_an_empty_table_seeks_a_row_at_a_time(
    url: str, query_name: str
) -> None:
    # A prepared statement keeps its generic plan as the table grows (until the table is
    # next analyzed): one made while it was empty must not be a hash join over a scan.
    plan = explain(url, query_name, "force_generic_plan")
    assert "Seq Scan" not in plan and "Hash" not in plan, plan


def test_the_sqlite_dialect_writes_plan_by_plan(tmp_path: Any, array_calls: list[int]) -> None:
    from feltdb.storage.sqlite import SQLiteDatabase

    database = SQLiteDatabase(tmp_path / "store.db")
    try:
        answers = database.commit_many([insert("a"), insert("b"), insert("a")])
    finally:
        database.close()
    assert [isinstance(answer, Commit) for answer in answers] == [True, True, False]
    assert array_calls == []
