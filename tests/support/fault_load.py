"""The load of the fault suite (``tests/reliability/test_faults.py``), what it was told, and
how the store is checked against it afterwards.

A :class:`Ledger` notes every operation the load attempts and every one acknowledged (an
admission answered with its workload, a completion answered with its result), every
refusal by its code (and HTTP status), every exception that is *not* a
:class:`~feltdb.WorkloadError` (an untranslated driver error: a defect), the slowest call,
and when each acknowledgement arrived, so that the time from a fault's end to the load's
next progress can be measured (:meth:`Ledger.recovery_after`).

A :class:`Load` runs, on threads: submitters that admit new work (idempotency keys
``PREFIX-N-M``), resending the same key after a transient refusal until it is answered;
and workers, either the worker SDK (:func:`sdk_worker`, through an :class:`ObservedClient`
that notes what the runtime is answered) or a plain claim/complete loop on a store
(:func:`batch_worker`). Every wait is bounded.

:func:`audit` compares the ledger with the workloads the store holds: the figures
``attempted``, ``acknowledged``, ``lost`` and ``duplicated`` of every case.
"""

from __future__ import annotations

import bisect
import functools
import threading
import time
import traceback
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar, cast

from feltdb import AttemptStatus, Completion, WorkloadError, WorkloadState, WorkloadStore
from feltdb.client.protocol import WorkloadClient
from feltdb.errors import ErrorCode
from feltdb.records.workload import Workload
from feltdb.worker import Context, Worker

T = TypeVar("T")

STORAGE_FAILURE = ErrorCode.WORKLOAD_STORAGE_FAILURE.value
TRANSIENT = frozenset({STORAGE_FAILURE, ErrorCode.WORKLOAD_CONFLICT.value})
"""Refusals after which the same operation is sent again (as the worker SDK does)."""
LEASE_LOST = frozenset(
    {
        ErrorCode.WORKLOAD_LEASE_EXPIRED.value,
        ErrorCode.WORKLOAD_STALE_FENCE.value,
        ErrorCode.WORKLOAD_CLAIM_INVALID.value,
        ErrorCode.WORKLOAD_TIMED_OUT.value,
    }
)
"""Refusals of a report whose lease ran out during an outage: the attempt is abandoned
(never acknowledged) and the authority's recovery runs the work again."""
DEFINITION = "send"
"""The definition of the load's work (as ``support.server.submission`` and
``support.factories.make_request`` name it)."""
JOIN_TIMEOUT_S = 60.0
"""A load thread that has not ended this long after it was told to stop is hung."""


def is_transient(error: WorkloadError) -> bool:
    return error.code in TRANSIENT


