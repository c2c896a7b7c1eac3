"""The worker runtime: claim work, run its handler, keep the lease, report what happened.

Threads, and why:

- the **claim loop** (the thread that called :meth:`Worker.run`) claims as many workloads
  as slots are free, in one call that also starts them and answers each with its workload
  (long-polling while there is none), so no read or start call follows;
- one **attempt thread** per claimed workload runs its handler (an ``async`` one on the
  worker's event loop thread) and reports the outcome (a completion, by handing it over);
- the **completer thread** sends the completions of attempts finishing together as one
  call and one commit, and ends each attempt once its completion is answered
  (:mod:`feltdb.worker.completer`);
- the **heartbeat thread** renews every held lease due in one call, whose answer says
  whether cancellation was requested (setting ``ctx.cancelled``).

The authority decides everything; the runtime only reports. A report lost to the network
is sent again unchanged (a completion keeps its result id, so a repeat replays it). A
refusal that says the lease is gone (``WORKLOAD_TIMED_OUT``, ``WORKLOAD_STALE_FENCE``,
``WORKLOAD_CLAIM_INVALID``, ``WORKLOAD_LEASE_EXPIRED``) stops that attempt: nothing more
is reported for it, since another worker or the authority's recovery owns the work now.
"""

from __future__ import annotations

import builtins
import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, TypeVar, overload

from feltdb.auth.policy import worker_name
from feltdb.client.protocol import WorkloadClient
from feltdb.definitions import Definition
from feltdb.errors import ErrorCode, WorkloadError
from feltdb.limits import MAX_COMPLETION_WAIT_MS, MAX_CONCURRENCY
from feltdb.tracing import traced_claim
from feltdb.work import inputs
from feltdb.work.claimed import ClaimedWork
from feltdb.work.inputs import DEFAULT_LEASE_MS, MAX_BATCH_ITEMS
from feltdb.worker.attempt import Attempt, Backoff, heartbeat_interval_s
from feltdb.worker.completer import DEFAULT_BATCH_ITEMS, DEFAULT_BATCH_WAIT_S, batch_completer
from feltdb.worker.connecting import MAINTENANCE_INTERVAL_S, open_client, own_process, unkept
from feltdb.worker.failures import is_transient
from feltdb.worker.handlers import Handler, HandlerLoop
from feltdb.worker.health import Pulse
from feltdb.worker.reports import NO_HANDLER_KIND, AttemptRunner
from feltdb.worker.threads import AttemptThreads
from feltdb.worker.typed import In, Out, TypedHandler, handler_of

if TYPE_CHECKING:
    from feltdb.work.store import WorkloadStore

__all__ = ["MAINTENANCE_INTERVAL_S", "NO_HANDLER_KIND", "Handler", "Worker", "heartbeat_interval_s"]

log = logging.getLogger("feltdb.worker")

H = TypeVar("H", bound=Handler)

HEARTBEAT_TICK_S = 0.25
"""How often the heartbeat thread looks for a lease due for extension."""


