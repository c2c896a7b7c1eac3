"""Batches: admit_many, complete_many, heartbeat_many (docs/api.md, "Routing, scope and batches").

Each item of a batch answers what the single call would have answered, so each test runs
the same items through a batch on one store and through single calls, in order, on
another store in the same state, and compares the answers item by item.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import msgspec
import pytest
from support.factories import CAPABILITIES, make_request

from feltdb import WorkloadDependency, WorkloadError, WorkloadState, WorkloadStore
from feltdb.work.batches import Completion, Heartbeat
from feltdb.work.changes import Operation, WorkloadChange
from feltdb.work.identities import workload_id_for


@pytest.fixture
def stores(new_target: Callable[..., str]) -> Iterator[tuple[WorkloadStore, WorkloadStore]]:
    """Two stores in the same state: one for the batch, one for the single calls."""
    with (
        WorkloadStore.open(new_target("batch")) as batch,
        WorkloadStore.open(new_target("single")) as single,
    ):
        yield batch, single


def outcome(answer: Any) -> Any:
    """An answer as compared: a refusal by its code, a record by its JSON."""
    if isinstance(answer, WorkloadError):
        return ("refused", answer.code)
    if isinstance(answer, tuple):
        return tuple(outcome(part) for part in answer)
    return answer.to_json() if hasattr(answer, "to_json") else answer


def singly(call: Callable[[Any], Any], items: list[Any]) -> list[Any]:
    answers = []
    for item in items:
        try:
            answers.append(call(item))
        except WorkloadError as refusal:
            answers.append(refusal)
    return answers


def test_an_empty_batch_answers_nothing_and_commits_nothing(stores):
    store, _ = stores
    revision = store.db.current_revision()
    assert store.admit_many([]) == []
    assert store.complete_many([], now=11) == []
    assert store.heartbeat_many([], now=11) == []
    assert store.db.current_revision() == revision


def test_admit_many_answers_each_request_as_admit_would(stores):
    batch_store, single_store = stores
    first = make_request(idempotency_key="a")
    parent = single_store.create(make_request(idempotency_key="probe"))  # learn an id's shape
    requests = [
        first,
        make_request(idempotency_key="a"),  # the same request again: a replay
        make_request(idempotency_key="a", input={"other": True}),  # the key reused
        make_request(idempotency_key="s", input={"password": "hunter2"}),  # a secret
        make_request(idempotency_key="b", priority=3),
        make_request(
            idempotency_key="child",
            dependencies=[WorkloadDependency(workload_id=parent.workload_id)],
        ),  # on work both stores hold
    ]
    batch_store.create(make_request(idempotency_key="probe"))
    answers = batch_store.admit_many(requests)
    expected = singly(single_store.admit, requests)
    assert [outcome(a) for a in answers] == [outcome(e) for e in expected]
    assert [outcome(a)[0] if isinstance(a, WorkloadError) else a[1] for a in answers] == [
        True, False, "refused", "refused", True, True,
    ]  # fmt: skip
    assert sorted(w.workload_id for w in batch_store.list("t", "app")) == sorted(
        w.workload_id for w in single_store.list("t", "app")
    )


def test_a_request_may_depend_on_one_earlier_in_the_same_batch(stores):
    store, _ = stores
    parent = make_request(idempotency_key="parent")
    parent_id = workload_id_for("t", "app", parent.requested_by, "parent")
    child = make_request(
        idempotency_key="child", dependencies=[WorkloadDependency(workload_id=parent_id)]
    )
    orphan = make_request(
        idempotency_key="orphan", dependencies=[WorkloadDependency(workload_id="workload_x")]
    )
    answers = store.admit_many([parent, child, orphan])
    assert [isinstance(answer, WorkloadError) for answer in answers] == [False, False, True]
    assert answers[2].details == {"fields": ["dependencies.0.workload_id"]}
    claim = store.claim_next("t", "app", "worker:w", CAPABILITIES, now=11)
    assert claim is not None and claim.workload_id == parent_id, "the child waits for it"


def completed_singly(store: WorkloadStore, completions: list[Completion]) -> list[Any]:
    """Each completion's answer from ``complete``, called once each, in order, at now=13."""
    return singly(lambda item: store.complete(
        item.workload_id, item.claim_id, item.worker, item.fencing_token, item.result_id,
        item.output, item.artifacts, item.schema_version, now=13,
    ), completions)  # fmt: skip


def running(store: WorkloadStore, keys: list[str]) -> list[Any]:
    """One claimed and started workload per key, in the store's order of admission."""
    claims = []
    for key in keys:
        workload = store.create(make_request(idempotency_key=key))
        claim = store.claim(workload.workload_id, "worker:w", CAPABILITIES, now=11, lease_ms=60_000)
        store.start(workload.workload_id, claim.claim_id, "worker:w", claim.fencing_token, now=12)
        claims.append(claim)
    return claims


