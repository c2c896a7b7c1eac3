"""Claim partitions: ready work a claim may never take costs it nothing.

A hostile submitter's backlog of high-priority work needing a capability nobody holds (or
of an environment outside a worker's grant) must neither be paged through by a claim nor
hold the write lock while another tenant admits work. Both backends.
"""

from __future__ import annotations

import dataclasses
import re
import threading
import uuid
from typing import Any

import msgspec
import pytest
from support.factories import CAPABILITIES, SIGNER, make_request
from support.rows import waiting_on

from feltdb import (
    DURABLE_WORK_COLLECTION,
    CreateWorkload,
    WorkloadState,
    WorkloadStore,
    WorkloadTimeouts,
)
from feltdb.storage.base import StoredRow
from feltdb.work import claiming, partitions
from feltdb.work.partitions import MAX_GROUPS_REMEMBERED, claim_group, group_accepted
from feltdb.work.scheduling import row_index

BACKLOG = 600
"""Unclaimable workloads ahead of the one a claim may take: many batches of candidates."""


@pytest.fixture
def target(new_target):
    return new_target()


@pytest.fixture
def store(target):
    with WorkloadStore.open(target) as opened:
        yield opened


def _backlog(store: WorkloadStore) -> None:
    for n in range(BACKLOG):
        store.create(
            make_request(
                idempotency_key=f"sms-{n}",
                priority=100,
                capability_snapshot={"sms:send"},
            )
        )
    # As the first claim on a new PostgreSQL table (or a maintenance pass) would: the
    # statistics are gathered once, a catalog read and an ANALYZE that are not what the
    # claims measured here read.
    store.db.refresh_statistics()


def _of_tenant(tenant: str) -> CreateWorkload:
    """The fixture request, by an agent whose grant is of ``tenant``."""
    request = make_request()
    grant = msgspec.structs.replace(request.authorization_snapshot.grant, tenant_id=tenant)
    return make_request(
        tenant_id=tenant, idempotency_key="theirs", authorization_snapshot=SIGNER.sign(grant)
    )


class Statements:
    """Every statement the store's database runs while installed, with its parameters."""

    def __init__(self, store: WorkloadStore) -> None:
        self.store = store
        self.ran: list[tuple[str, dict[str, Any]]] = []
        self.rows = 0
        self.documents: list[str] = []
        """The key of every row whose document was read."""
        self.transactions = 0

    def _fetched(self, query: str, params: Any, found: list[Any]) -> None:
        self.ran.append((query, dict(params)))
        self.rows += len(found)
        if "document" in query.split("FROM")[0]:
            self.documents += [row[1] for row in found]

    def __enter__(self) -> Statements:
        dialect = self.store.db._dialect  # type: ignore[attr-defined]
        read, transact = dialect.read, dialect.transact
        statements = self

        def counted_read(query: str, params: Any) -> Any:
            found = read(query, params)
            statements._fetched(query, params, found)
            return found

        def counted_transact(doing: str, work: Any) -> Any:
            if doing == "wake-up hint":
                # PostgreSQL's announcer thread sends the hint of an earlier commit (the
                # backlog's last) whenever it gets to it: not a transaction of the claim.
                return transact(doing, work)
            statements.transactions += 1

            class Watched:
                def __init__(self, session: Any) -> None:
                    self.session = session

                def execute(self, query: str, params: Any) -> Any:
                    cursor = self.session.execute(query, params)
                    if not query.lstrip().upper().startswith("SELECT"):
                        statements.ran.append((query, dict(params)))
                        return cursor
                    found = cursor.fetchall()
                    statements._fetched(query, params, found)
                    return _Fetched(found, cursor)

            return transact(doing, lambda session: work(Watched(session)))

        dialect.read, dialect.transact = counted_read, counted_transact
        self._restore = (dialect, read, transact)
        return self

    def __exit__(self, *exc: object) -> None:
        dialect, read, transact = self._restore
        dialect.read, dialect.transact = read, transact


class _Fetched:
    def __init__(self, found: list[Any], cursor: Any) -> None:
        self._found, self._cursor = found, cursor

    def fetchall(self) -> list[Any]:
        return self._found

    @property
    def rowcount(self) -> int:
        return int(self._cursor.rowcount)


def _is_row_select(query: str) -> bool:
    return query.lstrip().upper().startswith("SELECT") and "FROM rows" in query