class Worker:
    """Runs handlers for claimed work, against a server or a local store, through a
    :class:`~feltdb.client.WorkloadClient`.

    Args:
        url: the feltdb server to work for (with ``token``); or give ``store`` or
            ``client``.
        token: the worker's bearer token (its grant names the worker, the tenant and the
            application, and must hold ``workload:claim``).
        token_file: a file holding the token instead, re-read when it changes, so the
            token can be rotated without a restart (:mod:`feltdb.worker.tokens`).
        store: a local store to work on directly, with no server (embedded): the worker
            calls it through a :class:`~feltdb.client.LocalClient` as ``worker:NAME``,
            which also runs the authority's maintenance (every
            :data:`MAINTENANCE_INTERVAL_S`).
        client: a client to work through (a :class:`~feltdb.client.Client` or
            :class:`~feltdb.client.LocalClient` of yours; the worker never closes it).
        tenant, application: whose work is claimed (embedded; a server takes them from
            the token).
        capabilities: what this worker can do; only work whose capabilities these cover is
            claimed (over a server they narrow the token's grant).
        name: on a store, the worker is the subject ``worker:NAME`` (default
            ``HOST-PID``), recorded as ``worker:NAME`` as a server records the subject of a
            worker's token.
        lease_ms: the lease each claim asks for; heartbeats keep extending it.
        grace_period_s: on SIGTERM/SIGINT, how long running handlers may take to finish
            before they are reported failed (``worker_failure``, effect ``unknown``).
        poll_wait_s: how long one claim waits for work to appear (long-poll).
        concurrency: how many handlers run at once (1 to :data:`MAX_CONCURRENCY`); a
            claim asks for as many workloads as there are free slots, in one call.
        completion_batch: completions sent in one call at most (1 to 1,024): attempts
            finishing together are completed in one call and one commit (1: one call each).
        completion_wait_ms: how long a finished attempt waits for others to join its
            completion's call (0 to :data:`MAX_COMPLETION_WAIT_MS`); never longer than
            needed, since the call is sent at once when every running attempt is waiting
            on it. A completion is counted, and its slot freed, only once committed.

    Example:
        >>> worker = Worker("http://127.0.0.1:8700", token=token, capabilities={"email:send"})
        >>> @worker.handler("send-email")
        ... def send(ctx):
        ...     return {"sent": 1}
        >>> worker.run()  # doctest: +SKIP
    """

    def __init__(
        self,
        url: str | None = None,
        *,
        token: str | None = None,
        token_file: str | os.PathLike[str] | None = None,
        store: WorkloadStore | None = None,
        client: WorkloadClient | None = None,
        tenant: str = "default",
        application: str = "default",
        capabilities: Iterable[str] | None = None,
        concurrency: int = 1,
        name: str | None = None,
        lease_ms: int = DEFAULT_LEASE_MS,
        grace_period_s: float = 30.0,
        poll_wait_s: float = 2.0,
        completion_batch: int = DEFAULT_BATCH_ITEMS,
        completion_wait_ms: int = int(DEFAULT_BATCH_WAIT_S * 1000),
    ) -> None:
        # Bounds: a lease is whole seconds; a batch is one transaction's worth at most.
        inputs.integer(concurrency, "concurrency", 1, MAX_CONCURRENCY)
        inputs.integer(lease_ms, "lease_ms", 1000)
        inputs.integer(completion_batch, "completion_batch", 1, MAX_BATCH_ITEMS)
        inputs.integer(completion_wait_ms, "completion_wait_ms", 0, MAX_COMPLETION_WAIT_MS)
        self.url = url
        self.token = token
        self.token_file = token_file
        self.store = store
        self.client = client
        self.tenant = tenant
        self.application = application
        self.capabilities = None if capabilities is None else frozenset(capabilities)
        self.concurrency = concurrency
        self.name = name or f"{socket.gethostname()}-{os.getpid()}"
        self.lease_ms = lease_ms
        self.grace_period_s = grace_period_s
        self.poll_wait_s = poll_wait_s
        self.completion_batch = completion_batch
        self.completion_wait_ms = completion_wait_ms
        self.clock: Callable[[], int] | None = None
        """With a store: its calls' unix-seconds clock (``None``: the wall's); feltdb.testing
        sets it to run retries to their end without waiting for them."""
        self.handlers: dict[str, Handler] = {}
        self._stopping = threading.Event()
        self._hurry = threading.Event()
        self.pulse = Pulse(self._stopping)
        """What its claim loop last did, for health checks (:mod:`feltdb.worker.health`)."""
        self._active: dict[str, Attempt] = {}
        self._threads: AttemptThreads | None = None
        """The attempt threads of the run in progress (``None``: no run is)."""
        self._idle = threading.Condition()  # guards _active and completed; notified as attempts end
        self.completed = 0
        """Attempts this worker completed (work that succeeded here)."""

    # ------------------------------------------------------------------ setup

    @overload
    def handler(self, definition_id: str) -> Callable[[H], H]: ...

    @overload
    def handler(
        self, definition_id: Definition[In, Out]
    ) -> Callable[[TypedHandler[In, Out]], TypedHandler[In, Out]]: ...

    def handler(self, definition_id: str | Definition[Any, Any]) -> Callable[[Any], Any]:
        """Register the decorated function (sync or ``async``) as the handler of work of
        ``definition_id``: a definition id (the handler is called with a :class:`Context`
        and returns the output, JSON), or a typed :class:`~feltdb.definitions.Definition`
        (called with the context and the parsed input; see :mod:`feltdb.worker.typed`).
        """

        def register(function: Any) -> Any:
            served, handler = handler_of(definition_id, function)
            if served in self.handlers:
                raise WorkloadError(
                    ErrorCode.WORKLOAD_INVALID, f"a handler for {served!r} is already registered"
                )
            self.handlers[served] = handler
            return function

        return register

    def connect(
        self,
        url: str | None = None,
        *,
        token: str | None = None,
        token_file: str | os.PathLike[str] | None = None,
        store: WorkloadStore | None = None,
        client: WorkloadClient | None = None,
    ) -> None:
        """Point the worker at another authority before it runs (the ``feltdb worker``
        command's ``--url``/``--token``/``--token-file``/``--db``): a client, a store, or a
        server and a token or a token file (either replaces the worker's token and file).
        """
        if client is not None or store is not None:
            self.client, self.store, self.url = client, store, None
            self.token, self.token_file = None, None
        elif url is not None or token is not None or token_file is not None:
            self.client, self.store = None, None
            self.url = url if url is not None else self.url
            if token is not None or token_file is not None:
                self.token, self.token_file = token, token_file

    # ------------------------------------------------------------------ running

    def run(self) -> None:
        """Claim and run work until SIGTERM or SIGINT (or :meth:`stop`), then shut down
        gracefully: stop claiming, give running handlers ``grace_period_s`` to finish, and
        report those still running failed (``worker_failure``, effect ``unknown``). A second
        signal skips the rest of the grace period.

        Called from the main thread, it owns the process: it installs signal handlers and
        settles the heap (:func:`~feltdb.worker.connecting.own_process`); elsewhere neither.

        Raises:
            WorkloadError: the authority refused the worker itself (e.g. its token), or
                there is no authority to work for.
        """
        restore = own_process(self._on_signal)
        try:
            self._serve(until_idle=False)
        finally:
            restore()

    def drain(self, *, client: WorkloadClient | None = None) -> int:
        """Run work until none is claimable and none is running; how many attempts ran.
        For scripts and tests: the same runtime as :meth:`run`, without waiting for more.
        With ``client``, through it this once (the worker's own authority is left as it is).
        """
        return self._serve(until_idle=True, client=client)

    def stop(self, *, hurry: bool = False) -> None:
        """Stop claiming and shut down (from any thread); ``hurry`` ends the grace period."""
        if hurry:
            self._hurry.set()
        self._stopping.set()

    def _on_signal(self, name: str) -> None:
        if self._stopping.is_set():
            log.warning("%s again: ending the grace period now", name)
            self.stop(hurry=True)
        else:
            grace = self.grace_period_s
            log.info("%s: no more claims; running handlers have %.0fs to finish", name, grace)
            self.stop()

    def _serve(self, *, until_idle: bool, client: WorkloadClient | None = None) -> int:
        if not self.handlers:
            raise WorkloadError(
                ErrorCode.WORKLOAD_INVALID,
                "the worker has no handlers: register one with @worker.handler(definition_id)",
            )
        self._stopping.clear()
        self._hurry.clear()
        client, opened, keep = (client, False, unkept) if client is not None else open_client(self)
        completer = batch_completer(
            client, lambda waiting: waiting >= len(self._active), self.completion_batch,
            self.completion_wait_ms,
        )  # fmt: skip
        threads = AttemptThreads(self.concurrency, lambda a: self._run_attempt(runner, a))
        runner = AttemptRunner(
            client, self.lease_ms, self.handlers, HandlerLoop(), self._count_completed, completer,
            ended=lambda a: self._end(runner, a), later=threads.later, pulse=self.pulse,
        )  # fmt: skip
        self._threads = threads
        # Per run, so that a heartbeat thread of a previous run can never outlive it.
        beating = threading.Event()
        beats = threading.Thread(
            target=self._heartbeat_loop, args=(runner, beating), name="feltdb-heartbeat",
            daemon=True,
        )  # fmt: skip
        beating.set()
        beats.start()
        log.info(
            "worker %s: handlers %s, concurrency %d", worker_name(client.subject),
            ", ".join(sorted(self.handlers)), self.concurrency,
        )  # fmt: skip
        try:
            return self._claim_loop(runner, until_idle, keep)
        finally:
            self._stopping.set()
            self._shut_down(runner)
            threads.close()
            if completer is not None:
                completer.close()
            # Leases are kept through the grace period; only then do heartbeats stop.
            beating.clear()
            beats.join(timeout=5)
            runner.loop.close()
            if opened:
                client.close()

    def _claim_loop(self, runner: AttemptRunner, until_idle: bool, keep: Callable[[], None]) -> int:
        """Claim while a slot is free, until stopped (or, ``until_idle``, until nothing is
        claimable and nothing runs), calling ``keep`` before each pass; how many attempts
        were started.
        """
        started = 0
        delays = Backoff()
        while not self._stopping.is_set():
            keep()
            self.pulse.passed()
            free = self._free_slots()
            if not free:
                continue
            try:
                claimed = self._claim_work(
                    runner.client, free, 0.0 if until_idle else self.poll_wait_s
                )
            except WorkloadError as error:
                if not is_transient(error):
                    raise
                self.pulse.unreached(error)
                pause = delays.next()
                log.warning("cannot claim (%s); trying again in %.1fs", error, pause)
                self._stopping.wait(pause)
                continue
            delays.reset()
            self.pulse.reached()
            if not claimed:
                if until_idle and not self._wait_while_busy():
                    break
                continue
            for work in claimed:
                started += 1
                self._launch(runner, work)
        return started

    def _claim_work(
        self, client: WorkloadClient, free: int, wait_s: float
    ) -> builtins.list[ClaimedWork]:
        # As many as there are free slots, claimed and started in one commit, each with its
        # workload (no read follows); only work it has handlers for: the rest stays READY.
        return traced_claim(lambda: client.claim_work(
            min(free, MAX_BATCH_ITEMS), lease_ms=self.lease_ms, wait_ms=int(wait_s * 1000),
            capabilities=self.capabilities, definitions=self.handlers,
        ), lambda: worker_name(client.subject))  # fmt: skip

    def _free_slots(self) -> int:
        """How many more attempts may run now (after waiting a little when none may)."""
        with self._idle:
            free = self.concurrency - len(self._active)
            if free > 0:
                return free
            self._idle.wait(timeout=0.5)
            return 0

    def _wait_while_busy(self) -> bool:
        """With nothing claimable: wait for a running attempt to end (it may make more
        work claimable, e.g. a retry without backoff); ``False`` when none is running.
        """
        with self._idle:
            if not self._active:
                return False
            self._idle.wait(timeout=0.5)
            return True

    def _launch(self, runner: AttemptRunner, work: ClaimedWork) -> None:
        attempt = Attempt(work.claim, work.workload)
        with self._idle:
            self._active[attempt.workload_id] = attempt
        threads = self._threads
        assert threads is not None, "an attempt is launched only during a run"
        threads.submit(attempt)

    def _shut_down(self, runner: AttemptRunner) -> None:
        deadline = time.monotonic() + self.grace_period_s
        with self._idle:
            while self._active and not self._hurry.is_set():
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                self._idle.wait(timeout=min(remaining, 0.25))
            left = list(self._active.values())
        runner.fail_unfinished(left, self.grace_period_s)

    # ------------------------------------------------------------------ one attempt

    def _run_attempt(self, runner: AttemptRunner, attempt: Attempt) -> None:
        began = time.monotonic()
        try:
            runner.run(attempt)
        except Exception:  # the runtime's own failure must not take the worker down
            log.exception("attempt of %s failed inside the runtime", attempt.workload_id)
        finally:
            if not attempt.deferred:  # else the completer's answer ends it
                self._end(runner, attempt)
            log.debug("%s done in %.3fs", attempt.workload_id, time.monotonic() - began)

    def _end(self, runner: AttemptRunner, attempt: Attempt) -> None:
        with self._idle:  # its slot is free
            self._active.pop(attempt.workload_id, None)
            self._idle.notify_all()
        if runner.completer is not None:
            runner.completer.poke()  # the attempts left may all be waiting on it now

    def _count_completed(self) -> None:
        with self._idle:
            self.completed += 1

    def _heartbeat_loop(self, runner: AttemptRunner, beating: threading.Event) -> None:
        # Runs while `beating` is set: through a shutdown's grace period too, since running
        # handlers still need their leases kept.
        while beating.is_set():
            with self._idle:
                held = list(self._active.values())
            runner.beat_due(held)
            time.sleep(HEARTBEAT_TICK_S)