def test_complete_many_answers_each_completion_as_complete_would(stores):
    batch_store, single_store = stores
    claims = running(batch_store, ["a", "b", "c"])
    assert [c.to_json() for c in running(single_store, ["a", "b", "c"])] == [
        c.to_json() for c in claims
    ]
    a, b, c = claims

    def done(claim: Any, result_id: str, token: int | None = None) -> Completion:
        fence = claim.fencing_token if token is None else token
        return Completion(
            claim.workload_id, claim.claim_id, "worker:w", fence, result_id, {"ok": 1}
        )

    completions = [
        done(a, "r-a"),
        done(a, "r-a"),  # the same report again: the recorded result
        done(b, "r-a"),  # another workload's result id
        done(b, "r-b", token=99),  # a stale fence
        done(b, "r-b"),
        Completion("workload_missing", "x", "worker:w", 1, "r-x", {}),
        done(c, "r-c"),
    ]
    answers = batch_store.complete_many(completions, now=13)
    expected = completed_singly(single_store, completions)
    assert [outcome(x) for x in answers] == [outcome(x) for x in expected]
    codes = [x.code if isinstance(x, WorkloadError) else "ok" for x in answers]
    assert codes == [
        "ok", "ok", "WORKLOAD_RESULT_DUPLICATE", "WORKLOAD_STALE_FENCE", "ok",
        "WORKLOAD_NOT_FOUND", "ok",
    ]  # fmt: skip
    for claim in claims:
        assert batch_store.get(claim.workload_id).state is WorkloadState.SUCCEEDED


def test_complete_many_knows_the_result_ids_already_committed_as_complete_would(stores):
    # Result ids committed before the batch, read ahead in one statement: another
    # workload's is refused, and the workload's own report again is replayed.
    batch_store, single_store = stores
    for store in stores:
        first, *_ = running(store, ["a", "b", "c"])
        fence = (first.workload_id, first.claim_id, "worker:w", first.fencing_token)
        store.complete(*fence, "r-a", {"ok": 1}, now=12)
    a, b, c = sorted(batch_store.list("t", "app"), key=lambda w: w.idempotency_key)

    def done(workload: Any, result_id: str) -> Completion:
        attempt = workload.attempts[-1]
        return Completion(
            workload.workload_id, attempt.claim_id, "worker:w", attempt.fencing_token,
            result_id, {"ok": 1},
        )  # fmt: skip

    completions = [done(b, "r-a"), done(a, "r-a"), done(c, "r-c")]
    answers = batch_store.complete_many(completions, now=13)
    expected = completed_singly(single_store, completions)
    assert [outcome(x) for x in answers] == [outcome(x) for x in expected]
    codes = [x.code if isinstance(x, WorkloadError) else "ok" for x in answers]
    assert codes == ["WORKLOAD_RESULT_DUPLICATE", "ok", "ok"]


def test_heartbeat_many_extends_each_lease_as_heartbeat_would(stores):
    batch_store, single_store = stores
    claims = running(batch_store, ["a", "b"])
    running(single_store, ["a", "b"])
    beats = [
        Heartbeat(
            claims[0].workload_id, claims[0].claim_id, "worker:w", claims[0].fencing_token, 90_000
        ),
        Heartbeat(
            claims[1].workload_id, claims[1].claim_id, "worker:other", claims[1].fencing_token
        ),
        Heartbeat(claims[1].workload_id, claims[1].claim_id, "worker:w", claims[1].fencing_token),
        Heartbeat(
            claims[0].workload_id, claims[0].claim_id, "worker:w", claims[0].fencing_token, -1
        ),
    ]
    answers = batch_store.heartbeat_many(beats, now=20)
    expected = singly(lambda item: single_store.heartbeat(
        item.workload_id, item.claim_id, item.worker, item.fencing_token, 20, item.extend_ms
    ), beats)  # fmt: skip
    assert [outcome(x) for x in answers] == [outcome(x) for x in expected]
    assert not isinstance(answers[0], WorkloadError) and answers[0].expires_at == 20 + 90
    assert isinstance(answers[1], WorkloadError) and answers[1].code == "WORKLOAD_STALE_FENCE"
    assert isinstance(answers[3], WorkloadError) and answers[3].code == "WORKLOAD_INVALID"


def test_a_batch_tells_the_observers_of_each_committed_item(stores):
    store, _ = stores
    heard: list[WorkloadChange] = []
    store.observe(heard.append)
    answers = store.admit_many(
        [
            make_request(idempotency_key="x"),
            make_request(idempotency_key="y", input={"password": "x"}),
        ]
    )
    assert [type(a) is WorkloadError for a in answers] == [False, True]
    assert [(c.operation, c.previous) for c in heard] == [(Operation.ADMIT, None)]


