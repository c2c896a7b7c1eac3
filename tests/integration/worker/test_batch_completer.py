"""The worker's batch completer and batched heartbeats (issue 12, point 4), on a real store
through :class:`LocalClient`: when a batch is sent (``max_items``, ``max_wait_s``, or every
running attempt waiting), that each completion is answered its own outcome only once
committed, and that a worker heartbeats all its leases in one call.
"""

from __future__ import annotations

import concurrent.futures
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from support.factories import CAPABILITIES, make_request

from feltdb import Subject, WorkloadResult, WorkloadState, WorkloadStore
from feltdb.auth.scope import Scope
from feltdb.client import CompletionItem, LocalClient
from feltdb.errors import ErrorCode, WorkloadError
from feltdb.work.claimed import ClaimedWork
from feltdb.worker import Context, Worker
from feltdb.worker.completer import BatchCompleter

FOREVER_S = 60.0  # a batch that waits this long has waited for the wrong reason


@pytest.fixture
def store(tmp_path: Path) -> Iterator[WorkloadStore]:
    with WorkloadStore.open(tmp_path / "w.db") as opened:
        yield opened


@pytest.fixture
def client(store: WorkloadStore) -> LocalClient:
    return LocalClient(store, Scope("t", "app"), Subject.worker("w"), capabilities=CAPABILITIES)


class CountingClient(LocalClient):
    """A real client that counts its completion calls."""

    calls: list[int]

    def complete_many(self, items: Any) -> Any:
        self.calls.append(len(items))
        return super().complete_many(items)


def running(store: WorkloadStore, client: LocalClient, n: int) -> list[ClaimedWork]:
    store.admit_many(
        [make_request(idempotency_key=f"k{i}", created_at=int(time.time())) for i in range(n)]
    )
    claimed = client.claim_work(n, lease_ms=60_000)
    assert len(claimed) == n
    return claimed


def item(work: ClaimedWork, **changes: Any) -> CompletionItem:
    fields: dict[str, Any] = {
        "workload_id": work.claim.workload_id,
        "claim_id": work.claim.claim_id,
        "fencing_token": work.claim.fencing_token,
        "result_id": f"r-{work.claim.workload_id}",
        "output": {"ok": True},
    }
    return CompletionItem(**{**fields, **changes})


def complete(completer: BatchCompleter, work: CompletionItem) -> WorkloadResult:
    """``work`` completed through ``completer``, waiting for its own answer (a refusal or
    the call's failure raised), as an attempt thread would if it waited."""
    answer: concurrent.futures.Future[WorkloadResult] = concurrent.futures.Future()

    def answered(outcome: WorkloadResult | BaseException) -> None:
        if isinstance(outcome, BaseException):
            answer.set_exception(outcome)
        else:
            answer.set_result(outcome)

    completer.submit(work, answered)
    return answer.result()