class Ledger:
    """What the load attempted and was acknowledged; shared by its threads."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self.admissions_tried: set[str] = set()
        self.admitted: dict[str, set[str]] = {}
        """Idempotency key -> the workload ids its admission was answered with."""
        self.completions_tried: set[str] = set()
        self.completed: dict[str, set[str]] = {}
        """Workload id -> the result ids its completions were answered with."""
        self.executions: Counter[str] = Counter()
        """Handler runs per workload (a run whose report was lost runs again)."""
        self.calls = 0
        self.refusals: Counter[str] = Counter()
        """``"what: STATUS CODE"`` -> how many (``STATUS`` is ``-`` without HTTP)."""
        self.untranslated: list[str] = []
        """Exceptions other than WorkloadError, each with its traceback: defects."""
        self.slowest_s = 0.0
        self._times: dict[str, list[float]] = {"admitted": [], "completed": []}

    # --- what happened ----------------------------------------------------------------

    def call(self, what: str, operation: Callable[[], T]) -> T:
        """``operation()``, timed and noted; its refusal or exception is noted and raised."""
        began = time.monotonic()
        try:
            return operation()
        except WorkloadError as error:
            self.refused(what, error)
            raise
        except Exception as error:
            self.unexpected(what, error)
            raise
        finally:
            took = time.monotonic() - began
            with self._changed:
                self.calls += 1
                self.slowest_s = max(self.slowest_s, took)

    def refused(self, what: str, error: WorkloadError) -> None:
        status = getattr(error, "status", None)
        with self._changed:
            self.refusals[f"{what}: {'-' if status is None else status} {error.code}"] += 1

    def unexpected(self, what: str, error: BaseException) -> None:
        text = "".join(traceback.format_exception(error))
        with self._changed:
            self.untranslated.append(f"{what}: {text}")

    def tried_admission(self, key: str) -> None:
        with self._changed:
            self.admissions_tried.add(key)

    def acknowledged_admission(self, key: str, workload_id: str) -> None:
        with self._changed:
            self.admitted.setdefault(key, set()).add(workload_id)
            self._times["admitted"].append(time.monotonic())
            self._changed.notify_all()

    def tried_completion(self, result_id: str) -> None:
        with self._changed:
            self.completions_tried.add(result_id)

    def acknowledged_completion(self, workload_id: str, result_id: str) -> None:
        with self._changed:
            self.completed.setdefault(workload_id, set()).add(result_id)
            self._times["completed"].append(time.monotonic())
            self._changed.notify_all()

    def executed(self, workload_id: str) -> None:
        with self._changed:
            self.executions[workload_id] += 1

    # --- what it adds up to -------------------------------------------------------------

    def count(self, kind: str) -> int:
        """Acknowledgements of ``kind`` (``"admitted"`` or ``"completed"``) so far."""
        with self._changed:
            return len(self._times[kind])

    def refused_count(self, code: str) -> int:
        with self._changed:
            return sum(n for label, n in self.refusals.items() if label.endswith(f" {code}"))

    def recovery_after(
        self,
        since: float,
        timeout_s: float,
        kinds: Sequence[str] = ("admitted", "completed"),
    ) -> float | None:
        """Seconds from ``since`` (a ``time.monotonic()`` instant) until an acknowledgement
        of each of ``kinds`` had arrived after it; ``None`` if that took over ``timeout_s``.
        """
        deadline = since + timeout_s
        with self._changed:
            while True:
                firsts = []
                for kind in kinds:
                    times = self._times[kind]
                    at = bisect.bisect_left(times, since)
                    if at < len(times):
                        firsts.append(times[at])
                if len(firsts) == len(kinds):
                    return max(firsts) - since
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return None
                self._changed.wait(remaining)

    def wait_for(self, kind: str, count: int, timeout_s: float) -> bool:
        """Wait until ``count`` acknowledgements of ``kind`` have arrived in all."""
        deadline = time.monotonic() + timeout_s
        with self._changed:
            while len(self._times[kind]) < count:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._changed.wait(remaining)
            return True

    def unexpected_refusals(self, allowed: Callable[[str], bool]) -> dict[str, int]:
        """The refusals whose label ``allowed`` refuses."""
        with self._changed:
            return {label: n for label, n in self.refusals.items() if not allowed(label)}

    def abandoned(self) -> int:
        """Reports refused because their lease was gone (the work ran again elsewhere)."""
        with self._changed:
            return sum(n for label, n in self.refusals.items() if label.split()[-1] in LEASE_LOST)


def acceptable_refusals(*statuses: str) -> Callable[[str], bool]:
    """Which refusals are acceptable under a fault: ``WORKLOAD_STORAGE_FAILURE`` with one
    of ``statuses`` (``"503"``: the server answered; ``"-"``: no HTTP answer, or no HTTP
    at all), a conflict, or a report whose lease the outage cost. Never a ``500``.
    """

    def allowed(label: str) -> bool:
        what, _, rest = label.partition(": ")
        status, _, code = rest.partition(" ")
        if code == STORAGE_FAILURE:
            return status in statuses
        return code == ErrorCode.WORKLOAD_CONFLICT.value or (
            code in LEASE_LOST and what in ("complete_many", "complete", "renew_leases", "start")
        )

    return allowed


# --- workers ---------------------------------------------------------------------------


class ObservedClient:
    """A :class:`~feltdb.client.protocol.WorkloadClient` that passes every call to
    ``inner`` and notes in ``ledger`` what it was answered: the completions acknowledged,
    refusals (also those of one item of a batch), and any exception that is not a
    :class:`~feltdb.WorkloadError`.
    """

    def __init__(self, inner: WorkloadClient, ledger: Ledger) -> None:
        self._inner = inner
        self._ledger = ledger

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._inner, name)
        if not callable(value):
            return value
        ledger = self._ledger

        def observed(*args: Any, **kwargs: Any) -> Any:
            if name == "complete_many":
                for item in args[0]:
                    ledger.tried_completion(item.result_id)
            elif name == "complete":
                ledger.tried_completion(kwargs.get("result_id", args[3] if len(args) > 3 else ""))
            answer = ledger.call(name, lambda: value(*args, **kwargs))
            if name == "complete_many":
                for item, each in zip(args[0], answer, strict=True):
                    if isinstance(each, WorkloadError):
                        ledger.refused(name, each)
                    else:
                        ledger.acknowledged_completion(item.workload_id, each.result_id)
            elif name == "complete":
                ledger.acknowledged_completion(answer.workload_id, answer.result_id)
            elif name in ("renew_leases", "heartbeat_many"):
                for each in answer:
                    if isinstance(each, WorkloadError):
                        ledger.refused(name, each)
            return answer

        return observed


def sdk_worker(
    client: WorkloadClient,
    ledger: Ledger,
    *,
    capabilities: Iterable[str],
    lease_ms: int,
    concurrency: int = 4,
) -> Worker:
    """A worker-SDK :class:`~feltdb.worker.Worker` working through ``client`` (observed),
    whose handler notes each run and answers the work's key.
    """
    worker = Worker(
        client=cast(WorkloadClient, ObservedClient(client, ledger)),
        capabilities=capabilities,
        concurrency=concurrency,
        lease_ms=lease_ms,
        poll_wait_s=0.5,
        grace_period_s=5.0,
    )

    @worker.handler(DEFINITION)
    def send(ctx: Context) -> dict[str, Any]:
        ledger.executed(ctx.workload_id)
        return {"key": ctx.input["key"]}

    return worker


def batch_worker(
    store: WorkloadStore,
    ledger: Ledger,
    capabilities: Iterable[str],
    *,
    tenant: str = "t",
    application: str = "app",
    limit: int = 20,
    pause_s: float = 0.05,
) -> Callable[[threading.Event], None]:
    """A worker loop on ``store``: ``claim_many(start=True)``, then ``complete_many`` of
    every claim, each completion resent unchanged after a transient refusal until it is
    answered. Leases outlive the test (nothing is recovered behind its back).
    """
    held = frozenset(capabilities)
    name = "worker:batch"

    def run(stop: threading.Event) -> None:
        while not stop.is_set():
            try:
                claims = ledger.call(
                    "claim_many",
                    lambda: store.claim_many(
                        tenant, application, name, held, limit, lease_ms=3_600_000, start=True
                    ),
                )
            except WorkloadError as error:
                if not is_transient(error):
                    raise
                stop.wait(pause_s)
                continue
            if not claims:
                stop.wait(pause_s / 2)
                continue
            pending = [
                Completion(
                    c.workload_id,
                    c.claim_id,
                    name,
                    c.fencing_token,
                    f"result-{c.claim_id}",
                    {"done": c.workload_id},
                )
                for c in claims
            ]
            for item in pending:
                ledger.tried_completion(item.result_id)
            while pending and not stop.is_set():
                try:
                    answers = ledger.call(
                        "complete_many", functools.partial(store.complete_many, pending)
                    )
                except WorkloadError as error:
                    if not is_transient(error):
                        raise
                    stop.wait(pause_s)
                    continue
                again = []
                for item, answer in zip(pending, answers, strict=True):
                    if isinstance(answer, WorkloadError):
                        ledger.refused("complete_many", answer)
                        if not is_transient(answer):
                            raise answer
                        again.append(item)
                    else:
                        ledger.acknowledged_completion(item.workload_id, answer.result_id)
                pending = again
                if pending:
                    stop.wait(pause_s)

    return run


# --- the load ---------------------------------------------------------------------------


class Load:
    """Submitter and worker threads; :meth:`stop` joins them, reporting any that hangs.

    ``admit(key)`` admits the workload of idempotency key ``key`` and answers it; a
    submitter calls it, pauses ``pause_s``, and goes on with the next key, resending a key
    after a transient refusal (pausing 20 ms, doubling up to :attr:`max_backoff_s`).
    """

    max_backoff_s = 0.2

    def __init__(self, ledger: Ledger, prefix: str, *, pause_s: float = 0.01) -> None:
        self.ledger = ledger
        self.prefix = prefix
        self.pause_s = pause_s
        self.failures: list[str] = []
        """Threads that ended on an exception, with its traceback."""
        self._submitting = threading.Event()
        self._stopping = threading.Event()
        self._submitters: list[threading.Thread] = []
        self._workers: list[tuple[threading.Thread, Worker | None]] = []
        self._owned: list[WorkloadClient] = []

    def own(self, client: T) -> T:
        """Close ``client`` once every thread has stopped (answers it)."""
        self._owned.append(cast(WorkloadClient, client))
        return client

    def add_submitter(self, admit: Callable[[str], Workload]) -> None:
        index = len(self._submitters)
        self._submitters.append(
            threading.Thread(
                target=self._guarded,
                args=(f"submitter {index}", self._submit, index, admit),
                name=f"fault-submitter-{index}",
                daemon=True,
            )
        )

    def add_worker(self, worker: Worker) -> None:
        index = len(self._workers)
        thread = threading.Thread(
            target=self._guarded, args=(f"worker {index}", worker.run),
            name=f"fault-worker-{index}", daemon=True,
        )  # fmt: skip
        self._workers.append((thread, worker))

    def add_loop(self, name: str, loop: Callable[[threading.Event], None]) -> None:
        thread = threading.Thread(
            target=self._guarded, args=(name, loop, self._stopping), name=f"fault-{name}",
            daemon=True,
        )  # fmt: skip
        self._workers.append((thread, None))

    def start(self) -> None:
        self._submitting.set()
        for thread in [*self._submitters, *(thread for thread, _ in self._workers)]:
            thread.start()

    def stop_submitting(self) -> None:
        """Stop admitting (each submitter finishes or gives up its current key) and wait."""
        self._submitting.clear()
        self._join(self._submitters)

    def stop(self) -> None:
        """Stop everything and wait for every thread (a hung one is a failure), then close
        the clients it owns. Stopping twice does nothing more.
        """
        self.stop_submitting()
        self._stopping.set()
        for _, worker in self._workers:
            if worker is not None:
                worker.stop()
        self._join([thread for thread, _ in self._workers])
        owned, self._owned = self._owned, []
        for client in owned:
            client.close()

    def _join(self, threads: list[threading.Thread]) -> None:
        deadline = time.monotonic() + JOIN_TIMEOUT_S
        for thread in threads:
            if thread.ident is not None:
                thread.join(max(0.0, deadline - time.monotonic()))
            message = f"{thread.name} did not stop within {JOIN_TIMEOUT_S}s"
            if thread.is_alive() and message not in self.failures:
                self.failures.append(message)

    def _guarded(self, name: str, body: Callable[..., None], *args: Any) -> None:
        try:
            body(*args)
        except BaseException as error:
            self.failures.append(f"{name}: {''.join(traceback.format_exception(error))}")

    def _submit(self, index: int, admit: Callable[[str], Workload]) -> None:
        number = 0
        while self._submitting.is_set():
            key = f"{self.prefix}-{index}-{number}"
            number += 1
            self.ledger.tried_admission(key)
            backoff = 0.02
            while self._submitting.is_set():
                try:
                    workload = self.ledger.call("admit", functools.partial(admit, key))
                except WorkloadError as error:
                    if not is_transient(error):
                        raise
                    self._stopping.wait(backoff)
                    backoff = min(backoff * 2, self.max_backoff_s)
                    continue
                self.ledger.acknowledged_admission(key, workload.workload_id)
                break
            self._stopping.wait(self.pause_s)


# --- the check --------------------------------------------------------------------------


@dataclass
class Audit:
    """The ledger against the store: the figures of a case, and what was wrong."""

    attempted: int
    acknowledged: int
    lost: int
    duplicated: int
    stored: int
    succeeded: int
    problems: list[str] = field(default_factory=list)

    def figures(self) -> dict[str, int]:
        return {
            "attempted": self.attempted,
            "acknowledged": self.acknowledged,
            "lost": self.lost,
            "duplicated": self.duplicated,
        }


def audit(ledger: Ledger, workloads: Iterable[Workload]) -> Audit:
    """Compare what was acknowledged with what the store holds.

    Lost: an acknowledged admission whose workload is missing (or is not the one
    answered), or an acknowledged completion whose workload is not ``SUCCEEDED`` with that
    result. Duplicated: a key admitted as two workloads (answered or stored), a workload
    completed with two different acknowledged results, or one with two succeeded attempts.
    """
    stored = {w.workload_id: w for w in workloads}
    by_key = Counter(w.idempotency_key for w in stored.values())
    problems: list[str] = []
    lost = duplicated = 0
    for key, answered in sorted(ledger.admitted.items()):
        if len(answered) > 1 or by_key[key] > 1:
            duplicated += 1
            problems.append(f"admission {key} answered {sorted(answered)}, stored {by_key[key]}x")
        if any(wid not in stored or stored[wid].idempotency_key != key for wid in answered):
            lost += 1
            problems.append(f"acknowledged admission {key} ({sorted(answered)}) is not stored")
    for workload_id, results in sorted(ledger.completed.items()):
        if len(results) > 1:
            duplicated += 1
            problems.append(f"{workload_id} was acknowledged two results: {sorted(results)}")
        workload = stored.get(workload_id)
        if (
            workload is None
            or workload.state is not WorkloadState.SUCCEEDED
            or workload.result is None
            or workload.result.result_id not in results
        ):
            lost += 1
            state = "missing" if workload is None else workload.state.value
            problems.append(f"acknowledged completion of {workload_id} is lost ({state})")
    for workload in stored.values():
        succeeded = [a for a in workload.attempts if a.status is AttemptStatus.SUCCEEDED]
        if len(succeeded) > 1:
            duplicated += 1
            problems.append(f"{workload.workload_id} has {len(succeeded)} succeeded attempts")
        sequences = [event.sequence for event in workload.execution_history]
        if sequences != list(range(1, len(sequences) + 1)):
            problems.append(f"{workload.workload_id}'s history is not gap-free: {sequences}")
    return Audit(
        attempted=len(ledger.admissions_tried) + len(ledger.completions_tried),
        acknowledged=len(ledger.admitted) + sum(len(r) for r in ledger.completed.values()),
        lost=lost,
        duplicated=duplicated,
        stored=len(stored),
        succeeded=sum(w.state is WorkloadState.SUCCEEDED for w in stored.values()),
        problems=problems[:20],
    )


def wait_until_settled(
    store: WorkloadStore, timeout_s: float, *, stop: threading.Event | None = None
) -> dict[str, int]:
    """Wait until every workload of ``store`` is ``SUCCEEDED`` (the workers drained it,
    the authority recovering what lost its lease); answers the counts by state at the end.
    """
    deadline = time.monotonic() + timeout_s
    pause = stop or threading.Event()
    while True:
        counts = {state.value: n for state, n in store.count_by_state().items() if n}
        if set(counts) <= {WorkloadState.SUCCEEDED.value} or time.monotonic() >= deadline:
            return counts
        pause.wait(0.2)