def _plans(target: str, ran: list[tuple[str, dict[str, Any]]]) -> list[str]:
    """The plan of each SELECT of rows that ran, explained on the store as it is now."""
    plans = []
    for query, params in ran:
        if not _is_row_select(query):
            continue
        if target.startswith("postgresql"):
            import psycopg

            with psycopg.connect(target, cursor_factory=psycopg.ClientCursor) as connection:
                explained = connection.execute("EXPLAIN " + query, params).fetchall()
            plans.append("\n".join(row[0] for row in explained))
        else:
            import sqlite3

            connection = sqlite3.connect(target)
            try:
                explained = connection.execute("EXPLAIN QUERY PLAN " + query, params).fetchall()
            finally:
                connection.close()
            plans.append("\n".join(row[3] for row in explained))
    return plans


def test_a_claim_behind_unclaimable_work_reads_one_range_and_none_of_that_work(store, target):
    _backlog(store)
    wanted = store.create(make_request(idempotency_key="email", priority=0))
    with Statements(store) as statements:
        claim = store.claim_next("t", "app", "w", CAPABILITIES, now=11)
    assert claim is not None and claim.workload_id == wanted.workload_id
    # Read: the definition, the two groups' heads, a group's first row when this process
    # has not seen the group before, and the claimable group's one candidate.
    backlog = set(statements.documents) - {wanted.workload_id}
    assert len(backlog) <= 1, backlog  # at most the backlog group's first row, once
    assert statements.rows <= 7, statements.rows
    with Statements(store) as again:
        assert store.claim_next("t", "app", "w", CAPABILITIES, now=11) is None
    assert again.documents == []  # both groups remembered: only their heads are sought
    assert again.rows == 2  # the definition and the backlog's group; the claimed work left
    plans = _plans(target, statements.ran)
    # The application's aging period (no row here) is one lookup by the primary key's
    # columns: the planner may take any index led by the collection for a collection it
    # has seen no row of. It never scans (below); the reads of work all use rows_ready.
    assert plans and all(
        "rows_ready" in plan or "pkey" in plan or "autoindex" in plan
        for plan in plans
        if "'system_claim_aging'" not in plan
    ), plans
    assert not any(re.search(r"\bSCAN\b|Seq Scan", plan) for plan in plans), plans
    # The claimable range is read by equality on every column before the claim order.
    selects = [q for q, _ in statements.ran if _is_row_select(q)]
    [ranged] = [p for q, p in zip(selects, plans, strict=True) if "claim_group =" in q]
    assert "rows_ready" in ranged


def test_a_claim_with_nothing_it_may_take_opens_no_write_transaction(store):
    _backlog(store)
    revision = store.db.current_revision()
    with Statements(store) as statements:
        assert store.claim_next("t", "app", "w", CAPABILITIES, now=11) is None
    assert statements.transactions == 0  # no write lock taken, nothing written or logged
    assert statements.rows <= 3  # the definition, the backlog's group, its first row once
    assert store.db.current_revision() == revision


def test_another_tenant_admits_while_a_claim_walks_a_backlog(store, monkeypatch):
    # The walk runs outside the write transaction: an admission made while it is under
    # way commits at once. (Were the claim holding the write lock, the admission would
    # wait for it, and the claim waits for the admission: the handshake times out.)
    _backlog(store)
    wanted = store.create(make_request(idempotency_key="email", priority=0))
    walking, admitted = threading.Event(), threading.Event()
    handshakes: list[bool] = []
    accepted = claiming.group_accepted

    def slow_walk(*args: Any) -> bool:
        if not walking.is_set():
            walking.set()
            handshakes.append(admitted.wait(timeout=20))
        return accepted(*args)

    monkeypatch.setattr(claiming, "group_accepted", slow_walk)
    claims: list[Any] = []
    claimer = threading.Thread(
        target=lambda: claims.append(store.claim_next("t", "app", "w", CAPABILITIES, now=11))
    )
    claimer.start()
    assert walking.wait(timeout=20)
    other = store.create(_of_tenant("other"))
    admitted.set()
    claimer.join(timeout=60)
    assert handshakes == [True]
    assert claims[0] is not None and claims[0].workload_id == wanted.workload_id
    assert store.get(other.workload_id).tenant_id == "other"