def complete_together(completer: BatchCompleter, items: list[CompletionItem]) -> list[Any]:
    answers: list[Any] = [None] * len(items)

    def run(n: int) -> None:
        try:
            answers[n] = complete(completer, items[n])
        except WorkloadError as error:
            answers[n] = error

    threads = [threading.Thread(target=run, args=(n,)) for n in range(len(items))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(FOREVER_S)
    return answers


def counting(store: WorkloadStore) -> CountingClient:
    counted = CountingClient(
        store, Scope("t", "app"), Subject.worker("w"), capabilities=CAPABILITIES
    )
    counted.calls = []
    return counted


def test_a_batch_is_sent_once_every_running_attempt_waits(store: WorkloadStore) -> None:
    counted = counting(store)
    claimed = running(store, counted, 5)
    completer = BatchCompleter(counted, lambda waiting: waiting >= 5, max_wait_s=FOREVER_S)
    answers = complete_together(completer, [item(w) for w in claimed])
    completer.close()
    assert counted.calls == [5]  # one call, sent when the fifth arrived, not after a wait
    for work, answer in zip(claimed, answers, strict=True):
        assert answer.result_id == f"r-{work.claim.workload_id}"
        # Answered only once committed: what it answered is what a read finds.
        done = store.get(work.claim.workload_id)
        assert done.state is WorkloadState.SUCCEEDED and done.result is not None
        assert done.result.result_id == answer.result_id


def test_submitted_completions_are_answered_on_the_completer_s_thread(
    store: WorkloadStore,
) -> None:
    # The worker's attempt threads hand completions over and return: each answer (a
    # result, or its refusal) is given on the completer's thread, once committed, and an
    # answer whose handling fails does not keep the others from theirs.
    counted = counting(store)
    good, stale, other = running(store, counted, 3)
    completer = BatchCompleter(counted, lambda waiting: waiting >= 3, max_wait_s=FOREVER_S)
    answers: dict[str, tuple[Any, str]] = {}
    all_answered = threading.Event()

    def answered(name: str) -> Callable[[Any], None]:
        def answer(outcome: Any) -> None:
            answers[name] = (outcome, threading.current_thread().name)
            if len(answers) == 3:
                all_answered.set()
            if name == "stale":
                raise RuntimeError("a handling that fails")

        return answer

    completer.submit(item(good), answered("good"))
    completer.submit(item(stale, fencing_token=99), answered("stale"))
    completer.submit(item(other), answered("other"))
    assert all_answered.wait(FOREVER_S)
    completer.close()
    assert counted.calls == [3]
    assert {thread for _, thread in answers.values()} == {"feltdb-completer"}
    assert answers["good"][0].result_id == f"r-{good.claim.workload_id}"
    assert isinstance(answers["stale"][0], WorkloadError)
    assert answers["other"][0].result_id == f"r-{other.claim.workload_id}"
    assert store.get(good.claim.workload_id).state is WorkloadState.SUCCEEDED
    assert store.get(other.claim.workload_id).state is WorkloadState.SUCCEEDED


def test_a_batch_is_sent_at_max_items(store: WorkloadStore) -> None:
    counted = counting(store)
    claimed = running(store, counted, 6)
    completer = BatchCompleter(counted, lambda waiting: False, max_items=3, max_wait_s=FOREVER_S)
    answers = complete_together(completer, [item(w) for w in claimed])
    completer.close()
    assert counted.calls == [3, 3]
    assert all(not isinstance(a, WorkloadError) for a in answers)


def test_a_lone_completion_waits_at_most_max_wait_and_is_the_single_call(
    store: WorkloadStore, client: LocalClient
) -> None:
    counted = counting(store)
    [work] = running(store, counted, 1)
    completer = BatchCompleter(counted, lambda waiting: False, max_wait_s=0.05)
    result = complete(completer, item(work))
    completer.close()
    assert counted.calls == []  # a batch of one is sent as complete()
    assert result.result_id == f"r-{work.claim.workload_id}"
    assert store.get(work.claim.workload_id).state is WorkloadState.SUCCEEDED


def test_each_item_gets_its_own_refusal(store: WorkloadStore) -> None:
    counted = counting(store)
    good, stale, secret = running(store, counted, 3)
    completer = BatchCompleter(counted, lambda waiting: waiting >= 3, max_wait_s=FOREVER_S)
    answers = complete_together(
        completer,
        [
            item(good),
            item(stale, fencing_token=stale.claim.fencing_token + 1),
            item(secret, output={"api_key": "sk-live-0123456789abcdef"}),
        ],
    )
    completer.close()
    assert counted.calls == [3]
    assert not isinstance(answers[0], WorkloadError)
    assert [a.code for a in answers[1:]] == [
        ErrorCode.WORKLOAD_STALE_FENCE,
        ErrorCode.WORKLOAD_SECRET_REJECTED,
    ]
    assert store.get(stale.claim.workload_id).state is WorkloadState.RUNNING


def test_a_worker_completes_in_batches_and_beats_every_lease_in_one_call(
    store: WorkloadStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: dict[str, list[int]] = {"complete_many": [], "renew_leases": [], "claim_work": []}

    def counted(name: str) -> Callable[..., Any]:
        original = getattr(LocalClient, name)

        def call(self: LocalClient, first: Any, *args: Any, **kwargs: Any) -> Any:
            answer = original(self, first, *args, **kwargs)
            calls[name].append(len(first) if name != "claim_work" else len(answer))
            return answer

        return call

    for name in calls:
        monkeypatch.setattr(LocalClient, name, counted(name))
    store.admit_many(
        [make_request(idempotency_key=f"k{i}", created_at=int(time.time())) for i in range(8)]
    )
    worker = Worker(
        store=store, tenant="t", application="app", capabilities=CAPABILITIES,
        concurrency=8, name="w", lease_ms=3000, completion_wait_ms=60_000,
    )  # fmt: skip
    held = threading.Barrier(8)
    release = threading.Event()

    @worker.handler(make_request().definition_id)
    def work(ctx: Context) -> Any:
        held.wait(FOREVER_S)
        release.wait(FOREVER_S)
        return {"n": ctx.attempt}

    drained: list[int] = []
    thread = threading.Thread(target=lambda: drained.append(worker.drain()))
    thread.start()
    # All eight hold leases of 3 s: the heartbeat thread renews them (every 1 s), in one call each
    # time (they were claimed together, so they fall due together).
    threading.Event().wait(2.3)
    release.set()
    thread.join(FOREVER_S)
    assert drained == [8] and worker.completed == 8
    assert calls["claim_work"][0] == 8  # one claim for the eight free slots
    assert calls["renew_leases"] and all(n == 8 for n in calls["renew_leases"])
    # The eight finish together: their completions go in one call (sent as soon as every
    # running attempt waits on it, long before the 60 s wait).
    assert sum(calls["complete_many"]) == 8 and len(calls["complete_many"]) <= 2
    assert all(w.state is WorkloadState.SUCCEEDED for w in store.list("t", "app"))


@pytest.mark.parametrize(
    "option",
    [
        {"concurrency": 0},
        {"concurrency": 4097},
        {"completion_batch": 0},
        {"completion_batch": 1025},
        {"completion_wait_ms": -1},
        {"completion_wait_ms": 60_001},
        {"lease_ms": 999},
    ],
)
def test_a_worker_option_out_of_its_bounds_is_refused(
    store: WorkloadStore, option: dict[str, int]
) -> None:
    with pytest.raises(WorkloadError) as refused:
        Worker(store=store, **option)  # type: ignore[arg-type]
    assert refused.value.code == ErrorCode.WORKLOAD_INVALID
    assert refused.value.details == {"fields": list(option)}


def test_a_lost_attempt_does_not_make_every_tick_a_heartbeat(
    store: WorkloadStore, client: LocalClient
) -> None:
    from feltdb.worker.attempt import Attempt
    from feltdb.worker.handlers import HandlerLoop
    from feltdb.worker.reports import AttemptRunner

    live, lost = running(store, client, 2)
    attempts = [Attempt(w.claim, w.workload) for w in (live, lost)]
    for attempt in attempts:
        attempt.beat_every_s = 10.0
        attempt.next_beat = time.monotonic() + 10.0
    attempts[1].next_beat = time.monotonic() - 1  # overdue, and never renewed again:
    attempts[1].lost.set()  # lost (a handler still running, so still held by the worker)
    runner = AttemptRunner(client, 30_000, {}, HandlerLoop(), lambda: None)
    beaten: list[int] = []
    runner.beat = lambda due: beaten.append(len(due))  # type: ignore[method-assign]
    runner.beat_due(attempts)
    assert beaten == []  # the live lease is not due, and the lost one is not beaten
    attempts[0].next_beat = time.monotonic() - 1
    runner.beat_due(attempts)
    assert beaten == [1]
    runner.loop.close()


def test_a_completion_handed_over_after_the_completer_closed_is_sent_alone(
    store: WorkloadStore, client: LocalClient
) -> None:
    # An attempt that took its report just before a shutdown closed the completer (and so
    # was not failed as unfinished) still completes its work, by the single call.
    from feltdb.worker.attempt import Attempt
    from feltdb.worker.handlers import HandlerLoop
    from feltdb.worker.reports import AttemptRunner

    [work] = running(store, client, 1)
    completer = BatchCompleter(client, lambda waiting: True)
    completer.close()
    completed: list[bool] = []
    runner = AttemptRunner(
        client, 30_000, {}, HandlerLoop(), lambda: completed.append(True), completer
    )
    attempt = Attempt(work.claim, work.workload)
    runner.after_return(attempt, {"late": True}, 0.1)
    runner.loop.close()
    assert completed == [True] and not attempt.deferred
    done = store.get(work.claim.workload_id)
    assert done.state is WorkloadState.SUCCEEDED
    assert done.result is not None and done.result.output == {"late": True}
