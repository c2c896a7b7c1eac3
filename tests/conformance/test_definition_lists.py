"""A list of some definitions, or of some environments, reads their index ranges alone
(issue 24, point 6): a grant constrained to a definition with no work once read every row of
its application for each page (2.25 s on 20,000 workloads), and fifty such requests left the
health checks unanswered for a minute.
"""

from __future__ import annotations

from typing import Any

from support.factories import CAPABILITIES, make_request

from feltdb import WorkloadState
from feltdb.auth.scope import Scope


class _Counting:
    """The store's database, counting the rows each kind of list read returns."""

    def __init__(self, db: Any) -> None:
        self._db = db
        self.application_rows = 0
        self.definition_rows = 0
        self.environment_rows = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._db, name)

    def page_rows(self, *args: Any, **kwargs: Any) -> Any:
        rows = self._db.page_rows(*args, **kwargs)
        self.application_rows += len(rows)
        return rows

    def page_rows_in_range(self, *args: Any, **kwargs: Any) -> Any:
        rows = self._db.page_rows_in_range(*args, **kwargs)
        column, _ = args[4]
        if column == "environment":
            self.environment_rows += len(rows)
        else:
            self.definition_rows += len(rows)
        return rows


def _admit(
    store,
    key: str,
    definition: str,
    priority: int = 0,
    created_at: int = 10,
    environment: str = "production",
) -> str:
    request = make_request(
        idempotency_key=key, definition_id=definition, priority=priority,
        created_at=created_at, environment=environment,
    )  # fmt: skip
    return store.create(request).workload_id


def _pages(store, **options: Any) -> list[str]:
    seen, after = [], None
    while True:
        page, after = store.page("t", "app", after=after, limit=3, **options)
        seen += [w.workload_id for w in page]
        if after is None:
            return seen


def test_a_narrowed_reader_reads_only_its_definitions_ranges(store):
    for n in range(300):
        _admit(store, f"other-{n}", "report", priority=5)
    mine = [_admit(store, f"mine-{n}", "send", priority=n % 3, created_at=10 + n) for n in range(7)]
    claimed = store.claim_next("t", "app", "w", CAPABILITIES, definitions=["send"], now=20)
    assert claimed is not None
    counting = _Counting(store.db)
    store.db = counting
    narrowed = Scope("t", "app", definitions=frozenset({"send"}))
    seen = _pages(store, scope=narrowed)
    assert counting.application_rows == 0
    assert counting.definition_rows <= len(mine) + 3, counting.definition_rows
    # The same workloads, in the same order, as the whole list read and filtered.
    everything = [w.workload_id for w in store.list("t", "app") if w.definition_id == "send"]
    assert seen == everything and sorted(seen) == sorted(mine)
    # A definition asked for reads its ranges too, in one state as in every one.
    assert _pages(store, definition="send") == everything
    ready = _pages(store, definition="send", state=WorkloadState.READY)
    assert ready == [i for i in everything if i != claimed.workload_id]
    assert counting.application_rows == 0


def test_a_reader_of_a_definition_with_no_work_reads_nothing(store):
    for n in range(200):
        _admit(store, f"other-{n}", "report")
    counting = _Counting(store.db)
    store.db = counting
    narrowed = Scope("t", "app", definitions=frozenset({"nothing-here"}))
    assert store.page("t", "app", limit=1, scope=narrowed) == ([], None)
    assert (counting.application_rows, counting.definition_rows) == (0, 0)


def test_a_reader_of_some_environments_reads_only_their_ranges(store):
    for n in range(300):
        _admit(store, f"prod-{n}", "send", priority=5)
    staged = [
        _admit(store, f"stage-{n}", ("send", "report")[n % 2], priority=n % 3,
               created_at=10 + n, environment=("staging", "qa")[n % 2])
        for n in range(8)
    ]  # fmt: skip
    claimed = store.claim(staged[0], "w", CAPABILITIES, now=20)
    counting = _Counting(store.db)
    store.db = counting
    narrowed = Scope("t", "app", environments=frozenset({"staging", "qa"}))
    seen = _pages(store, scope=narrowed)
    assert counting.application_rows == 0
    # Each page re-reads where each of its ranges stands: some rows twice, none of the 300.
    assert counting.environment_rows <= 2 * len(staged), counting.environment_rows
    everything = [w.workload_id for w in store.list("t", "app") if w.environment != "production"]
    assert seen == everything and sorted(seen) == sorted(staged)
    ready = _pages(store, scope=narrowed, state=WorkloadState.READY)
    assert ready == [i for i in everything if i != claimed.workload_id]
    # Narrowed to definitions as well: their ranges narrow the most, read alone.
    both = Scope("t", "app", environments=frozenset({"qa"}), definitions=frozenset({"report"}))
    assert _pages(store, scope=both) == [i for i in everything if store.get(i).environment == "qa"]
    assert counting.application_rows == 0


def test_a_reader_of_an_environment_with_no_work_reads_nothing(store):
    for n in range(200):
        _admit(store, f"prod-{n}", "send")
    counting = _Counting(store.db)
    store.db = counting
    narrowed = Scope("t", "app", environments=frozenset({"nowhere"}))
    assert store.page("t", "app", limit=1, scope=narrowed) == ([], None)
    assert (counting.application_rows, counting.environment_rows) == (0, 0)


def test_a_reader_narrowed_both_ways_reads_the_fewer_ranges(store):
    # Five definitions in every state are 70 ranges, past the merge's bound; the one
    # environment's 14 are not: the list reads those, and keeps only the five definitions.
    kinds = ["send", "bill", "ship", "refund", "audit"]
    for n in range(100):
        _admit(store, f"prod-{n}", "send", priority=5)
    staged = [
        _admit(store, f"stage-{n}", kinds[n % 5], created_at=10 + n, environment="staging")
        for n in range(6)
    ]
    _admit(store, "stage-other", "other", environment="staging")
    counting = _Counting(store.db)
    store.db = counting
    narrowed = Scope("t", "app", environments=frozenset({"staging"}), definitions=frozenset(kinds))
    assert sorted(_pages(store, scope=narrowed)) == sorted(staged)
    assert counting.application_rows == 0 and counting.definition_rows == 0
    assert 0 < counting.environment_rows <= 2 * (len(staged) + 1)