def test_a_grant_narrowed_to_an_environment_skips_other_environments_backlogs(store):
    for n in range(BACKLOG // 3):
        store.create(
            make_request(idempotency_key=f"staging-{n}", environment="staging", priority=9)
        )
    wanted = store.create(make_request(idempotency_key="prod", priority=0))
    with Statements(store) as statements:
        claim = store.claim_next("t", "app", "w", CAPABILITIES, now=11, environments=["production"])
    assert claim is not None and claim.workload_id == wanted.workload_id
    assert len(set(statements.documents) - {wanted.workload_id}) <= 1


def _stored_group(target: str, key: str) -> str | None:
    """The claim_group column of a row, as the database holds it."""
    query = "SELECT claim_group FROM rows WHERE key = "
    if target.startswith("postgresql"):
        import psycopg

        with psycopg.connect(target) as connection:
            found = connection.execute(query + "%s", (key,)).fetchall()
    else:
        import sqlite3

        connection = sqlite3.connect(target)
        try:
            found = connection.execute(query + "?", (key,)).fetchall()
        finally:
            connection.close()
    [(group,)] = found
    return group  # type: ignore[no-any-return]


def test_work_leaves_its_partition_when_it_leaves_ready_and_rejoins_on_retry(store, target):
    created = store.create(make_request())
    group = claim_group("production", CAPABILITIES)
    assert _stored_group(target, created.workload_id) == group
    claim = store.claim_next("t", "app", "w", CAPABILITIES, now=11)
    assert claim is not None
    assert _stored_group(target, created.workload_id) is None
    store.fail(
        created.workload_id, claim.claim_id, "w", claim.fencing_token, "timeout", "slow", now=12
    )
    assert store.get(created.workload_id).state is WorkloadState.READY
    assert _stored_group(target, created.workload_id) == group


def test_several_groups_a_worker_may_take_are_claimed_in_one_claim_order(store):
    # Two capability sets the worker holds both: their ranges are merged by priority and
    # age, as if they were one.
    held = {"email:send", "sms:send"}
    order = []
    for n, (caps, priority) in enumerate([({"email:send"}, 5), ({"sms:send"}, 9),
                                          ({"email:send"}, 7), ({"sms:send"}, 1)]):  # fmt: skip
        made = store.create(
            make_request(idempotency_key=f"m{n}", capability_snapshot=caps, priority=priority)
        )
        order.append((priority, made.workload_id))
    claimed = store.claim_many("t", "app", "w", held, 4, now=11)
    assert [c.workload_id for c in claimed] == [wid for _, wid in sorted(order, reverse=True)]


def test_past_the_walk_s_bound_the_claim_still_finds_claimable_work(store, monkeypatch):
    # More groups than a walk may seek: the claim reads the ready rows in claim order
    # instead, and still finds the one it may take behind them.
    from feltdb.storage import partitions as storage_partitions

    for n in range(6):
        store.create(
            make_request(idempotency_key=f"x{n}", capability_snapshot={f"x:{n}"}, priority=9)
        )
    wanted = store.create(make_request(idempotency_key="mine", priority=0))
    monkeypatch.setattr(storage_partitions, "MAX_GROUPS_WALKED", 1)
    claim = store.claim_next("t", "app", "w", CAPABILITIES, now=11)
    assert claim is not None and claim.workload_id == wanted.workload_id


# --- the groups, and what is remembered of them (pure) ---------------------------------


def test_a_group_is_one_label_per_environment_and_capability_set():
    assert claim_group("prod", ["b", "a"]) == claim_group("prod", {"a", "b"})
    labels = {
        claim_group("prod", ["a"]),
        claim_group("prod", ["a", "b"]),
        claim_group("staging", ["a"]),
        claim_group("prod", []),
        claim_group("prod", ["a,b"]),
    }
    assert len(labels) == 5
    assert all(label.startswith("c1:") and len(label) == 35 for label in labels)


def _row(environment: str, capabilities: list[str]) -> StoredRow:
    document = {"environment": environment, "capability_snapshot": capabilities}
    return StoredRow("work", "k", 1, 1, {**document, "__version": 1})


def test_a_group_is_accepted_by_its_needs_read_once():
    group = claim_group("prod", ["sms:send", "email:send"])
    reads: list[int] = []

    def sample() -> StoredRow:
        reads.append(1)
        return _row("prod", ["email:send", "sms:send"])

    assert not group_accepted(group, sample, frozenset({"email:send"}), None)
    assert group_accepted(group, sample, frozenset({"email:send", "sms:send", "x"}), None)
    assert not group_accepted(
        group, sample, frozenset({"email:send", "sms:send"}), frozenset({"dev"})
    )
    assert group_accepted(group, sample, frozenset({"email:send", "sms:send"}), frozenset({"prod"}))
    assert reads == [1]  # remembered after the first


def test_a_group_whose_needs_cannot_be_known_is_read_and_not_remembered():
    held = frozenset({"email:send"})
    assert group_accepted("unsorted", lambda: pytest.fail("not sampled"), held, None)
    stale = claim_group(f"env-{uuid.uuid4()}", ["sms:send"])
    reads: list[int] = []

    def other_needs() -> StoredRow:
        reads.append(1)
        return _row("prod", ["email:send"])  # its own needs make another group's digest

    assert group_accepted(stale, other_needs, held, None)
    assert group_accepted(stale, other_needs, held, None)
    assert reads == [1, 1]
    assert group_accepted(claim_group("gone", ["a"]), lambda: None, held, None)


def test_what_is_remembered_of_groups_is_bounded():
    remembered = partitions._Remembered()
    for n in range(MAX_GROUPS_REMEMBERED + 50):
        group = claim_group("prod", [f"cap-{n}"])
        assert remembered.needs(group, lambda n=n: _row("prod", [f"cap-{n}"])) is not None
    assert len(remembered._needs) == MAX_GROUPS_REMEMBERED
    assert claim_group("prod", ["cap-0"]) not in remembered._needs  # the oldest went first


def test_a_row_an_older_writer_left_in_a_group_is_passed_over(store):
    # A writer of an older release claims without clearing the group column, so the row
    # stays in rows_ready: a claim neither takes it nor times it out from the claim path.
    created = store.create(make_request(timeouts=WorkloadTimeouts(claim_ms=1000)))
    assert store.claim_next("t", "app", "w", CAPABILITIES, now=11) is not None
    left = dataclasses.replace(
        row_index(store.get(created.workload_id)),
        claim_group=claim_group("production", CAPABILITIES),
    )
    assert store.db.update_index(DURABLE_WORK_COLLECTION, created.workload_id, left)
    revision = store.db.current_revision()
    assert store.claim_next("t", "app", "w2", CAPABILITIES, now=50) is None
    assert store.get(created.workload_id).state is WorkloadState.CLAIMED
    assert store.db.current_revision() == revision


def test_a_claim_behind_work_waiting_on_dependencies_reads_each_of_it_once(store):
    # Work it may take but must not yet (its dependency has not succeeded) is read, and
    # passed over, page by page: each page starts where the last ended, so no row is read
    # twice however deep the backlog (an offset read every row before it again, page
    # after page: 5,000 such rows took a claim 1.2 s, all of it holding the write lock).
    gate = store.create(make_request(idempotency_key="gate", definition_id="gate-def"))
    waiting = [
        store.create(
            make_request(
                idempotency_key=f"after-gate-{n}",
                priority=100,
                dependencies=[{"workload_id": gate.workload_id}],
            )
        ).workload_id
        for n in range(3 * claiming_batch() + 5)
    ]
    wanted = store.create(make_request(idempotency_key="free", priority=0))
    with Statements(store) as statements:
        claim = store.claim_next("t", "app", "w", CAPABILITIES, now=11, definitions={"send"})
    assert claim is not None and claim.workload_id == wanted.workload_id
    read = [key for key in statements.documents if key in set(waiting)]
    # Every one read, none twice but the group's first row, which the walk samples once.
    assert set(read) == set(waiting)
    assert len(read) <= len(waiting) + 1, len(read)
    pages = [q for q, _ in statements.ran if "claim_group =" in q and "priority" in q]
    assert any("priority =" in q for q in pages) and any("priority <" in q for q in pages)
    assert store.get(waiting[0]).state is WorkloadState.READY  # passed over, untouched
    # The dependency they all wait on is read once a page, not once a candidate (a first
    # page of one candidate, as many as the claim wants, then pages of a batch).
    pages_read = len(waiting) // claiming_batch() + 2
    assert statements.documents.count(gate.workload_id) <= pages_read


def claiming_batch() -> int:
    from feltdb.work.claim_loop import CANDIDATE_BATCH

    return CANDIDATE_BATCH


def _waiting_on(store: WorkloadStore, gate: Any, count: int, **dependency: Any) -> list[str]:
    """``count`` high-priority workloads waiting on ``gate`` (``dependency``: the rest of
    the dependency, e.g. its required state)."""
    return [
        store.create(
            make_request(
                idempotency_key=f"after-{gate.workload_id}-{n}",
                priority=100,
                dependencies=[{"workload_id": gate.workload_id, **dependency}],
            )
        ).workload_id
        for n in range(count)
    ]


def _set_aside(store: WorkloadStore, key: str) -> tuple[str | None, str | None]:
    """What the row of ``key`` waits on and for (``(None, None)``: it is not set aside)."""
    return waiting_on(store.db.target, DURABLE_WORK_COLLECTION, key)


def test_work_waiting_on_a_dependency_is_set_aside_and_no_claim_reads_it_again(store, target):
    gate = store.create(make_request(idempotency_key="gate", definition_id="gate-def"))
    waiting = _waiting_on(store, gate, 3 * claiming_batch() + 5)
    first = store.create(make_request(idempotency_key="free-1", priority=0))
    claim = store.claim_next("t", "app", "w", CAPABILITIES, now=11, definitions={"send"})
    assert claim is not None and claim.workload_id == first.workload_id
    assert {_set_aside(store, key) for key in waiting} == {(gate.workload_id, "SUCCEEDED")}
    assert store.get(waiting[0]).state is WorkloadState.READY  # its document is untouched
    # Work it may not yet take is in no range a claim reads: the next claim reads one row.
    second = store.create(make_request(idempotency_key="free-2", priority=0))
    with Statements(store) as statements:
        claim = store.claim_next("t", "app", "w", CAPABILITIES, now=12, definitions={"send"})
    assert claim is not None and claim.workload_id == second.workload_id
    assert not set(statements.documents) & set(waiting), "none of the waiting work read"
    assert statements.rows <= 4, statements.rows
    plans = _plans(target, statements.ran)
    assert not any(re.search(r"\bSCAN\b|Seq Scan", plan) for plan in plans), plans
    selects = [q for q, _ in statements.ran if _is_row_select(q)]
    [ranged] = [p for q, p in zip(selects, plans, strict=True) if "claim_group =" in q]
    assert "rows_ready" in ranged
    with Statements(store) as idle:
        assert store.claim_next("t", "app", "w", CAPABILITIES, now=13, definitions={"send"}) is None
    assert idle.documents == [] and idle.transactions == 0


def test_the_commit_that_finishes_the_dependency_releases_what_waits_on_it(store):
    gate = store.create(make_request(idempotency_key="gate", definition_id="gate-def"))
    waiting = _waiting_on(store, gate, 5)
    assert store.claim_next("t", "app", "w", CAPABILITIES, now=11, definitions={"send"}) is None
    assert _set_aside(store, waiting[0]) == (gate.workload_id, "SUCCEEDED")
    held = store.claim(gate.workload_id, "w", CAPABILITIES, now=12)
    store.start(gate.workload_id, held.claim_id, "w", held.fencing_token, now=12)
    assert _set_aside(store, waiting[0]) == (gate.workload_id, "SUCCEEDED"), "not yet"
    with Statements(store) as statements:
        store.complete(gate.workload_id, held.claim_id, "w", held.fencing_token, "r", {}, now=13)
    assert statements.transactions == 1, "released in the completion's own transaction"
    assert {_set_aside(store, key) for key in waiting} == {(None, None)}
    claimed = store.claim_work("t", "app", "w", CAPABILITIES, 10, now=14, definitions={"send"})
    assert sorted(c.workload.workload_id for c in claimed) == sorted(waiting)


def test_a_release_is_in_the_dependency_s_own_transaction(store):
    gate = store.create(make_request(idempotency_key="gate", definition_id="gate-def"))
    [after] = _waiting_on(store, gate, 1)
    assert store.claim_next("t", "app", "w", CAPABILITIES, now=11, definitions={"send"}) is None
    with Statements(store) as statements:
        store.cancel(gate.workload_id, "human:op", now=12)
    # Waiting for SUCCEEDED, on work now cancelled for good: released in the one
    # transaction, so that the next claim reads it again and ends it rather than wait.
    assert statements.transactions == 1
    assert _set_aside(store, after) == (None, None)
    assert store.claim_next("t", "app", "w", CAPABILITIES, now=13, definitions={"send"}) is None
    assert store.get(after).state is WorkloadState.DEAD_LETTER


def test_a_write_of_work_set_aside_puts_it_back_where_claims_read(store):
    gate = store.create(make_request(idempotency_key="gate", definition_id="gate-def"))
    [after] = _waiting_on(store, gate, 1)
    assert store.claim_next("t", "app", "w", CAPABILITIES, now=11, definitions={"send"}) is None
    store.timeout(after, "human:op", now=12)  # an operator's timeout: retried by policy
    assert store.get(after).state is WorkloadState.READY
    assert _set_aside(store, after) == (None, None)
    # Read again by the next claim, still waiting: set aside again.
    assert store.claim_next("t", "app", "w", CAPABILITIES, now=13, definitions={"send"}) is None
    assert _set_aside(store, after) == (gate.workload_id, "SUCCEEDED")


def test_work_awaiting_a_state_its_dependency_only_passes_through_is_not_set_aside(store):
    gate = store.create(make_request(idempotency_key="gate", definition_id="gate-def"))
    [after] = _waiting_on(store, gate, 1, required_state="RUNNING")
    assert store.claim_next("t", "app", "w", CAPABILITIES, now=11, definitions={"send"}) is None
    assert _set_aside(store, after) == (None, None)  # checked at each claim instead


def test_on_postgres_work_is_not_set_aside_while_its_dependency_is_being_written(new_pg_url):
    # The row waited on, held by a writer: its state may be changing right now, and were
    # the work set aside, that writer's release (which ran before) would never see it. So
    # a row being written counts as arriving: nothing is set aside, and nothing waits.
    import psycopg

    url = new_pg_url("race")
    with WorkloadStore.open(url) as store:
        gate = store.create(make_request(idempotency_key="gate", definition_id="gate-def"))
        [after] = _waiting_on(store, gate, 1)
        with psycopg.connect(url) as writer:
            writer.execute(
                "SELECT 1 FROM rows WHERE collection = %s AND key = %s FOR UPDATE",
                [DURABLE_WORK_COLLECTION, gate.workload_id],
            )
            claim = store.claim_next("t", "app", "w", CAPABILITIES, now=11, definitions={"send"})
            assert claim is None
            assert _set_aside(store, after) == (None, None)
            writer.rollback()
        assert store.claim_next("t", "app", "w", CAPABILITIES, now=12, definitions={"send"}) is None
        assert _set_aside(store, after) == (gate.workload_id, "SUCCEEDED")


def test_a_claim_reads_only_as_many_candidates_as_it_may_take(store):
    for n in range(10):
        store.create(make_request(idempotency_key=f"ready-{n}"))
    assert store.claim_next("t", "app", "w", CAPABILITIES, now=11) is not None  # groups seen
    with Statements(store) as statements:
        claim = store.claim_next("t", "app", "w", CAPABILITIES, now=12)
    assert claim is not None and statements.documents == [claim.workload_id]
    with Statements(store) as statements:
        claimed = store.claim_work("t", "app", "w", CAPABILITIES, 3, now=13)
    assert len(claimed) == 3 and len(statements.documents) == 3


def test_past_the_walk_s_bound_work_set_aside_never_hides_work_behind_it(store, monkeypatch):
    # Read in claim order by offset: the rows set aside leave what the next page counts,
    # so an offset counting them would skip as many rows nobody has looked at.
    from feltdb.storage import partitions as storage_partitions

    gate = store.create(make_request(idempotency_key="gate", definition_id="gate-def"))
    _waiting_on(store, gate, 3 * claiming_batch() + 4)
    free = [
        store.create(make_request(idempotency_key=f"free-{n}", priority=50)).workload_id
        for n in range(5)
    ]
    monkeypatch.setattr(storage_partitions, "MAX_GROUPS_WALKED", 0)
    for _ in range(len(free)):
        claim = store.claim_next("t", "app", "w", CAPABILITIES, now=11, definitions={"send"})
        assert claim is not None and claim.workload_id in free
