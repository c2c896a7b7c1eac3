"""The worker runtime end to end on an embedded SQLite store.

Every scenario runs real handlers through :class:`feltdb.worker.Worker` (claim, start,
heartbeat, checkpoint, report) and then reads what the authority committed. Every wait is
bounded: threads are joined with timeouts and polls have deadlines.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from support.factories import make_request

from feltdb.client import LocalClient
from feltdb.errors import ErrorCode, WorkloadError
from feltdb.records.codec import stored_document
from feltdb.records.workload import Workload, WorkloadClaim, WorkloadResult, WorkloadRetryPolicy
from feltdb.work.states import WorkloadState
from feltdb.work.store import WorkloadStore
from feltdb.worker import Context, Permanent, Retryable, Worker
from feltdb.worker.failures import WITHHELD

NAME = "w1"
WORKER = "worker:w1"
"""What the authority records for the worker named ``NAME``: its subject, ``worker:NAME``,
as a server records the subject of a worker's token."""
JOIN_S = 15.0
"""The longest any test waits for a worker thread to end."""

#: A retry after which the work is READY again but not claimable during the test, so a
#: drain runs exactly one attempt.
LATER = WorkloadRetryPolicy(initial_delay_ms=600_000)
#: A retry claimable at once.
AT_ONCE = WorkloadRetryPolicy(initial_delay_ms=0)
#: No retries: whatever ends the attempt dead-letters the work.
ONCE = WorkloadRetryPolicy(max_attempts=1)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[WorkloadStore]:
    with WorkloadStore.open(tmp_path / "w.db") as opened:
        yield opened