def test_a_batch_holds_at_most_one_transaction_s_worth_and_says_so(stores):
    store, _ = stores
    from feltdb.work.inputs import MAX_BATCH_ITEMS

    with pytest.raises(WorkloadError) as refused:
        store.heartbeat_many([Heartbeat("w", "c", "worker:w", 1)] * (MAX_BATCH_ITEMS + 1), now=1)
    assert refused.value.code == "WORKLOAD_INVALID"
    assert refused.value.details == {"fields": ["heartbeats"]}
    with pytest.raises(WorkloadError):
        store.admit_many(make_request())  # one request, not a list of them


# ------------------------------------------------------------------ claim_many


def ready_work(store: WorkloadStore, count: int) -> None:
    for n in range(count):
        store.create(make_request(idempotency_key=f"ready-{n}", priority=n % 3))


def test_claim_many_claims_as_claim_next_would_in_a_row(stores):
    batch_store, single_store = stores
    ready_work(batch_store, 5)
    ready_work(single_store, 5)
    claims = batch_store.claim_many("t", "app", "worker:w", CAPABILITIES, 3, now=11)
    expected = [
        single_store.claim_next("t", "app", "worker:w", CAPABILITIES, now=11) for _ in range(3)
    ]
    assert [c.to_json() for c in claims] == [c.to_json() for c in expected if c is not None]
    for claim in claims:
        assert (
            batch_store.get(claim.workload_id).to_json()
            == single_store.get(claim.workload_id).to_json()
        )
    rest = batch_store.claim_many("t", "app", "worker:w", CAPABILITIES, 10, now=11)
    assert len(rest) == 2, "fewer when fewer are claimable"
    assert batch_store.claim_many("t", "app", "worker:w", CAPABILITIES, 10, now=11) == []


def test_claim_many_with_start_records_both_events_as_two_calls_would(stores):
    batch_store, single_store = stores
    ready_work(batch_store, 2)
    ready_work(single_store, 2)
    claims = batch_store.claim_many("t", "app", "worker:w", CAPABILITIES, 2, now=11, start=True)
    assert len(claims) == 2
    for claim in claims:
        single_store.claim(claim.workload_id, "worker:w", CAPABILITIES, now=11)
        single_store.start(claim.workload_id, claim.claim_id, "worker:w", claim.fencing_token, 11)
        started = batch_store.get(claim.workload_id)
        assert started.state is WorkloadState.RUNNING
        assert [e.to for e in started.execution_history][-2:] == [
            WorkloadState.CLAIMED,
            WorkloadState.RUNNING,
        ]
        assert started.to_json() == single_store.get(claim.workload_id).to_json()


def test_claim_many_settles_work_past_its_deadline_and_claims_the_next(stores):
    store, _ = stores
    from feltdb import WorkloadTimeouts

    late = store.create(
        make_request(idempotency_key="late", priority=9, timeouts=WorkloadTimeouts(queue_ms=1000))
    )
    ready_work(store, 2)
    heard: list[WorkloadChange] = []
    store.observe(heard.append)
    claims = store.claim_many("t", "app", "worker:w", CAPABILITIES, 2, now=50)
    assert len(claims) == 2 and late.workload_id not in {c.workload_id for c in claims}
    assert store.get(late.workload_id).state is WorkloadState.DEAD_LETTER
    assert sorted(c.operation for c in heard) == sorted(
        [Operation.DEADLINE, Operation.CLAIM, Operation.CLAIM]
    )


@pytest.mark.parametrize("limit", [0, -1, 1025])
def test_claim_many_takes_a_limit_of_one_to_a_batch(stores, limit):
    store, _ = stores
    with pytest.raises(WorkloadError) as refused:
        store.claim_many("t", "app", "worker:w", CAPABILITIES, limit, now=11)
    assert refused.value.code == "WORKLOAD_INVALID"


# ------------------------------------------------------------------ races with another writer


def interleaved(store: WorkloadStore, meanwhile: Callable[[], None]) -> None:
    """Make ``meanwhile`` commit between the batch's reads and its commit."""
    commit_many = store.db.commit_many

    def late(plans: Any) -> Any:
        meanwhile()
        return commit_many(plans)

    store.db.commit_many = late  # type: ignore[method-assign]


def test_two_items_on_one_workload_lose_together_to_a_writer_in_between(stores):
    store, _ = stores
    [claim] = running(store, ["a"])
    other = WorkloadStore.open(store.db.target)
    try:
        interleaved(store, lambda: other.cancel(claim.workload_id, "human:op", now=15))
        beat = Heartbeat(claim.workload_id, claim.claim_id, "worker:w", claim.fencing_token)
        answers = store.heartbeat_many([beat, beat], now=16)
    finally:
        del store.db.commit_many
        other.close()
    assert [getattr(a, "code", None) for a in answers] == ["WORKLOAD_CONFLICT"] * 2
    committed = store.get(claim.workload_id)
    assert committed.state is WorkloadState.CANCELLATION_REQUESTED, "the cancel stands"


