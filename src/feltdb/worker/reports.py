"""One attempt walked through start, the handler and the report, and its heartbeats.

:class:`AttemptRunner` holds what a run of the worker shares (its client, its lease, its
handlers): :meth:`AttemptRunner.run` is one attempt thread's work, :meth:`AttemptRunner.beat`
one heartbeat. The authority decides; the runner only reports, once per attempt, and
nothing at all once the lease is lost.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from feltdb.auth.policy import worker_name
from feltdb.client.protocol import WorkloadClient
from feltdb.errors import ErrorCode, WorkloadError
from feltdb.work.models import Workload, WorkloadCheckpoint
from feltdb.worker.attempt import Attempt, answered, cancellation_requested, send
from feltdb.worker.attempt import heartbeat_interval_s as interval
from feltdb.worker.context import Context
from feltdb.worker.failures import (
    INVALID_OUTPUT_KIND,
    WITHHELD,
    FailureReport,
    LeaseLost,
    failure_report,
    is_lease_lost,
)
from feltdb.worker.handlers import Handler, HandlerLoop

log = logging.getLogger("feltdb.worker")

NO_HANDLER_KIND = "no_handler"
"""The kind reported for work of a definition this worker has no handler for (it never
started, so effect ``none``). Route work with capabilities so that it does not happen."""


class AttemptRunner:
    """Runs and reports attempts through ``client`` under leases of ``lease_ms``;
    ``completed()`` is called for each attempt that completed its work.
    """

    def __init__(
        self,
        client: WorkloadClient,
        lease_ms: int,
        handlers: Mapping[str, Handler],
        loop: HandlerLoop,
        completed: Callable[[], None],
    ) -> None:
        self.client = client
        self.lease_ms = lease_ms
        self.handlers = handlers
        self.loop = loop
        self.completed = completed

    def run(self, attempt: Attempt) -> None:
        """Read the claimed workload, start it, run its handler and report the outcome."""
        client = self.client
        workload = send(attempt, lambda: client.get(attempt.workload_id))
        if workload is None:
            return
        attempt.beat_every_s = interval(workload, self.lease_ms)
        attempt.next_beat = time.monotonic() + attempt.beat_every_s
        handler = self.handlers.get(workload.definition_id)
        if handler is None:
            self._unserved(attempt, workload)
            return
        try:
            if send(attempt, answered(lambda: client.start(*attempt.fence))) is None:
                return
        except WorkloadError as error:
            # Cancelled between the claim and the start: confirm it, or the claim is left
            # held (and the work unfinished) until its lease runs out.
            if not self.cancelled_meanwhile(attempt, error):
                raise
            if attempt.take_report():
                self.confirm_cancel(attempt)
            return
        # The workload read after the claim already holds the input and every checkpoint
        # (only this claim's holder can add one), so no second read is needed.
        ctx = Context(
            workload,
            attempt.claim,
            workload.input,
            workload.checkpoints,
            lambda state: self.checkpoint(attempt, state),
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
        result_id = f"result_{uuid.uuid4().hex}"  # one per attempt: a resend replays it
        try:
            result = send(attempt, lambda: self.client.complete(*attempt.fence, result_id, output))
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
            saved = send(attempt, lambda: self.client.checkpoint(*attempt.fence, state))
        except WorkloadError as error:
            if self.cancelled_meanwhile(attempt, error):
                attempt.stop_handler()
            raise
        if saved is None:  # the lease is gone: unwind the handler
            assert attempt.lost_by is not None  # send answers None only after lose()
            raise LeaseLost(attempt.lost_by)
        return saved

    def beat(self, attempt: Attempt) -> None:
        """Extend the attempt's lease, and look whether cancellation was requested."""
        if attempt.lost.is_set() or attempt.beat_every_s is None:
            return
        attempt.next_beat = time.monotonic() + attempt.beat_every_s
        try:
            attempt.claim = self.client.heartbeat(*attempt.fence, extend_ms=self.lease_ms)
            workload = self.client.get(attempt.workload_id)
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
