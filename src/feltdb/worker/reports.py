"""One attempt walked through start, the handler and the report, and its heartbeats.

:class:`AttemptRunner` holds what a run of the worker shares (its client, its lease, its
handlers): :meth:`AttemptRunner.run` is one attempt thread's work, :meth:`AttemptRunner.beat`
one heartbeat. The authority decides; the runner only reports, once per attempt, and
nothing at all once the lease is lost.
"""

from __future__ import annotations

import logging
import secrets
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from feltdb.auth.policy import worker_name
from feltdb.client.batches import CompletionItem, HeartbeatItem
from feltdb.client.protocol import WorkloadClient
from feltdb.errors import ErrorCode, WorkloadError
from feltdb.records.workload import Workload, WorkloadCheckpoint, WorkloadResult
from feltdb.tracing import child, end, failed, running, start_child, start_run
from feltdb.work.claimed import LeaseRenewal
from feltdb.work.inputs import MAX_BATCH_ITEMS
from feltdb.work.states import WorkloadState
from feltdb.worker.attempt import Attempt, answered, cancellation_requested, send
from feltdb.worker.attempt import heartbeat_interval_s as interval
from feltdb.worker.completer import BatchCompleter
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
from feltdb.worker.handlers import Handler, HandlerLoop
from feltdb.worker.health import Pulse

log = logging.getLogger("feltdb.worker")

NO_HANDLER_KIND = "no_handler"
"""The kind reported for work of a definition this worker has no handler for (it never
started, so effect ``none``). Route work with capabilities so that it does not happen."""


