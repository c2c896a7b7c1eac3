"""The batch completer: completions of many attempts sent in one call, one transaction.

An attempt thread hands its completion to :meth:`BatchCompleter.submit` with what to do
with its answer, and goes back to its pool: the answer is acted on by the completer's
thread once the authority committed it, so the work is reported done (and its slot freed)
only once committed, and no thread is woken per completion to learn it. (The worker
decides a refusal on an attempt thread, by the single call, since that may wait.)

The completer's thread sends what is waiting as one ``complete_many`` when ``max_items``
are waiting, when the first has waited ``max_wait_s``, or at once when every running
attempt is waiting (nothing else can join the batch, so waiting longer would only delay
it). A single completion therefore costs no more than before, and many finishing
together cost one commit.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence

from feltdb.client.batches import CompletionItem
from feltdb.client.protocol import WorkloadClient
from feltdb.errors import WorkloadError
from feltdb.records.workload import WorkloadResult
from feltdb.work.inputs import MAX_BATCH_ITEMS

log = logging.getLogger("feltdb.worker")

DEFAULT_BATCH_ITEMS = 100
"""Completions sent in one call at most, by default (River's batch completer's figure)."""
DEFAULT_BATCH_WAIT_S = 0.02
"""How long the first waiting completion waits for others to join it, by default."""

Answered = Callable[[WorkloadResult | BaseException], None]
"""What is done with a completion's answer: its result, or its refusal (or the call's
failure); called on the completer's thread, so it must not wait."""

_Waiting = tuple[CompletionItem, Answered]


def batch_completer(
    client: WorkloadClient, waiting_all: Callable[[int], bool], max_items: int, max_wait_ms: int
) -> BatchCompleter | None:
    """A :class:`BatchCompleter` sending up to ``max_items`` per call; ``None`` (one call
    per completion) when ``max_items`` is 1.
    """
    if max_items <= 1:
        return None
    return BatchCompleter(client, waiting_all, max_items=max_items, max_wait_s=max_wait_ms / 1000)


class BatchCompleter:
    """Sends completions through ``client.complete_many`` in batches.

    Args:
        client: the authority's client.
        waiting_all: ``waiting_all(n)`` says whether ``n`` waiting completions are every
            running attempt's (then the batch is sent without waiting longer).
        max_items: the most completions per call (1 to 1,024).
        max_wait_s: the longest the first waiting completion waits for others.
    """

    def __init__(
        self,
        client: WorkloadClient,
        waiting_all: Callable[[int], bool],
        *,
        max_items: int = DEFAULT_BATCH_ITEMS,
        max_wait_s: float = DEFAULT_BATCH_WAIT_S,
    ) -> None:
        self.client = client
        self.waiting_all = waiting_all
        self.max_items = max(1, min(max_items, MAX_BATCH_ITEMS))
        self.max_wait_s = max(0.0, max_wait_s)
        self._pending: list[_Waiting] = []
        self._first_at = 0.0
        self._changed = threading.Condition()
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="feltdb-completer", daemon=True)
        self._thread.start()

    def submit(self, item: CompletionItem, answered: Answered) -> None:
        """Complete ``item`` in the next batch; ``answered`` is called with its answer
        on the completer's thread once the call returned (see :data:`Answered`).
        """
        with self._changed:
            if self._closed:
                raise RuntimeError("the batch completer is closed")
            if not self._pending:
                self._first_at = time.monotonic()
            self._pending.append((item, answered))
            self._changed.notify_all()

    def poke(self) -> None:
        """Look again whether the waiting batch should be sent (an attempt ended)."""
        with self._changed:
            self._changed.notify_all()

    def close(self) -> None:
        """Send what is waiting, then stop the completer's thread."""
        with self._changed:
            self._closed = True
            self._changed.notify_all()
        self._thread.join(timeout=30)

    def _run(self) -> None:
        while True:
            batch = self._next_batch()
            if batch is None:
                return
            self._send(batch)

    def _next_batch(self) -> list[_Waiting] | None:
        """The next batch to send, once it is due; ``None`` once closed with none waiting."""
        with self._changed:
            while True:
                count = len(self._pending)
                if count and (
                    self._closed
                    or count >= self.max_items
                    or self.waiting_all(count)
                    or time.monotonic() - self._first_at >= self.max_wait_s
                ):
                    batch = self._pending[: self.max_items]
                    del self._pending[: self.max_items]
                    self._first_at = time.monotonic()
                    return batch
                if self._closed:
                    return None
                timeout = None
                if count:
                    timeout = max(0.0, self._first_at + self.max_wait_s - time.monotonic())
                self._changed.wait(timeout)

    def _complete(self, items: list[CompletionItem]) -> list[WorkloadResult | WorkloadError]:
        """``complete_many``; a lone completion is the single call (the same answer)."""
        if len(items) > 1:
            return self.client.complete_many(items)
        [item] = items
        fence = (item.workload_id, item.claim_id, item.fencing_token)
        try:
            if item.artifacts or item.schema_version != 1:
                return [
                    self.client.complete(
                        *fence, item.result_id, item.output, item.artifacts, item.schema_version
                    )
                ]
            return [self.client.complete(*fence, item.result_id, item.output)]
        except WorkloadError as refusal:
            return [refusal]

    def _send(self, batch: list[_Waiting]) -> None:
        outcomes: Sequence[WorkloadResult | Exception]
        try:
            outcomes = self._complete([item for item, _ in batch])
        except WorkloadError as error:  # the whole call failed: each attempt decides
            outcomes = [error] * len(batch)
        except Exception as error:  # the runtime's own failure: never leave a waiter
            log.exception("sending %d completions failed", len(batch))
            outcomes = [error] * len(batch)
        if len(outcomes) != len(batch):  # an authority that answered otherwise than asked
            mismatch = RuntimeError(f"{len(outcomes)} answers to {len(batch)} completions")
            log.error("completing a batch: %s", mismatch)
            outcomes = [mismatch] * len(batch)
        for (item, answered), outcome in zip(batch, outcomes, strict=True):
            try:
                answered(outcome)
            except Exception:  # one answer's handling must not stop the others'
                log.exception("handling the answer to completing %s failed", item.workload_id)