@pytest.fixture(autouse=True)
def no_runtime_crash(caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    """The runtime's own failures are only logged (the worker survives them); a test that
    caused one fails here.
    """
    caplog.set_level(logging.DEBUG, logger="feltdb.worker")
    yield
    crashed = [r for r in caplog.records if "inside the runtime" in r.getMessage()]
    assert not crashed, [r.getMessage() for r in crashed]


def admit(store: WorkloadStore, key: str, **overrides: Any) -> str:
    request = make_request(idempotency_key=key, created_at=int(time.time()), **overrides)
    workload, created = store.admit(request)
    assert created
    return workload.workload_id


def make_worker(store: WorkloadStore, **options: Any) -> Worker:
    options.setdefault("name", NAME)
    return Worker(
        store=store, tenant="t", application="app", capabilities={"email:send"}, **options
    )


def register_sleeper(worker: Worker) -> tuple[threading.Event, threading.Event]:
    """Register an async handler of "send" that sleeps 30 s; the events say it is running
    and that its task was cancelled.
    """
    running = threading.Event()
    task_cancelled = threading.Event()

    @worker.handler("send")
    async def send(ctx: Context) -> Any:
        running.set()
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            task_cancelled.set()
            raise
        return {"slept": True}

    return running, task_cancelled


class Background:
    """Runs ``call`` on a thread; :meth:`join` waits (bounded) and re-raises its error."""

    def __init__(self, call: Callable[[], Any]) -> None:
        self.answer: Any = None
        self.error: BaseException | None = None

        def target() -> None:
            try:
                self.answer = call()
            except BaseException as error:  # handed to the test by join()
                self.error = error

        self.thread = threading.Thread(target=target, name="test-worker", daemon=True)
        self.thread.start()

    def join(self, timeout: float = JOIN_S) -> Any:
        self.thread.join(timeout)
        assert not self.thread.is_alive(), f"the worker did not return within {timeout}s"
        if self.error is not None:
            raise self.error
        return self.answer


def wait_for(predicate: Callable[[], bool], what: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def events_by(w: Workload, actor: str) -> list[Any]:
    return [e for e in w.execution_history if e.actor == actor]


def states(w: Workload) -> list[WorkloadState]:
    return [e.to for e in w.execution_history]


def failed_event(w: Workload) -> Any:
    failed = [e for e in w.execution_history if e.to is WorkloadState.FAILED]
    assert len(failed) == 1, states(w)
    return failed[0]


# --------------------------------------------------------------------------- running


def test_sync_handler_output_is_the_result(store: WorkloadStore) -> None:
    workload_id = admit(store, "k1", input={"to": "a@example.com"})
    worker = make_worker(store)
    seen: dict[str, Any] = {}

    @worker.handler("send")
    def send(ctx: Context) -> Any:
        seen.update(
            input=ctx.input,
            attempt=ctx.attempt,
            definition=ctx.definition_id,
            workload=ctx.workload_id,
            checkpoints=list(ctx.checkpoints),
            last=ctx.last_checkpoint,
            cancelled=ctx.cancelled.is_set(),
        )
        return {"sent": ctx.input["to"]}

    assert worker.drain() == 1

    assert seen == {
        "input": {"to": "a@example.com"},
        "attempt": 1,
        "definition": "send",
        "workload": workload_id,
        "checkpoints": [],
        "last": None,
        "cancelled": False,
    }
    w = store.get(workload_id)
    assert w.state is WorkloadState.SUCCEEDED
    assert w.result is not None and w.result.output == {"sent": "a@example.com"}
    assert w.result.produced_by == WORKER
    assert len(w.attempts) == 1 and w.attempt_count == 1
    assert w.attempts[0].status.value == "SUCCEEDED"
    assert states(w)[-3:] == [
        WorkloadState.CLAIMED,
        WorkloadState.RUNNING,
        WorkloadState.SUCCEEDED,
    ]
    assert worker.completed == 1


def test_checkpoint_survives_a_retry_and_the_next_attempt_resumes(store: WorkloadStore) -> None:
    workload_id = admit(store, "k1", retry_policy=AT_ONCE)
    worker = make_worker(store)
    seen: list[tuple[int, Any, int]] = []

    @worker.handler("send")
    def send(ctx: Context) -> Any:
        seen.append((ctx.attempt, ctx.last_checkpoint, len(ctx.checkpoints)))
        if ctx.attempt == 1:
            saved = ctx.checkpoint({"step": 1})
            assert saved.sequence == 1 and ctx.last_checkpoint == {"step": 1}
            raise Retryable("upstream reset the connection")
        assert ctx.checkpoints[0].state == {"step": 1}
        ctx.checkpoint({"step": 2})
        return {"resumed_from": ctx.last_checkpoint}

    assert worker.drain() == 2

    assert seen == [(1, None, 0), (2, {"step": 1}, 1)]
    w = store.get(workload_id)
    assert w.state is WorkloadState.SUCCEEDED
    assert w.result is not None and w.result.output == {"resumed_from": {"step": 2}}
    assert [c.state for c in w.checkpoints] == [{"step": 1}, {"step": 2}]
    assert [c.attempt_id for c in w.checkpoints] == [a.attempt_id for a in w.attempts]
    failed = failed_event(w)
    assert failed.evidence["failure_kind"] == "transient_connection"
    assert w.attempts[0].error == "upstream reset the connection"


def test_async_handlers_share_one_event_loop_and_sync_handlers_get_threads(
    store: WorkloadStore,
) -> None:
    async_ids = [admit(store, f"a{i}", definition_id="async-send") for i in range(3)]
    sync_ids = [admit(store, f"s{i}", definition_id="sync-send") for i in range(2)]
    worker = make_worker(store, concurrency=3)
    lock = threading.Lock()
    running: set[str] = set()
    loops: dict[str, tuple[str, int, bool]] = {}
    sync_threads: dict[str, str] = {}

    @worker.handler("async-send")
    async def send_async(ctx: Context) -> Any:
        with lock:
            running.add(ctx.workload_id)
        # All three are in flight at once on the one loop (bounded: a loop that ran them
        # one after another would see only itself and give up).
        deadline = time.monotonic() + 5
        while len(running) < 3 and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        with lock:
            loops[ctx.workload_id] = (
                threading.current_thread().name,
                id(asyncio.get_running_loop()),
                len(running) == 3,
            )
        return {"async": True}

    @worker.handler("sync-send")
    def send_sync(ctx: Context) -> Any:
        with lock:
            sync_threads[ctx.workload_id] = threading.current_thread().name
        return {"async": False}

    assert worker.drain() == 5

    for workload_id in async_ids + sync_ids:
        w = store.get(workload_id)
        assert w.state is WorkloadState.SUCCEEDED, (workload_id, states(w))
        assert w.result is not None
        assert w.result.output == {"async": workload_id in async_ids}
    assert set(loops) == set(async_ids)
    assert {name for name, _, _ in loops.values()} == {"feltdb-async-handlers"}
    assert len({loop for _, loop, _ in loops.values()}) == 1
    assert all(together for _, _, together in loops.values())
    assert sync_threads == {i: f"feltdb-attempt-{i}" for i in sync_ids}
    assert worker.completed == 5


def test_a_finished_run_leaves_no_runtime_thread_behind(store: WorkloadStore) -> None:
    admit(store, "a", definition_id="async-send")
    worker = make_worker(store)

    @worker.handler("async-send")
    async def send_async(ctx: Context) -> Any:
        await asyncio.sleep(0)
        return {"async": True}

    def runtime_threads() -> list[str]:
        return [
            t.name for t in threading.enumerate() if t.name.startswith("feltdb-") and t.is_alive()
        ]

    # Heartbeats, the async loop, every attempt: all end (an attempt thread may take a
    # moment after its report).
    assert worker.drain() == 1
    wait_for(lambda: runtime_threads() == [], "the runtime's threads to end", timeout=3)
    admit(store, "b", definition_id="async-send")
    assert worker.drain() == 1  # a new run starts a new loop
    wait_for(lambda: runtime_threads() == [], "the runtime's threads to end", timeout=3)


# --------------------------------------------------------------------------- failures


def test_retryable_reports_its_kind_and_the_policy_retries_it(store: WorkloadStore) -> None:
    policy = WorkloadRetryPolicy(initial_delay_ms=600_000, retry_on={"rate_limited"})
    workload_id = admit(store, "k1", retry_policy=policy)
    worker = make_worker(store)

    @worker.handler("send")
    def send(ctx: Context) -> Any:
        raise Retryable("429 from the provider", kind="rate_limited")

    assert worker.drain() == 1

    w = store.get(workload_id)
    assert w.state is WorkloadState.READY
    assert w.next_attempt_at is not None and w.next_attempt_at > time.time()
    event = failed_event(w)
    assert event.actor == WORKER
    assert event.evidence["failure_kind"] == "rate_limited"
    # The author named the failure, before doing anything: the policy decides on the kind.
    assert event.evidence["effect"] == "none"
    assert w.last_failure == "rate_limited: 429 from the provider"
    assert w.execution_history[-1].evidence == {"decision": "retry"}


def test_retryable_of_a_kind_the_policy_does_not_retry_is_dead_lettered(
    store: WorkloadStore,
) -> None:
    workload_id = admit(store, "k1", retry_policy=LATER)
    worker = make_worker(store)

    @worker.handler("send")
    def send(ctx: Context) -> Any:
        raise Retryable("quota", kind="rate_limited")

    worker.drain()

    w = store.get(workload_id)
    assert w.state is WorkloadState.DEAD_LETTER
    assert w.execution_history[-1].evidence == {"decision": "failure_kind_not_retryable"}


def test_permanent_dead_letters(store: WorkloadStore) -> None:
    workload_id = admit(store, "k1")
    worker = make_worker(store)

    @worker.handler("send")
    def send(ctx: Context) -> Any:
        raise Permanent("card declined")

    assert worker.drain() == 1

    w = store.get(workload_id)
    assert w.state is WorkloadState.DEAD_LETTER
    assert w.last_failure == "permanent: card declined"
    assert failed_event(w).evidence["failure_kind"] == "permanent"
    assert w.attempt_count == 1
    assert w.result is None


def test_unexpected_exception_before_progress_reports_effect_none(store: WorkloadStore) -> None:
    workload_id = admit(store, "k1", retry_policy=LATER)
    worker = make_worker(store)

    @worker.handler("send")
    def send(ctx: Context) -> Any:
        empty: dict[str, Any] = {}
        return empty["x"]

    assert worker.drain() == 1

    w = store.get(workload_id)
    event = failed_event(w)
    assert event.actor == WORKER
    assert event.evidence["failure_kind"] == "worker_failure"
    assert event.evidence["effect"] == "none"
    assert w.attempts[0].error == "KeyError: 'x'"
    assert w.last_failure == "worker_failure: KeyError: 'x'"
    assert "Traceback" not in w.last_failure
    assert w.state is WorkloadState.READY  # the default policy retries worker_failure


@pytest.mark.parametrize("progress", ["checkpoint", "side_effect"])
def test_unexpected_exception_after_progress_reports_effect_unknown(
    store: WorkloadStore, progress: str
) -> None:
    workload_id = admit(store, "k1", retry_policy=LATER)
    worker = make_worker(store)

    @worker.handler("send")
    def send(ctx: Context) -> Any:
        if progress == "checkpoint":
            ctx.checkpoint({"sent": 1})
        else:
            ctx.mark_side_effect()
        raise RuntimeError("the mail server hung up")

    assert worker.drain() == 1

    w = store.get(workload_id)
    event = failed_event(w)
    assert event.evidence["failure_kind"] == "worker_failure"
    assert event.evidence["effect"] == "unknown"
    assert w.attempts[0].error == "RuntimeError: the mail server hung up"
    assert "Traceback" not in (w.last_failure or "")


def test_unknown_effect_is_decided_like_a_lost_worker(store: WorkloadStore) -> None:
    # The author's kind would be retried, but an unknown effect is decided as a
    # worker_failure, which this policy does not retry.
    policy = WorkloadRetryPolicy(retry_on={"rate_limited"})
    workload_id = admit(store, "k1", retry_policy=policy)
    worker = make_worker(store)

    @worker.handler("send")
    def send(ctx: Context) -> Any:
        ctx.mark_side_effect()
        raise ValueError("half sent")

    worker.drain()

    w = store.get(workload_id)
    assert w.state is WorkloadState.DEAD_LETTER
    assert w.execution_history[-1].evidence == {"decision": "effect_unknown_not_retryable"}


@pytest.mark.parametrize(
    ("raised", "kind"),
    [
        (RuntimeError("-----BEGIN PRIVATE KEY-----\nMIIE"), "worker_failure"),
        (Retryable("sk-live-0123456789"), "transient_connection"),
    ],
    ids=["private-key", "api-key"],
)
def test_an_error_that_looks_like_a_secret_is_withheld(
    store: WorkloadStore, raised: Exception, kind: str
) -> None:
    workload_id = admit(store, "k1", retry_policy=LATER)
    worker = make_worker(store)

    @worker.handler("send")
    def send(ctx: Context) -> Any:
        raise raised

    assert worker.drain() == 1

    w = store.get(workload_id)
    event = failed_event(w)
    assert event.evidence["failure_kind"] == kind
    assert w.attempts[0].error == WITHHELD
    assert w.last_failure == f"{kind}: {WITHHELD}"
    text = stored_document(w)[1]
    assert "PRIVATE KEY" not in text and "sk-live" not in text


def test_a_worker_claims_only_work_it_has_a_handler_for(store: WorkloadStore) -> None:
    # Work of a definition this worker does not serve stays READY for a worker that does,
    # however high its priority: it is never claimed, and never dead-lettered as
    # "no handler" (issue 10, point 1).
    unserved = admit(store, "k1", definition_id="resize-image", priority=5)
    other = admit(store, "k2")
    worker = make_worker(store)
    ran: list[str] = []

    @worker.handler("send")
    def send(ctx: Context) -> Any:
        ran.append(ctx.workload_id)
        return {"ok": True}

    assert worker.drain() == 1
    assert ran == [other]
    assert store.get(other).state is WorkloadState.SUCCEEDED
    w = store.get(unserved)
    assert w.state is WorkloadState.READY and w.attempts == []
    resizer = make_worker(store)

    @resizer.handler("resize-image")
    def resize(ctx: Context) -> Any:
        return {"resized": True}

    assert resizer.drain() == 1
    assert store.get(unserved).state is WorkloadState.SUCCEEDED


def test_output_that_is_not_json_is_reported_invalid_output(store: WorkloadStore) -> None:
    workload_id = admit(store, "k1", retry_policy=LATER)
    worker = make_worker(store)

    @worker.handler("send")
    def send(ctx: Context) -> Any:
        return {"when": object()}

    worker.drain()

    w = store.get(workload_id)
    event = failed_event(w)
    assert event.evidence == {
        "failure_kind": "invalid_output",
        "attempt_id": w.attempts[0].attempt_id,
        "effect": "unknown",
    }
    assert w.result is None


# --------------------------------------------------------------------------- cancellation


def test_cancelling_a_running_sync_handler(store: WorkloadStore) -> None:
    workload_id = admit(store, "k1")
    worker = make_worker(store, lease_ms=3000)
    running = threading.Event()
    saw_cancel: list[bool] = []

    @worker.handler("send")
    def send(ctx: Context) -> Any:
        running.set()
        deadline = time.monotonic() + 10
        while not ctx.cancelled.wait(0.05) and time.monotonic() < deadline:
            pass
        saw_cancel.append(ctx.cancelled.is_set())
        return {"finished": "anyway"}

    drain = Background(worker.drain)
    assert running.wait(10)
    asked = time.monotonic()
    assert store.cancel(workload_id, "ops") is WorkloadState.CANCELLATION_REQUESTED
    assert drain.join() == 1
    took = time.monotonic() - asked

    assert saw_cancel == [True]
    assert took < 5, took  # a heartbeat (every 1s) noticed, not the handler's deadline
    w = store.get(workload_id)
    assert w.state is WorkloadState.CANCELLED
    assert w.result is None
    last = w.execution_history[-1]
    assert (last.from_state, last.to, last.actor) == (
        WorkloadState.CANCELLATION_REQUESTED,
        WorkloadState.CANCELLED,
        WORKER,
    )
    assert w.attempts[0].status.value == "CANCELLED"
    assert worker.completed == 0


def test_cancelling_a_running_async_handler_cancels_its_task(store: WorkloadStore) -> None:
    workload_id = admit(store, "k1")
    worker = make_worker(store, lease_ms=3000)
    running, task_cancelled = register_sleeper(worker)

    drain = Background(worker.drain)
    assert running.wait(10)
    asked = time.monotonic()
    store.cancel(workload_id, "ops")
    drain.join()
    took = time.monotonic() - asked

    assert task_cancelled.wait(5)
    assert took < 5, took
    w = store.get(workload_id)
    assert w.state is WorkloadState.CANCELLED
    assert w.execution_history[-1].actor == WORKER
    assert w.result is None


def test_cancellation_requested_before_the_attempt_starts_is_confirmed(
    store: WorkloadStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A claim that did not start its attempt (the runtime's claims start it in the same
    commit, but an authority may answer one that did not), and an operator cancels before
    the start: the authority refuses the start, and the runtime confirms the cancellation
    rather than abandoning the claim.
    """
    workload_id = admit(store, "k1")
    worker = make_worker(store)
    original = LocalClient.claim_work

    def claim_unstarted_then_cancel(self: LocalClient, limit: int, **options: Any) -> Any:
        claimed = original(self, limit, **{**options, "start": False})
        for work in claimed:
            assert work.workload.state is WorkloadState.CLAIMED
            store.cancel(work.claim.workload_id, "ops")
        return claimed

    monkeypatch.setattr(LocalClient, "claim_work", claim_unstarted_then_cancel)
    ran: list[str] = []

    @worker.handler("send")
    def send(ctx: Context) -> Any:
        ran.append(ctx.workload_id)
        return {}

    Background(worker.drain).join()

    assert ran == []
    w = store.get(workload_id)
    assert w.state is WorkloadState.CANCELLED, states(w)
    assert w.execution_history[-1].actor == WORKER
    assert w.current_claim is None


# --------------------------------------------------------------------------- losing the work


def test_an_operator_timeout_takes_the_work_and_the_worker_reports_nothing_more(
    store: WorkloadStore,
) -> None:
    workload_id = admit(store, "k1", retry_policy=ONCE)
    worker = make_worker(store, lease_ms=3000)
    running = threading.Event()
    saw_cancel: list[bool] = []

    @worker.handler("send")
    def send(ctx: Context) -> Any:
        running.set()
        deadline = time.monotonic() + 10
        while not ctx.cancelled.wait(0.05) and time.monotonic() < deadline:
            pass
        saw_cancel.append(ctx.cancelled.is_set())
        return {"late": True}

    drain = Background(worker.drain)
    assert running.wait(10)
    asked = time.monotonic()
    store.timeout(workload_id, "ops")
    drain.join()

    assert saw_cancel == [True]
    assert time.monotonic() - asked < 5
    w = store.get(workload_id)
    assert w.state is WorkloadState.DEAD_LETTER
    assert w.result is None
    timed_out = next(i for i, e in enumerate(w.execution_history) if e.actor == "ops")
    assert w.execution_history[timed_out].to is WorkloadState.TIMED_OUT
    assert all(e.actor != WORKER for e in w.execution_history[timed_out:])
    assert WorkloadState.FAILED not in states(w)
    assert w.attempts[0].status.value == "TIMED_OUT"
    assert worker.completed == 0


def test_an_async_handler_is_cancelled_when_the_work_is_timed_out(store: WorkloadStore) -> None:
    workload_id = admit(store, "k1", retry_policy=ONCE)
    worker = make_worker(store, lease_ms=3000)
    running, task_cancelled = register_sleeper(worker)

    drain = Background(worker.drain)
    assert running.wait(10)
    store.timeout(workload_id, "ops")
    drain.join()

    assert task_cancelled.wait(5)
    w = store.get(workload_id)
    assert w.state is WorkloadState.DEAD_LETTER
    assert w.execution_history[-1].actor != WORKER
    assert WorkloadState.FAILED not in states(w)


def test_a_competing_claim_after_the_lease_expired_fences_the_worker_out(
    store: WorkloadStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Heartbeats stop getting through; the lease expires, recovery re-arms the work and
    another worker claims it. The first handler finishing later must not complete it.
    """
    workload_id = admit(store, "k1")
    worker = make_worker(store, lease_ms=2000)

    def unreachable(self: LocalClient, items: Any) -> Any:
        raise WorkloadError(ErrorCode.WORKLOAD_STORAGE_FAILURE, "no route to the authority")

    monkeypatch.setattr(LocalClient, "renew_leases", unreachable)
    running = threading.Event()
    release = threading.Event()

    @worker.handler("send")
    def send(ctx: Context) -> Any:
        running.set()
        release.wait(10)
        return {"too": "late"}

    drain = Background(worker.drain)
    assert running.wait(10)
    claim = store.get(workload_id).current_claim
    assert claim is not None
    wait_for(lambda: time.time() >= claim.expires_at + 0.05, "the lease to expire")
    assert store.recover_expired() == [workload_id]
    rival = store.claim(workload_id, "rival", {"email:send"})
    release.set()
    drain.join()

    w = store.get(workload_id)
    assert w.state is WorkloadState.CLAIMED
    assert w.current_claim is not None and w.current_claim.claim_id == rival.claim_id
    assert w.result is None
    recovered = next(i for i, e in enumerate(w.execution_history) if e.actor == "feltdb.recovery")
    assert all(e.actor != WORKER for e in w.execution_history[recovered:])
    assert worker.completed == 0


# --------------------------------------------------------------------------- reports


def test_a_lost_completion_answer_is_resent_with_the_same_result_id(
    store: WorkloadStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    workload_id = admit(store, "k1")
    worker = make_worker(store)
    original = LocalClient.complete
    sent: list[tuple[str, Any]] = []

    def answer_lost_once(
        self: LocalClient, workload_id: str, claim_id: str, token: int, result_id: str, output: Any
    ) -> WorkloadResult:
        sent.append((result_id, output))
        result = original(self, workload_id, claim_id, token, result_id, output)
        if len(sent) == 1:
            raise WorkloadError(ErrorCode.WORKLOAD_STORAGE_FAILURE, "the connection dropped")
        return result

    monkeypatch.setattr(LocalClient, "complete", answer_lost_once)

    @worker.handler("send")
    def send(ctx: Context) -> Any:
        return {"sent": 1}

    assert worker.drain() == 1

    assert len(sent) == 2
    assert sent[0] == sent[1]
    w = store.get(workload_id)
    assert w.state is WorkloadState.SUCCEEDED
    assert states(w).count(WorkloadState.SUCCEEDED) == 1
    assert w.result is not None and w.result.result_id == sent[0][0]
    assert worker.completed == 1


def test_a_lost_failure_answer_is_resent_and_recorded_once(
    store: WorkloadStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    workload_id = admit(store, "k1", retry_policy=LATER)
    worker = make_worker(store)
    original = LocalClient.fail
    sent: list[tuple[str, str, str | None]] = []

    def answer_lost_once(
        self: LocalClient, wid: str, cid: str, token: int, kind: str, error: str, *,
        effect: str | None = None,
    ) -> WorkloadState:  # fmt: skip
        sent.append((kind, error, effect))
        state = original(self, wid, cid, token, kind, error, effect=effect)
        if len(sent) == 1:
            raise WorkloadError(ErrorCode.WORKLOAD_STORAGE_FAILURE, "the connection dropped")
        return state

    monkeypatch.setattr(LocalClient, "fail", answer_lost_once)

    @worker.handler("send")
    def send(ctx: Context) -> Any:
        raise Retryable("busy")

    worker.drain()

    assert sent == [("transient_connection", "busy", "none")] * 2
    w = store.get(workload_id)
    assert states(w).count(WorkloadState.FAILED) == 1
    assert w.state is WorkloadState.READY


def test_heartbeats_keep_a_long_handler_alive(store: WorkloadStore) -> None:
    workload_id = admit(store, "k1")
    worker = make_worker(store, lease_ms=2000)
    claims: list[WorkloadClaim] = []

    @worker.handler("send")
    def send(ctx: Context) -> Any:
        first = store.get(ctx.workload_id).current_claim
        time.sleep(4)
        later = store.get(ctx.workload_id).current_claim
        assert first is not None and later is not None
        claims.extend([first, later])
        return {"slept": 4}

    assert worker.drain() == 1

    first, later = claims
    assert later.claim_id == first.claim_id
    assert later.last_heartbeat > first.claimed_at
    assert later.expires_at > first.expires_at
    # Without heartbeats the lease would have run out two seconds in.
    assert later.last_heartbeat >= first.expires_at - 1
    w = store.get(workload_id)
    assert w.state is WorkloadState.SUCCEEDED
    assert len(w.attempts) == 1 and w.attempt_count == 1
    assert WorkloadState.RECOVERING not in states(w)


# --------------------------------------------------------------------------- shutting down


def test_graceful_shutdown_lets_quick_handlers_finish_and_fails_slow_ones(
    store: WorkloadStore,
) -> None:
    quick = admit(store, "quick", definition_id="quick", retry_policy=ONCE)
    slow = admit(store, "slow", definition_id="slow", retry_policy=ONCE)
    worker = make_worker(store, concurrency=2, grace_period_s=0.5, poll_wait_s=0.2)
    quick_running = threading.Event()
    slow_running = threading.Event()
    release_slow = threading.Event()
    slow_saw_cancel: list[bool] = []

    @worker.handler("quick")
    def run_quick(ctx: Context) -> Any:
        quick_running.set()
        time.sleep(0.2)
        return {"quick": True}

    @worker.handler("slow")
    def run_slow(ctx: Context) -> Any:
        slow_running.set()
        release_slow.wait(10)
        slow_saw_cancel.append(ctx.cancelled.is_set())
        return {"slow": True}

    run = Background(worker.run)
    assert quick_running.wait(10) and slow_running.wait(10)
    stopped = time.monotonic()
    worker.stop()
    run.join(timeout=5)
    took = time.monotonic() - stopped
    release_slow.set()

    assert took < 3, took  # a poll (0.2s) and the grace period (0.5s), not the handler
    q = store.get(quick)
    assert q.state is WorkloadState.SUCCEEDED
    s = store.get(slow)
    event = failed_event(s)
    assert event.actor == WORKER
    assert event.evidence["failure_kind"] == "worker_failure"
    assert event.evidence["effect"] == "unknown"
    assert "shut down" in (s.attempts[0].error or "")
    assert s.state is WorkloadState.DEAD_LETTER  # the policy decided (max_attempts=1)
    # The slow handler ends later; nothing more is reported for it.
    wait_for(lambda: bool(slow_saw_cancel), "the slow handler to return")
    assert slow_saw_cancel == [True]
    time.sleep(0.2)
    assert store.get(slow).execution_history == s.execution_history


def test_stop_with_hurry_skips_the_grace_period(store: WorkloadStore) -> None:
    slow = admit(store, "slow", retry_policy=LATER)
    worker = make_worker(store, grace_period_s=30, poll_wait_s=0.2)
    running = threading.Event()
    release = threading.Event()

    @worker.handler("send")
    def send(ctx: Context) -> Any:
        running.set()
        release.wait(10)
        return {}

    run = Background(worker.run)
    assert running.wait(10)
    stopped = time.monotonic()
    worker.stop()
    time.sleep(0.3)
    assert run.thread.is_alive()  # within its 30s grace period
    worker.stop(hurry=True)
    run.join(timeout=5)
    release.set()

    assert time.monotonic() - stopped < 3
    w = store.get(slow)
    assert failed_event(w).evidence["effect"] == "unknown"
    assert w.state is WorkloadState.READY


def test_run_claims_work_admitted_while_it_waits(store: WorkloadStore) -> None:
    worker = make_worker(store, poll_wait_s=0.2)
    done = threading.Event()

    @worker.handler("send")
    def send(ctx: Context) -> Any:
        done.set()
        return {"n": ctx.input["id"]}

    run = Background(worker.run)
    time.sleep(0.3)  # the worker is polling an empty queue
    workload_id = admit(store, "late", input={"id": 7})
    assert done.wait(10)
    wait_for(lambda: store.get(workload_id).state is WorkloadState.SUCCEEDED, "the completion")
    worker.stop()
    run.join(timeout=5)

    w = store.get(workload_id)
    assert w.result is not None and w.result.output == {"n": 7}


def test_a_completion_refused_in_the_shutdown_s_last_batch_is_still_decided(
    store: WorkloadStore,
) -> None:
    # A's completion waits in the completer (one of two attempts waiting) when a hurried
    # stop ends the run; the last batch refuses it (its output holds a secret): the refusal
    # must still be decided, as when the attempt's thread waited on it, not dropped with
    # the closed completer.
    refused = admit(store, "refused", retry_policy=LATER, input={"id": 1})
    admit(store, "slow", retry_policy=LATER, input={"id": 2})
    worker = make_worker(store, concurrency=2, completion_wait_ms=60_000, grace_period_s=30)
    returned = threading.Event()

    @worker.handler("send")
    def send(ctx: Context) -> Any:
        if ctx.input["id"] == 1:
            returned.set()
            return {"password": "hunter2"}
        while not ctx.cancelled.is_set():
            time.sleep(0.02)
        return {"ok": True}

    run = Background(worker.run)
    assert returned.wait(10)
    time.sleep(0.3)  # handed over, waiting for the slow attempt to join its batch
    worker.stop(hurry=True)
    run.join()
    wait_for(lambda: store.get(refused).last_failure is not None, "the refusal decided")
    w = store.get(refused)
    assert failed_event(w).evidence["failure_kind"] == "invalid_output"
    assert w.result is None
    wait_for(lambda: not worker._active, "every attempt ended")


@pytest.mark.parametrize(
    ("marked", "said", "shown"),
    [(False, None, "none"), (True, None, "unknown"), (True, "none", "none")],
    ids=["before-any-effect", "after-a-marked-effect", "said-by-the-handler"],
)
def test_a_deliberate_failure_tells_its_effect_truly(
    store: WorkloadStore, marked: bool, said: str | None, shown: str
) -> None:
    # Issue 25: every Permanent once showed "effect unknown: it may have acted" on the
    # dead letters, also when raised before the handler did anything.
    workload_id = admit(store, "k1", retry_policy=WorkloadRetryPolicy(max_attempts=1))
    worker = make_worker(store)

    @worker.handler("send")
    def send(ctx: Context) -> Any:
        if marked:
            ctx.mark_side_effect()
        raise Permanent("amount must be positive", effect=said)  # type: ignore[arg-type]

    assert worker.drain() == 1
    assert store.get(workload_id).state is WorkloadState.DEAD_LETTER
    page, _ = store.page("t", "app", state=WorkloadState.DEAD_LETTER)
    assert [(s.workload_id, s.last_effect) for s in page] == [(workload_id, shown)]
