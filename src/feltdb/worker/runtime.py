"""The worker runtime: claim work, run its handler, keep the lease, report what happened.

Threads, and why:

- the **claim loop** (the thread that called :meth:`Worker.run`) claims while a slot of
  ``concurrency`` is free, long-polling the authority;
- one **attempt thread** per claimed workload walks it through start, the handler and the
  report. A sync handler runs on it; an ``async`` handler runs on the worker's one event
  loop thread while the attempt thread waits for it;
- one **heartbeat thread** extends every held lease well inside its term and, on each
  beat, reads whether cancellation was requested, which sets the handler's
  ``ctx.cancelled`` (and cancels an ``async`` handler's task).

The authority decides everything; the runtime only reports. A report lost to the network
is sent again unchanged (a completion keeps its result id, so a repeat replays it). A
refusal that says the lease is gone (``WORKLOAD_TIMED_OUT``, ``WORKLOAD_STALE_FENCE``,
``WORKLOAD_CLAIM_INVALID``, ``WORKLOAD_LEASE_EXPIRED``) stops that attempt: nothing more
is reported for it, since another worker or the authority's recovery owns the work now.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import inspect
import logging
import os
import signal
import socket
import threading
import time
import uuid
from collections.abc import Awaitable, Callable, Iterable
from types import FrameType
from typing import Any, TypeVar

from feltdb.errors import ErrorCode, WorkloadError
from feltdb.work.models import Workload, WorkloadCheckpoint, WorkloadClaim
from feltdb.work.store import DEFAULT_LEASE_MS, WorkloadStore
from feltdb.worker.authority import (
    Authority,
    ServerAuthority,
    StoreAuthority,
    cancellation_requested,
)
from feltdb.worker.context import Context
from feltdb.worker.failures import (
    INVALID_OUTPUT_KIND,
    SHUTDOWN_KIND,
    WITHHELD,
    FailureReport,
    LeaseLost,
    failure_report,
    is_lease_lost,
    is_transient,
)

log = logging.getLogger("feltdb.worker")

Handler = Callable[[Context], Any]
"""A handler: ``def handler(ctx) -> output`` or ``async def handler(ctx) -> output``."""

H = TypeVar("H", bound=Handler)
T = TypeVar("T")

URL_ENV = "FELTDB_URL"
TOKEN_ENV = "FELTDB_TOKEN"

NO_HANDLER_KIND = "no_handler"
"""The kind reported for work of a definition this worker has no handler for (it never
started, so effect ``none``). Route work with capabilities so that it does not happen."""

HEARTBEAT_TICK_S = 0.25
"""How often the heartbeat thread looks for a lease due for extension."""

RETRY_DELAYS_S = (0.1, 0.25, 0.5, 1.0, 2.0)
"""Pauses between resends of a report that got no answer (the last one repeats)."""


def heartbeat_interval_s(workload: Workload, lease_ms: int) -> float:
    """How often to heartbeat ``workload`` held under a lease of ``lease_ms``: a third of
    the lease, or of the workload's heartbeat deadline when that is shorter, so two beats
    may be lost before either runs out. At least a quarter second.
    """
    term_ms = lease_ms
    if workload.timeouts.heartbeat_ms is not None:
        term_ms = min(term_ms, workload.timeouts.heartbeat_ms)
    return max(term_ms / 3000, 0.25)


class _Attempt:
    """One claimed workload on its way through the runtime; shared by its attempt thread,
    the heartbeat thread and a shutdown. ``take_report`` makes sure exactly one of them
    reports the outcome.
    """

    def __init__(self, claim: WorkloadClaim) -> None:
        self.claim = claim
        self.context: Context | None = None
        self.beat_every_s: float | None = None  # set once the workload is read
        self.next_beat = 0.0
        self.cancel_requested = threading.Event()
        self.lost = threading.Event()
        self.lost_by: WorkloadError | None = None  # the refusal that said so
        self.future: concurrent.futures.Future[Any] | None = None
        self._reported = False
        self._lock = threading.Lock()

    @property
    def workload_id(self) -> str:
        return self.claim.workload_id

    def take_report(self) -> bool:
        """Whether the caller is the one to report this attempt (first caller only)."""
        with self._lock:
            if self._reported or self.lost.is_set():
                return False
            self._reported = True
            return True

    def stop_handler(self) -> None:
        """Ask the handler to stop: set ``ctx.cancelled``, cancel an async handler's task."""
        if self.context is not None:
            self.context.cancelled.set()
        if self.future is not None:
            self.future.cancel()

    def request_cancel(self) -> None:
        """The authority asked to cancel: stop the handler, confirm when it has stopped."""
        self.cancel_requested.set()
        self.stop_handler()

    def lose(self, error: WorkloadError) -> None:
        """This worker no longer holds the work: stop the handler, report nothing more."""
        if not self.lost.is_set():
            log.warning("lost %s: %s; its handler is stopped", self.workload_id, error)
            self.lost_by = error
        self.lost.set()
        self.stop_handler()