class AttemptRunner:
    """Runs and reports attempts through ``client`` under leases of ``lease_ms``;
    ``completed()`` is called for each attempt that completed its work.

    With a ``completer``, an attempt's thread hands the completion over and returns: the
    completer's answer ends the attempt (``ended(attempt)``), or, refused, is decided on an
    attempt thread (``later(attempt, job)``), as the single call's refusal would be.
    The ``pulse`` is told of each heartbeat call and of the attempts holding the slots.
    """

    def __init__(
        self,
        client: WorkloadClient,
        lease_ms: int,
        handlers: Mapping[str, Handler],
        loop: HandlerLoop,
        completed: Callable[[], None],
        completer: BatchCompleter | None = None,
        *,
        ended: Callable[[Attempt], None] = lambda attempt: None,
        later: Callable[[Attempt, Callable[[], None]], None] = lambda attempt, job: job(),
        pulse: Pulse | None = None,
    ) -> None:
        self.client = client
        self.lease_ms = lease_ms
        self.handlers = handlers
        self.loop = loop
        self.completed = completed
        self.completer = completer
        """Completions go through it when set (in batches), else one call each."""
        self.ended = ended
        self.later = later
        self.pulse = pulse

    def run(self, attempt: Attempt) -> None:
        """Start the claimed workload (unless its claim started it), run its handler and
        report the outcome. The claim's answer carried the workload: nothing is read.
        Traced (:mod:`feltdb.tracing`), all of it is the attempt's ``feltdb.run`` span.
        """
        attempt.span = start_run(attempt.workload, lambda: worker_name(self.client.subject))
        with running(attempt.span):
            self._run(attempt)

    def _run(self, attempt: Attempt) -> None:
        client = self.client
        workload = attempt.workload
        attempt.beat_every_s = interval(workload, self.lease_ms)
        attempt.next_beat = time.monotonic() + attempt.beat_every_s
        handler = self.handlers.get(workload.definition_id)
        if handler is None:
            self._unserved(attempt, workload)
            return
        try:
            if workload.state is WorkloadState.CLAIMED and (
                send(attempt, answered(lambda: client.start(*attempt.fence))) is None
            ):
                return
        except WorkloadError as error:
            # Cancelled between the claim and the start: confirm it, or the claim is left
            # held (and the work unfinished) until its lease runs out.
            if not self.cancelled_meanwhile(attempt, error):
                raise
            if attempt.take_report():
                self.confirm_cancel(attempt)
            return
        # The workload as claimed already holds the input and every checkpoint (only this
        # claim's holder can add one), so no read is needed.
        ctx = Context(
            workload,
            attempt.claim,
            workload.input,
            workload.checkpoints,
            lambda state: self.checkpoint(attempt, state),
            lambda: client.execution_context(*attempt.fence).dependency_outputs,
        )
        attempt.context = ctx
        if cancellation_requested(workload) or attempt.cancel_requested.is_set():
            ctx.cancelled.set()
        log.info(
            "running %s (%s), attempt %d", workload.workload_id, workload.definition_id, ctx.attempt
        )
        began = time.monotonic()
        try:
            output = self.loop.invoke(handler, ctx, attempt)
        except BaseException as error:
            if isinstance(error, KeyboardInterrupt | SystemExit):
                raise
            self.after_error(attempt, ctx, error)
            return
        self.after_return(attempt, output, time.monotonic() - began)

    def _unserved(self, attempt: Attempt, workload: Workload) -> None:
        # Claims name the handlers' definitions, so this is an authority that ignored them
        # (an older server): say so, and fail it so it is not held for a lease.
        log.warning(
            "claimed %s of definition %r, which no handler of this worker serves",
            attempt.workload_id,
            workload.definition_id,
        )
        if attempt.take_report():
            who = worker_name(self.client.subject)
            report = FailureReport(
                NO_HANDLER_KIND, f"worker {who} has no handler for {workload.definition_id!r}",
                "none",
            )  # fmt: skip
            self.fail(attempt, report)

    def after_return(self, attempt: Attempt, output: Any, took_s: float) -> None:
        """The handler returned ``output``: complete the work (or confirm a cancellation)."""
        if attempt.lost.is_set() or not attempt.take_report():
            return
        if attempt.cancel_requested.is_set():
            self.confirm_cancel(attempt)
            return
        result_id = f"result_{secrets.token_hex(16)}"  # one per attempt: a resend replays it
        if self.completer is not None:
            # The completer's thread acts on the answer: no thread is woken to learn it.
            item = CompletionItem(*attempt.fence, result_id, output)
            attempt.deferred = True
            attempt.completing = start_child(attempt.span, "feltdb.complete")
            try:
                self.completer.submit(
                    item,
                    lambda outcome: self._answered(attempt, outcome, result_id, output, took_s),
                )
            except RuntimeError:
                # Closed (a shutdown's end, between this attempt taking its report and the
                # unfinished being failed): complete by the single call, or it is lost.
                attempt.deferred = False
                end(attempt.completing)
            except BaseException as error:  # not handed over: the thread ends the attempt
                attempt.deferred = False
                end(attempt.completing, error)
                raise
            else:
                return
        self.report_completion(attempt, result_id, output, took_s)

    def _answered(
        self,
        attempt: Attempt,
        outcome: WorkloadResult | BaseException,
        result_id: str,
        output: Any,
        took_s: float,
    ) -> None:
        """On the completer's thread: the completion's answer. A refusal (or a failed call)
        is decided on an attempt thread, by sending the completion again as the single call
        (the same result id: a repeat replays, a refusal repeats), since that may wait, and
        never through the completer, which may be closed by then (a shutdown's last batch).
        """
        end(attempt.completing, outcome if isinstance(outcome, BaseException) else None)
        if isinstance(outcome, BaseException):

            def decide() -> None:
                try:
                    self.report_completion(attempt, result_id, output, took_s)
                finally:
                    self.ended(attempt)

            try:
                self.later(attempt, decide)
            except Exception:  # no thread to decide it on: the attempt must still end
                self.ended(attempt)
                raise
            return
        try:
            self._completed(attempt, took_s)
        finally:
            self.ended(attempt)

    def report_completion(
        self, attempt: Attempt, result_id: str, output: Any, took_s: float
    ) -> None:
        """Complete the attempt's work with ``output`` by the single call (waiting for the
        answer): resent while no answer arrives; a refusal is reported as it says.
        """
        fence = attempt.fence
        try:
            with child(attempt.span, "feltdb.complete"):
                result = send(attempt, lambda: self.client.complete(*fence, result_id, output))
        except WorkloadError as error:
            if self.cancelled_meanwhile(attempt, error):
                self.confirm_cancel(attempt)
            elif error.code in (ErrorCode.WORKLOAD_INVALID, ErrorCode.WORKLOAD_SECRET_REJECTED):
                log.error("%s: the output was refused (%s)", attempt.workload_id, error)
                report = FailureReport(
                    INVALID_OUTPUT_KIND, f"the output was refused: {error.message}", "unknown"
                )
                self.fail(attempt, report)
            else:
                log.error("%s: the completion was refused (%s)", attempt.workload_id, error)
            return
        if result is not None:
            self._completed(attempt, took_s)

    def _completed(self, attempt: Attempt, took_s: float) -> None:
        """The attempt's completion committed: counted and logged, however it was sent."""
        self.completed()
        log.info("completed %s in %.3fs", attempt.workload_id, took_s)

    def after_error(self, attempt: Attempt, ctx: Context, error: BaseException) -> None:
        """The handler raised ``error``: report the failure (or confirm a cancellation)."""
        if isinstance(error, LeaseLost) or attempt.lost.is_set():
            return
        if not attempt.take_report():
            return
        if attempt.cancel_requested.is_set():
            # However the handler ended (a CancelledError, an exception of its own), the
            # authority asked it to stop: confirm rather than report a failure.
            self.confirm_cancel(attempt)
            return
        report = failure_report(error, progressed=ctx.progressed)
        failed(attempt.span, error)
        log.warning(
            "%s failed: %s (kind %s, effect %s)",
            attempt.workload_id,
            report.error,
            report.kind,
            report.effect or "as reported",
        )
        self.fail(attempt, report)

    def fail(self, attempt: Attempt, report: FailureReport) -> None:
        """Report the attempt failed as ``report`` says."""
        try:
            with child(attempt.span, "feltdb.fail", **{"feltdb.failure.kind": report.kind}):
                send(
                    attempt,
                    lambda: self.client.fail(
                        *attempt.fence, report.kind, report.error, effect=report.effect
                    ),
                )
        except WorkloadError as error:
            if error.code == ErrorCode.WORKLOAD_SECRET_REJECTED:
                # The message carried something that looks like a secret: report the
                # failure without it rather than not at all.
                self.fail(attempt, FailureReport(report.kind, WITHHELD, report.effect))
            elif self.cancelled_meanwhile(attempt, error):
                self.confirm_cancel(attempt)
            else:
                log.error("%s: the failure report was refused (%s)", attempt.workload_id, error)

    def confirm_cancel(self, attempt: Attempt) -> None:
        """Confirm the cancellation the authority asked for."""
        try:
            if send(attempt, answered(lambda: self.client.confirm_cancel(*attempt.fence))):
                log.info("cancelled %s", attempt.workload_id)
        except WorkloadError as error:
            log.error(
                "%s: confirming the cancellation was refused (%s)", attempt.workload_id, error
            )

    def cancelled_meanwhile(self, attempt: Attempt, error: WorkloadError) -> bool:
        """Whether a report was refused because cancellation was requested after the last
        heartbeat looked (the report's refusal does not say why; the workload does).
        """
        if error.code != ErrorCode.WORKLOAD_TRANSITION_DENIED:
            return False
        try:
            workload = self.client.get(attempt.workload_id)
        except WorkloadError:
            return False
        if cancellation_requested(workload):
            attempt.cancel_requested.set()
            return True
        return False

    def checkpoint(self, attempt: Attempt, state: Any) -> WorkloadCheckpoint:
        """Commit ``state`` for the handler (``ctx.checkpoint``); :class:`LeaseLost` once
        the lease is gone.
        """
        try:
            with child(attempt.span, "feltdb.checkpoint"):
                saved = send(attempt, lambda: self.client.checkpoint(*attempt.fence, state))
        except WorkloadError as error:
            if self.cancelled_meanwhile(attempt, error):
                attempt.stop_handler()
            raise
        if saved is None:  # the lease is gone: unwind the handler
            assert attempt.lost_by is not None  # send answers None only after lose()
            raise LeaseLost(attempt.lost_by)
        return saved

    def fail_unfinished(self, attempts: Sequence[Attempt], grace_period_s: float) -> None:
        """Stop the handlers still running at shutdown, and report each attempt failed
        (``worker_failure``, effect ``unknown``) unless it was already reported.
        """
        for attempt in attempts:
            attempt.stop_handler()
            if not attempt.take_report():
                continue
            log.warning("%s still running at shutdown: reported failed", attempt.workload_id)
            report = FailureReport(
                SHUTDOWN_KIND,
                f"the worker shut down before the handler finished "
                f"(grace period {grace_period_s:g}s)",
                "unknown",
            )
            self.fail(attempt, report)

    def beat_due(self, attempts: Sequence[Attempt]) -> None:
        """When a lease of ``attempts`` is due for extension, extend in one call every
        lease due, and those due within half their interval with them: leases claimed
        together keep being renewed together, rather than one call each as they fall due
        a tick apart. The pulse learns which attempts hold the slots.
        """
        if self.pulse is not None:
            self.pulse.holding(attempts)
        now = time.monotonic()
        # A lost attempt is never renewed (its next beat never moves): left in, it would
        # make every tick look due.
        held = [(a, a.beat_every_s) for a in attempts if a.beat_every_s and not a.lost.is_set()]
        if any(now >= a.next_beat for a, _ in held):
            self.beat([a for a, every in held if now >= a.next_beat - every / 2])

    def beat(self, attempts: Sequence[Attempt]) -> None:
        """Extend the leases of ``attempts`` in one call per :data:`MAX_BATCH_ITEMS`, and
        learn from the same answers whether cancellation was requested.
        """
        live = [a for a in attempts if not a.lost.is_set() and a.beat_every_s is not None]
        for first in range(0, len(live), MAX_BATCH_ITEMS):
            self._beat_batch(live[first : first + MAX_BATCH_ITEMS])

    def _beat_batch(self, attempts: Sequence[Attempt]) -> None:
        now = time.monotonic()
        for attempt in attempts:
            assert attempt.beat_every_s is not None
            attempt.next_beat = now + attempt.beat_every_s
        items = [HeartbeatItem(*a.fence, extend_ms=self.lease_ms) for a in attempts]
        try:
            answers: Sequence[LeaseRenewal | WorkloadError] = self.client.renew_leases(items)
        except WorkloadError as error:
            answers = [error] * len(attempts)
            if self.pulse is not None and is_transient(error):
                self.pulse.beat(error)  # unreached: while every slot is busy, no claim says so
        else:
            if self.pulse is not None:
                self.pulse.beat(None)
        for attempt, answer in zip(attempts, answers, strict=True):
            if isinstance(answer, WorkloadError):
                _beat_refused(attempt, answer)
                continue
            attempt.claim = answer.claim
            if answer.cancellation_requested and not attempt.cancel_requested.is_set():
                log.info("cancellation of %s requested: stopping its handler", attempt.workload_id)
                attempt.request_cancel()


def _beat_refused(attempt: Attempt, error: WorkloadError) -> None:
    if is_lease_lost(error):
        attempt.lose(error)
        return
    # Try again soon: two beats fit in the lease before it could run out.
    log.warning("heartbeat of %s failed: %s", attempt.workload_id, error)
    assert attempt.beat_every_s is not None
    attempt.next_beat = time.monotonic() + min(1.0, attempt.beat_every_s)
