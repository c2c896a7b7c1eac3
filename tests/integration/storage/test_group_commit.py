"""Group commit: concurrent single commits written in shared transactions, each keeping its
own guard, refusal and acknowledgement (issue 12, point 2), on both backends.

A gate in front of the real database holds a first transaction open until every test
thread has queued its plan, so that the next group holds all of them: the grouping is
then certain, not a matter of timing.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pytest
from support.factories import CAPABILITIES, make_request

from feltdb import WorkloadStore
from feltdb.errors import ErrorCode, WorkloadError
from feltdb.records.workload import DURABLE_WORK_COLLECTION
from feltdb.storage import Commit, Database, Mutation, Precondition, StorageConflict
from feltdb.storage.base import PlannedCommit
from feltdb.storage.group_commit import GroupCommit

THREADS = 8
NOW = 11


class HeldFirstGroup:
    """``db``, whose first ``commit_many`` once armed waits until ``release`` is set."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self.release = threading.Event()
        self.held = threading.Event()
        self.armed = False
        self.groups: list[int] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.db, name)

    def arm(self) -> None:
        self.armed = True
        self.groups.clear()

    def commit_many(self, plans: Sequence[PlannedCommit]) -> list[Commit | StorageConflict]:
        if self.armed and not self.held.is_set():
            self.held.set()
            assert self.release.wait(30)
        self.groups.append(len(plans))
        return self.db.commit_many(plans)


@pytest.fixture
def database(new_target: Callable[..., str]) -> Iterator[Database]:
    store = WorkloadStore.open(new_target())
    yield store.db
    store.close()


def plan(key: str, *, version: int | None, value: Any = 1) -> PlannedCommit:
    guard = Precondition("things", key, require_absent=version is None, expected_version=version)
    return PlannedCommit(
        f"op_{key}_{value}", [Mutation("things", key, {"value": value})], [guard], None
    )


def in_one_group(
    group: GroupCommit, gate: HeldFirstGroup, calls: Sequence[Callable[[], Any]]
) -> list[Any]:
    """Run ``calls`` on threads that all queue behind a held first transaction; answers
    (or raised errors) in order.
    """
    answers: list[Any] = [None] * len(calls)
    gate.arm()
    first = threading.Thread(target=group.commit, args=(plan("first", version=None),))
    first.start()
    assert gate.held.wait(30)

    def run(n: int) -> None:
        try:
            answers[n] = calls[n]()
        except WorkloadError as error:
            answers[n] = error

    threads = [threading.Thread(target=run, args=(n,)) for n in range(len(calls))]
    for thread in threads:
        thread.start()
    while len(group._queue) < len(calls):  # the first plan left the queue as it was written
        threading.Event().wait(0.005)
    gate.release.set()
    for thread in (first, *threads):
        thread.join(30)
    return answers


def test_eight_threads_each_get_their_own_answer_from_one_transaction(
    database: Database,
) -> None:
    gate = HeldFirstGroup(database)
    group = GroupCommit(gate)  # type: ignore[arg-type]
    for key in ("a", "b", "c", "d"):
        database.commit("seed_" + key, [Mutation("things", key, {"value": 0})])
    # Two threads per key, both guarded by the version they read (1): in one transaction
    # the first plan of a key wins and the second loses its guard, as if serialized.
    calls = [
        (lambda key=key, n=n: group.commit(plan(key, version=1, value=n)))
        for n, key in enumerate(["a", "b", "c", "d", "a", "b", "c", "d"])
    ]
    answers = in_one_group(group, gate, calls)
    assert gate.groups == [1, THREADS]  # the held first commit, then all eight together
    won = [a for a in answers if isinstance(a, Commit)]
    lost = [a for a in answers if isinstance(a, WorkloadError)]
    assert len(won) == 4 and len(lost) == 4
    assert all(e.code == ErrorCode.WORKLOAD_CONFLICT for e in lost)
    for key in ("a", "b", "c", "d"):
        row = database.get_row("things", key)
        assert row is not None and row.version == 2
        winners = [a for a in won if a.rows[0].key == key]
        assert len(winners) == 1 and row.document["value"] == winners[0].rows[0].document["value"]
    # Each plan is logged as its own transaction, the losers not at all.
    logged = [t for t in database.committed_transactions_after(0) if t.keys[0][:7] == "things/"]
    assert len(logged) == 4 + 1 + 4  # the seeds, the first, the winners


def test_an_invalid_plan_in_a_group_refuses_only_its_own_thread(database: Database) -> None:
    gate = HeldFirstGroup(database)
    group = GroupCommit(gate)  # type: ignore[arg-type]
    bad = PlannedCommit("op_bad", [Mutation("things", "bad", {"value": {1, 2}})], [], None)
    calls: list[Callable[[], Any]] = [
        (lambda key=key: group.commit(plan(key, version=None))) for key in "abcdefg"
    ]
    calls.insert(3, lambda: group.commit(bad))
    answers = in_one_group(group, gate, calls)
    refused = answers.pop(3)
    assert isinstance(refused, WorkloadError) and refused.code == ErrorCode.WORKLOAD_INVALID
    assert all(isinstance(a, Commit) for a in answers)
    assert database.get_row("things", "bad") is None
    assert all(database.get_row("things", key) is not None for key in "abcdefg")