class Worker:
    """Runs handlers for claimed work, against a server or a local store.

    Args:
        url: the feltdb server to work for (with ``token``); or give ``store``.
        token: the worker's bearer token (its grant names the worker, the tenant and the
            application, and must hold ``workload:claim``).
        store: a local store to work on directly, with no server (embedded).
        tenant: the tenant whose work is claimed (embedded; a server takes it from the token).
        application: the application whose work is claimed (likewise).
        capabilities: what this worker can do; only work whose capabilities these cover is
            claimed (over a server they narrow the token's grant).
        concurrency: how many handlers run at once.
        name: the worker's id on a store (default ``HOST-PID``); a server knows the worker
            as its token's subject.
        lease_ms: the lease each claim asks for; heartbeats keep extending it.
        grace_period_s: on SIGTERM/SIGINT, how long running handlers may take to finish
            before they are reported failed (``worker_failure``, effect ``unknown``).
        poll_wait_s: how long one claim waits for work to appear (long-poll).

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
        store: WorkloadStore | None = None,
        tenant: str = "default",
        application: str = "default",
        capabilities: Iterable[str] | None = None,
        concurrency: int = 1,
        name: str | None = None,
        lease_ms: int = DEFAULT_LEASE_MS,
        grace_period_s: float = 30.0,
        poll_wait_s: float = 2.0,
    ) -> None:
        if concurrency < 1:
            raise WorkloadError(
                ErrorCode.WORKLOAD_INVALID,
                "concurrency must be at least 1",
                {"fields": ["concurrency"]},
            )
        if lease_ms < 1000:
            raise WorkloadError(
                ErrorCode.WORKLOAD_INVALID,
                "lease_ms must be at least 1000 (leases are whole seconds)",
                {"fields": ["lease_ms"]},
            )
        self.url = url
        self.token = token
        self.store = store
        self.tenant = tenant
        self.application = application
        self.capabilities = None if capabilities is None else frozenset(capabilities)
        self.concurrency = concurrency
        self.name = name or f"{socket.gethostname()}-{os.getpid()}"
        self.lease_ms = lease_ms
        self.grace_period_s = grace_period_s
        self.poll_wait_s = poll_wait_s
        self.clock: Callable[[], int] | None = None
        """With a store: the unix-seconds clock its calls use (``None``: the wall's); set by
        ``feltdb.testing`` to run retries to their end without waiting for them."""
        self.handlers: dict[str, Handler] = {}
        self._stopping = threading.Event()
        self._hurry = threading.Event()
        self._active: dict[str, _Attempt] = {}
        self._idle = threading.Condition()  # guards _active and completed; notified as attempts end
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_lock = threading.Lock()
        self.completed = 0
        """Attempts this worker completed (work that succeeded here)."""

    # ------------------------------------------------------------------ setup

    def handler(self, definition_id: str) -> Callable[[H], H]:
        """Register the decorated function (sync or ``async``) as the handler of work of
        ``definition_id``. It is called with a :class:`Context`; what it returns (JSON) is
        the work's output.
        """

        def register(function: H) -> H:
            if definition_id in self.handlers:
                raise WorkloadError(
                    ErrorCode.WORKLOAD_INVALID,
                    f"a handler for {definition_id!r} is already registered",
                )
            self.handlers[definition_id] = function
            return function

        return register

    def connect(
        self,
        url: str | None = None,
        *,
        token: str | None = None,
        store: WorkloadStore | None = None,
    ) -> None:
        """Point the worker at another authority before it runs (the ``feltdb worker``
        command's ``--url``/``--token``/``--db``): a store, or a server and a token.
        """
        if store is not None:
            self.store, self.url, self.token = store, None, None
        elif url is not None or token is not None:
            self.store = None
            self.url = url if url is not None else self.url
            self.token = token if token is not None else self.token

    def _open_authority(self) -> Authority:
        if self.store is not None:
            return StoreAuthority(
                self.store,
                self.tenant,
                self.application,
                self.name,
                self.capabilities if self.capabilities is not None else (),
                self.clock,
            )
        url = self.url or os.environ.get(URL_ENV)
        token = self.token or os.environ.get(TOKEN_ENV)
        if not url or not token:
            raise WorkloadError(
                ErrorCode.WORKLOAD_INVALID,
                "the worker has no authority to work for: give a url and a token "
                f"(or set {URL_ENV} and {TOKEN_ENV}), or a store",
            )
        return ServerAuthority(url, token, self.capabilities)

    # ------------------------------------------------------------------ running

    def run(self) -> None:
        """Claim and run work until SIGTERM or SIGINT (or :meth:`stop`), then shut down
        gracefully: stop claiming, give running handlers ``grace_period_s`` to finish, and
        report those still running failed (``worker_failure``, effect ``unknown``). A second
        signal skips the rest of the grace period.

        Signal handlers are installed only when called from the main thread.

        Raises:
            WorkloadError: the authority refused the worker itself (e.g. its token), or
                there is no authority to work for.
        """
        restore = self._install_signals()
        try:
            self._serve(until_idle=False)
        finally:
            restore()

    def drain(self) -> int:
        """Run work until none is claimable and none is running; how many attempts ran.
        For scripts and tests: the same runtime as :meth:`run`, without waiting for more.
        """
        return self._serve(until_idle=True)

    def stop(self, *, hurry: bool = False) -> None:
        """Stop claiming and shut down (from any thread); ``hurry`` ends the grace period."""
        if hurry:
            self._hurry.set()
        self._stopping.set()

    def _install_signals(self) -> Callable[[], None]:
        if threading.current_thread() is not threading.main_thread():
            return lambda: None
        previous = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}

        def on_signal(signum: int, frame: FrameType | None) -> None:
            name = signal.Signals(signum).name
            if self._stopping.is_set():
                log.warning("%s again: ending the grace period now", name)
                self.stop(hurry=True)
            else:
                log.info(
                    "%s: no more claims; running handlers have %.0fs to finish",
                    name,
                    self.grace_period_s,
                )
                self.stop()

        for sig in previous:
            signal.signal(sig, on_signal)

        def restore() -> None:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

        return restore

    def _serve(self, *, until_idle: bool) -> int:
        if not self.handlers:
            raise WorkloadError(
                ErrorCode.WORKLOAD_INVALID,
                "the worker has no handlers: register one with @worker.handler(definition_id)",
            )
        self._stopping.clear()
        self._hurry.clear()
        authority = self._open_authority()
        # Per run, so that a heartbeat thread of a previous run can never outlive it.
        beating = threading.Event()
        beats = threading.Thread(
            target=self._heartbeat_loop,
            args=(authority, beating),
            name="feltdb-heartbeat",
            daemon=True,
        )
        beating.set()
        beats.start()
        started = 0
        delays = _Backoff()
        log.info(
            "worker %s: handlers %s, concurrency %d",
            authority.worker_id,
            ", ".join(sorted(self.handlers)),
            self.concurrency,
        )
        try:
            while not self._stopping.is_set():
                if not self._wait_for_slot():
                    continue
                wait_s = 0.0 if until_idle else self.poll_wait_s
                try:
                    # Only work it has a handler for: the rest is left READY for the
                    # workers that serve it (issue 10, point 1).
                    claim = authority.claim_next(wait_s, self.lease_ms, self.handlers)
                except WorkloadError as error:
                    if not is_transient(error):
                        raise
                    pause = delays.next()
                    log.warning("cannot claim (%s); trying again in %.1fs", error, pause)
                    self._stopping.wait(pause)
                    continue
                delays.reset()
                if claim is None:
                    if until_idle and not self._wait_while_busy():
                        break
                    continue
                started += 1
                self._launch(authority, claim)
        finally:
            self._stopping.set()
            self._shut_down(authority)
            # Leases are kept through the grace period; only then do heartbeats stop.
            beating.clear()
            beats.join(timeout=5)
            self._close_event_loop()
            authority.close()
        return started

    def _wait_for_slot(self) -> bool:
        with self._idle:
            if len(self._active) < self.concurrency:
                return True
            self._idle.wait(timeout=0.5)
            return False

    def _wait_while_busy(self) -> bool:
        """With nothing claimable: wait for a running attempt to end (it may make more
        work claimable, e.g. a retry without backoff); ``False`` when none is running.
        """
        with self._idle:
            if not self._active:
                return False
            self._idle.wait(timeout=0.5)
            return True

    def _launch(self, authority: Authority, claim: WorkloadClaim) -> None:
        attempt = _Attempt(claim)
        with self._idle:
            self._active[claim.workload_id] = attempt
        thread = threading.Thread(
            target=self._run_attempt,
            args=(authority, attempt),
            name=f"feltdb-attempt-{claim.workload_id}",
            # Daemon: a handler still running when the grace period ends must not keep the
            # process alive; it has been reported failed by then.
            daemon=True,
        )
        thread.start()

    def _shut_down(self, authority: Authority) -> None:
        deadline = time.monotonic() + self.grace_period_s
        with self._idle:
            while self._active and not self._hurry.is_set():
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                self._idle.wait(timeout=min(remaining, 0.25))
            left = list(self._active.values())
        for attempt in left:
            attempt.stop_handler()
            if not attempt.take_report():
                continue
            log.warning("%s still running at shutdown: reported failed", attempt.workload_id)
            report = FailureReport(
                SHUTDOWN_KIND,
                f"the worker shut down before the handler finished "
                f"(grace period {self.grace_period_s:g}s)",
                "unknown",
            )
            self._report_failure(authority, attempt, report)

    # ------------------------------------------------------------------ one attempt

    def _run_attempt(self, authority: Authority, attempt: _Attempt) -> None:
        began = time.monotonic()
        try:
            self._attempt(authority, attempt)
        except Exception:  # the runtime's own failure must not take the worker down
            log.exception("attempt of %s failed inside the runtime", attempt.workload_id)
        finally:
            with self._idle:
                self._active.pop(attempt.workload_id, None)
                self._idle.notify_all()
            log.debug("%s done in %.3fs", attempt.workload_id, time.monotonic() - began)

    def _attempt(self, authority: Authority, attempt: _Attempt) -> None:
        claim = attempt.claim
        workload = self._call(attempt, lambda: authority.get(claim.workload_id))
        if workload is None:
            return
        attempt.beat_every_s = heartbeat_interval_s(workload, self.lease_ms)
        attempt.next_beat = time.monotonic() + attempt.beat_every_s
        handler = self.handlers.get(workload.definition_id)
        if handler is None:
            # Claims name the handlers' definitions, so this is an authority that ignored
            # them (an older server): say so, and fail it so it is not held for a lease.
            log.warning(
                "claimed %s of definition %r, which no handler of this worker serves",
                claim.workload_id,
                workload.definition_id,
            )
            if attempt.take_report():
                report = FailureReport(
                    NO_HANDLER_KIND,
                    f"worker {authority.worker_id} has no handler for {workload.definition_id!r}",
                    "none",
                )
                self._report_failure(authority, attempt, report)
            return
        try:
            if self._call(attempt, _answered(lambda: authority.start(claim))) is None:
                return
        except WorkloadError as error:
            # Cancelled between the claim and the start: confirm it, or the claim is left
            # held (and the work unfinished) until its lease runs out.
            if not self._cancelled_meanwhile(authority, attempt, error):
                raise
            if attempt.take_report():
                self._confirm_cancel(authority, attempt)
            return

        def commit_checkpoint(state: Any) -> WorkloadCheckpoint:
            return self._checkpoint(authority, attempt, state)

        # The workload read after the claim already holds the input and every checkpoint
        # (only this claim's holder can add one), so no second read is needed.
        ctx = Context(workload, claim, workload.input, workload.checkpoints, commit_checkpoint)
        attempt.context = ctx
        if cancellation_requested(workload) or attempt.cancel_requested.is_set():
            ctx.cancelled.set()
        log.info(
            "running %s (%s), attempt %d", workload.workload_id, workload.definition_id, ctx.attempt
        )
        began = time.monotonic()
        try:
            output = self._invoke(handler, ctx, attempt)
        except BaseException as error:
            if isinstance(error, KeyboardInterrupt | SystemExit):
                raise
            self._after_error(authority, attempt, ctx, error)
            return
        self._after_return(authority, attempt, output, time.monotonic() - began)

    def _invoke(self, handler: Handler, ctx: Context, attempt: _Attempt) -> Any:
        if not inspect.iscoroutinefunction(handler):
            return handler(ctx)
        coroutine: Awaitable[Any] = handler(ctx)
        future = asyncio.run_coroutine_threadsafe(_awaited(coroutine), self._event_loop())
        attempt.future = future
        if attempt.cancel_requested.is_set() or attempt.lost.is_set():
            future.cancel()
        return future.result()

    def _event_loop(self) -> asyncio.AbstractEventLoop:
        """The worker's one event loop for ``async`` handlers, started on first use."""
        with self._loop_lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                threading.Thread(
                    target=loop.run_forever, name="feltdb-async-handlers", daemon=True
                ).start()
                self._loop = loop
            return self._loop

    def _close_event_loop(self) -> None:
        """Cancel what still runs on the async handlers' loop (handlers abandoned at
        shutdown), then stop and close it; the next run starts a new one.
        """
        with self._loop_lock:
            loop, self._loop = self._loop, None
        if loop is None:
            return
        with contextlib.suppress(concurrent.futures.TimeoutError, RuntimeError):
            asyncio.run_coroutine_threadsafe(_cancel_all(), loop).result(timeout=5)
        loop.call_soon_threadsafe(loop.stop)
        for _ in range(100):  # up to 5 s for run_forever to return
            if not loop.is_running():
                loop.close()
                return
            time.sleep(0.05)
        log.warning("an async handler ignores cancellation; its event loop is left running")

    def _after_return(
        self, authority: Authority, attempt: _Attempt, output: Any, took_s: float
    ) -> None:
        if attempt.lost.is_set() or not attempt.take_report():
            return
        if attempt.cancel_requested.is_set():
            self._confirm_cancel(authority, attempt)
            return
        claim = attempt.claim
        result_id = f"result_{uuid.uuid4().hex}"  # one per attempt: a resend replays it
        try:
            result = self._call(attempt, lambda: authority.complete(claim, result_id, output))
        except WorkloadError as error:
            if self._cancelled_meanwhile(authority, attempt, error):
                self._confirm_cancel(authority, attempt)
            elif error.code in (ErrorCode.WORKLOAD_INVALID, ErrorCode.WORKLOAD_SECRET_REJECTED):
                log.error("%s: the output was refused (%s)", attempt.workload_id, error)
                report = FailureReport(
                    INVALID_OUTPUT_KIND, f"the output was refused: {error.message}", "unknown"
                )
                self._report_failure(authority, attempt, report)
            else:
                log.error("%s: the completion was refused (%s)", attempt.workload_id, error)
            return
        if result is not None:
            with self._idle:
                self.completed += 1
            log.info("completed %s in %.3fs", attempt.workload_id, took_s)

    def _after_error(
        self, authority: Authority, attempt: _Attempt, ctx: Context, error: BaseException
    ) -> None:
        if isinstance(error, LeaseLost) or attempt.lost.is_set():
            return
        if not attempt.take_report():
            return
        if attempt.cancel_requested.is_set():
            # However the handler ended (a CancelledError, an exception of its own), the
            # authority asked it to stop: confirm rather than report a failure.
            self._confirm_cancel(authority, attempt)
            return
        report = failure_report(error, progressed=ctx.progressed)
        log.warning(
            "%s failed: %s (kind %s, effect %s)",
            attempt.workload_id,
            report.error,
            report.kind,
            report.effect or "as reported",
        )
        self._report_failure(authority, attempt, report)

    def _report_failure(
        self, authority: Authority, attempt: _Attempt, report: FailureReport
    ) -> None:
        claim = attempt.claim
        try:
            self._call(
                attempt, lambda: authority.fail(claim, report.kind, report.error, report.effect)
            )
        except WorkloadError as error:
            if error.code == ErrorCode.WORKLOAD_SECRET_REJECTED:
                # The message carried something that looks like a secret: report the
                # failure without it rather than not at all.
                withheld = FailureReport(report.kind, WITHHELD, report.effect)
                self._report_failure(authority, attempt, withheld)
            elif self._cancelled_meanwhile(authority, attempt, error):
                self._confirm_cancel(authority, attempt)
            else:
                log.error("%s: the failure report was refused (%s)", attempt.workload_id, error)

    def _confirm_cancel(self, authority: Authority, attempt: _Attempt) -> None:
        claim = attempt.claim
        try:
            if self._call(attempt, _answered(lambda: authority.confirm_cancel(claim))):
                log.info("cancelled %s", attempt.workload_id)
        except WorkloadError as error:
            log.error("%s: confirming the cancellation was refused (%s)", claim.workload_id, error)

    def _cancelled_meanwhile(
        self, authority: Authority, attempt: _Attempt, error: WorkloadError
    ) -> bool:
        """Whether a report was refused because cancellation was requested after the last
        heartbeat looked (the report's refusal does not say why; the workload does).
        """
        if error.code != ErrorCode.WORKLOAD_TRANSITION_DENIED:
            return False
        try:
            workload = authority.get(attempt.workload_id)
        except WorkloadError:
            return False
        if cancellation_requested(workload):
            attempt.cancel_requested.set()
            return True
        return False

    def _checkpoint(
        self, authority: Authority, attempt: _Attempt, state: Any
    ) -> WorkloadCheckpoint:
        claim = attempt.claim
        try:
            saved = self._call(attempt, lambda: authority.checkpoint(claim, state))
        except WorkloadError as error:
            if self._cancelled_meanwhile(authority, attempt, error):
                attempt.stop_handler()
            raise
        if saved is None:  # the lease is gone: unwind the handler
            assert attempt.lost_by is not None  # _call answers None only after lose()
            raise LeaseLost(attempt.lost_by)
        return saved

    def _call(self, attempt: _Attempt, call: Callable[[], T]) -> T | None:
        """``call()`` for ``attempt``: resent while no answer arrives (until the lease runs
        out), ``None`` when the lease is lost (the attempt is then stopped); any other
        refusal is raised.
        """
        delays = _Backoff()
        while True:
            try:
                answer = call()
                return answer
            except WorkloadError as error:
                if is_lease_lost(error):
                    attempt.lose(error)
                    return None
                if not is_transient(error) or attempt.lost.is_set():
                    raise
                if time.time() >= attempt.claim.expires_at + 1:
                    # Past the lease: the authority will refuse anything now, and recovery
                    # owns the work.
                    attempt.lose(error)
                    return None
                pause = delays.next()
                log.warning("%s: %s; sending again in %.1fs", attempt.workload_id, error, pause)
                time.sleep(pause)

    # ------------------------------------------------------------------ heartbeats

    def _heartbeat_loop(self, authority: Authority, beating: threading.Event) -> None:
        # Runs while `beating` is set: through a shutdown's grace period too, since running
        # handlers still need their leases kept.
        while beating.is_set():
            with self._idle:
                due = [
                    a
                    for a in self._active.values()
                    if a.beat_every_s is not None and time.monotonic() >= a.next_beat
                ]
            for attempt in due:
                self._beat(authority, attempt)
            time.sleep(HEARTBEAT_TICK_S)

    def _beat(self, authority: Authority, attempt: _Attempt) -> None:
        if attempt.lost.is_set() or attempt.beat_every_s is None:
            return
        attempt.next_beat = time.monotonic() + attempt.beat_every_s
        try:
            attempt.claim = authority.heartbeat(attempt.claim, self.lease_ms)
            workload = authority.get(attempt.workload_id)
        except WorkloadError as error:
            if is_lease_lost(error):
                attempt.lose(error)
            else:
                # Try again soon: two beats fit in the lease before it could run out.
                log.warning("heartbeat of %s failed: %s", attempt.workload_id, error)
                attempt.next_beat = time.monotonic() + min(1.0, attempt.beat_every_s)
            return
        if cancellation_requested(workload) and not attempt.cancel_requested.is_set():
            log.info("cancellation of %s requested: stopping its handler", attempt.workload_id)
            attempt.request_cancel()


def _answered(call: Callable[[], None]) -> Callable[[], bool]:
    """``call`` answering ``True`` once it returned: for the calls that answer nothing,
    since :meth:`Worker._call` answers ``None`` for a lost lease.
    """

    def run() -> bool:
        call()
        return True

    return run


async def _awaited(coroutine: Awaitable[T]) -> T:
    return await coroutine


async def _cancel_all() -> None:
    """Cancel every other task of the running loop and wait for them to end."""
    tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


class _Backoff:
    """Pauses that grow along :data:`RETRY_DELAYS_S`, then stay at the last."""

    def __init__(self) -> None:
        self._step = 0

    def next(self) -> float:
        delay = RETRY_DELAYS_S[min(self._step, len(RETRY_DELAYS_S) - 1)]
        self._step += 1
        return delay

    def reset(self) -> None:
        self._step = 0