def test_an_admission_lost_to_a_writer_in_between_converges_and_the_rest_commit(stores):
    store, _ = stores
    other = WorkloadStore.open(store.db.target)
    try:
        reused = make_request(idempotency_key="k", input={"theirs": True})
        interleaved(store, lambda: other.admit(reused))
        answers = store.admit_many(
            [
                make_request(idempotency_key="k"),
                make_request(idempotency_key="k"),  # repeats the first: stands on it
                make_request(idempotency_key="fine"),
            ]
        )
    finally:
        del store.db.commit_many
        other.close()
    codes = [a.code if isinstance(a, WorkloadError) else "created" for a in answers]
    assert codes == ["IDEMPOTENCY_KEY_REUSED", "IDEMPOTENCY_KEY_REUSED", "created"]
    assert len(store.list("t", "app")) == 2


def test_equal_result_ids_of_two_applications_in_one_batch_are_each_their_own(stores):
    store, _ = stores
    from support.factories import SIGNER

    from feltdb import ResourceScope, ResourceScopeKind

    mine = running(store, ["a"])[0]
    request = make_request(idempotency_key="theirs", application_id="other")
    grant = msgspec.structs.replace(
        request.authorization_snapshot.grant,
        **{
            "application_id": "other",
            "resources": (
                ResourceScope(kind=ResourceScopeKind.WORKLOAD, uri="flow://other/workloads/*"),
            ),
        },
    )
    request.authorization_snapshot = SIGNER.sign(grant)
    theirs = store.create(request)
    claim = store.claim(theirs.workload_id, "worker:w", CAPABILITIES, now=11, lease_ms=60_000)
    store.start(theirs.workload_id, claim.claim_id, "worker:w", claim.fencing_token, now=12)
    answers = store.complete_many(
        [
            Completion(c.workload_id, c.claim_id, "worker:w", c.fencing_token, "same-id", {})
            for c in (mine, claim)
        ],
        now=13,
    )
    assert [type(answer).__name__ for answer in answers] == ["WorkloadResult"] * 2


class CountedReads:
    """A database that counts the calls of each of its reads of rows by key or result id."""

    READS = ("get_row", "get_rows", "rows_with_result_ids")

    def __init__(self, db: Any) -> None:
        self.db = db
        self.calls: dict[str, int] = {}

    def __getattr__(self, name: str) -> Any:
        found = getattr(self.db, name)
        if name not in self.READS:
            return found

        def counted(*args: Any, **kwargs: Any) -> Any:
            self.calls[name] = self.calls.get(name, 0) + 1
            return found(*args, **kwargs)

        return counted


def test_a_batch_reads_the_work_and_result_ids_it_names_in_one_statement_each(stores):
    store, _ = stores
    counted = CountedReads(store.db)
    over = WorkloadStore(counted)  # type: ignore[arg-type]
    requests = [make_request(idempotency_key=f"k{n}", created_at=10) for n in range(20)]
    first = over.admit_many([*requests, *requests[:3]])  # three repeat a key of the batch
    # And the definition's default concurrency limit, once (then remembered a second).
    assert counted.calls == {"get_rows": 1, "get_row": 1}
    assert [created for _, created in first] == [True] * 20 + [False] * 3
    counted.calls.clear()
    again = over.admit_many(requests)  # every one already admitted: each a replay
    assert counted.calls == {"get_rows": 1}
    assert [created for _, created in again] == [False] * 20
    claimed = over.claim_work("t", "app", "w", CAPABILITIES, 20, now=11)
    assert len(claimed) == 20
    counted.calls.clear()
    beats = [
        Heartbeat(w.claim.workload_id, w.claim.claim_id, "w", w.claim.fencing_token)
        for w in claimed
    ]
    assert not any(isinstance(b, WorkloadError) for b in over.heartbeat_many(beats, now=12))
    assert counted.calls == {"get_rows": 1}
    counted.calls.clear()
    completions = [
        Completion(w.claim.workload_id, w.claim.claim_id, "w", w.claim.fencing_token, f"r{n}", n)
        for n, w in enumerate(claimed)
    ]
    # The last item records a result id an earlier item of the batch recorded: refused.
    clash = Completion(claimed[1].claim.workload_id, "claim_x", "w", 1, "r0", None)
    answers = over.complete_many([*completions, clash], now=13)
    assert counted.calls == {"get_rows": 1, "rows_with_result_ids": 1}
    assert [a.result_id for a in answers[:20]] == [f"r{n}" for n in range(20)]
    assert isinstance(answers[20], WorkloadError)