def test_store_operations_of_eight_threads_on_one_workload(
    new_target: Callable[..., str],
) -> None:
    with WorkloadStore.open(new_target()) as plain:
        gate = HeldFirstGroup(plain.db)
        store = WorkloadStore(gate)  # type: ignore[arg-type]
        assert store.unit.group is not None
        workloads = [
            store.admit(make_request(idempotency_key=f"k{n}"))[0] for n in range(THREADS // 2)
        ]
        claims = [
            store.claim(w.workload_id, "worker:w", CAPABILITIES, NOW, 60_000) for w in workloads
        ]
        # Each claimed workload is started by two threads at once, both having read the
        # same version: one start commits, the other is refused WORKLOAD_CONFLICT, and
        # the history holds exactly one start.
        calls = [
            (lambda c=c: store.start(c.workload_id, c.claim_id, "worker:w", c.fencing_token, NOW))
            for c in claims + claims
        ]
        answers = in_one_group(store.unit.group, gate, calls)
        assert gate.groups == [1, THREADS]
        refused = [a for a in answers if isinstance(a, WorkloadError)]
        assert len(refused) == THREADS // 2
        assert {e.code for e in refused} <= {
            ErrorCode.WORKLOAD_CONFLICT,
            ErrorCode.WORKLOAD_TRANSITION_DENIED,
        }
        for workload in workloads:
            done = store.get(workload.workload_id)
            assert done.state.value == "RUNNING"
            starts = [e for e in done.execution_history if e.to.value == "RUNNING"]
            assert len(starts) == 1
            sequences = [e.sequence for e in done.execution_history]
            assert sequences == list(range(1, len(sequences) + 1))
        row = plain.db.get_row(DURABLE_WORK_COLLECTION, workloads[0].workload_id)
        assert row is not None


class FailingAlone(HeldFirstGroup):
    """A gate whose database fails outright (not a WorkloadError) on one plan written alone:
    an untranslated driver error, say.
    """

    def commit_many(self, plans: Sequence[PlannedCommit]) -> list[Commit | StorageConflict]:
        if len(plans) == 1 and plans[0].operation_id == "op_bad":
            raise RuntimeError("driver error")
        return super().commit_many(plans)


def test_a_failure_while_retrying_plans_alone_answers_every_other_plan(
    database: Database,
) -> None:
    gate = FailingAlone(database)
    group = GroupCommit(gate)  # type: ignore[arg-type]
    bad = PlannedCommit("op_bad", [Mutation("things", "bad", {"value": {1, 2}})], [], None)
    calls: list[Callable[[], Any]] = [lambda: group.commit(bad)]
    calls += [(lambda key=key: group.commit(plan(key, version=None))) for key in "abc"]
    answers: list[Any] = [None] * len(calls)

    def run(n: int) -> None:
        try:
            answers[n] = calls[n]()
        except Exception as error:  # the leader's RuntimeError too
            answers[n] = error

    gate.arm()
    first = threading.Thread(target=group.commit, args=(plan("first", version=None),))
    first.start()
    assert gate.held.wait(30)
    threads = [threading.Thread(target=run, args=(n,)) for n in range(len(calls))]
    for thread in threads:
        thread.start()
    while len(group._queue) < len(calls):
        threading.Event().wait(0.005)
    gate.release.set()
    for thread in (first, *threads):
        thread.join(30)
    # The group was refused (the set is not JSON), its plans retried alone, and the retry of
    # the bad one failed outright: every plan not yet written is answered as what it is, a
    # commit that may not have happened, never left without an answer or reported done.
    assert all(a is not None for a in answers)
    written = [key for key in "abc" if database.get_row("things", key) is not None]
    for key, answer in zip("abc", answers[1:], strict=True):
        if key in written:
            assert isinstance(answer, Commit)
        else:
            assert isinstance(answer, WorkloadError)
            assert answer.code == ErrorCode.WORKLOAD_STORAGE_FAILURE
    assert not group._leading and not group._queue
    assert isinstance(group.commit(plan("later", version=None)), Commit)


def test_a_thread_interrupted_while_waiting_leaves_the_store_working(
    database: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    import feltdb.storage.group_commit as module

    class InterruptedWait(threading.Event):
        def wait(self, timeout: float | None = None) -> bool:
            if threading.current_thread().name == "interrupted":
                raise KeyboardInterrupt
            return super().wait(timeout)

    gate = HeldFirstGroup(database)
    group = GroupCommit(gate)  # type: ignore[arg-type]
    monkeypatch.setattr(module.threading, "Event", InterruptedWait)
    gate.arm()
    first = threading.Thread(target=group.commit, args=(plan("first", version=None),))
    first.start()
    assert gate.held.wait(30)
    interrupted: list[BaseException] = []

    def wait_and_be_interrupted() -> None:
        try:
            group.commit(plan("lost", version=None))
        except KeyboardInterrupt as error:
            interrupted.append(error)

    follower = threading.Thread(target=wait_and_be_interrupted, name="interrupted")
    follower.start()
    follower.join(30)
    gate.release.set()
    first.join(30)
    assert interrupted and not group._queue and not group._leading
    assert database.get_row("things", "lost") is None  # its plan left with its thread
    done: list[Any] = []
    later = threading.Thread(target=lambda: done.append(group.commit(plan("later", version=None))))
    later.start()
    later.join(30)
    assert done and isinstance(done[0], Commit)
