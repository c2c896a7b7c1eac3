"""A child of ``tests/reliability/test_sigkill.py``: a client of a ``feltdb serve`` process
(``feltdb.Client`` over HTTP) that writes and works, single and batch calls, until it is
killed.

Usage: ``python crash_client_child.py URL TOKEN_FILE LOG ROUND``. It talks to the server at
``URL`` with the bearer token in ``TOKEN_FILE`` (a worker's, for application ``app``) and
loops, half of the rounds each way:

- single calls: ``admit`` of one or two new workloads (keys ``ROUND-N``), now and then a
  replay of an acknowledged key; ``claim_next``, ``start``, ``heartbeat``,
  ``execution_context``, zero to two ``checkpoint`` calls, then ``fail`` (retryable) now and
  then, else ``complete``;
- batch calls: ``admit_many`` of :data:`BATCH`, ``claim_work(start=True)``,
  ``renew_leases`` (``heartbeat_many``), ``complete_many``.

What each answer acknowledged is appended to ``LOG`` (:mod:`support.crash_log`) as soon as
the answer arrived. The server may be killed under a request (the parent does that too):

- the idempotent or replayable calls (``admit``, ``admit_many``, ``complete``,
  ``complete_many``, ``fail``) are sent again, unchanged, until the server answers (a
  restarted one); what was committed before the kill is then answered as a replay;
- any other call that got no answer is abandoned with what it held: the claim stays held
  under its long lease, and only the final recovery re-arms it.

A refusal that answered is logged ``refused`` (the parent fails on any).
"""

from __future__ import annotations

import itertools
import random
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

_TESTS = str(Path(__file__).resolve().parents[1])
if _TESTS not in sys.path:
    sys.path.insert(0, _TESTS)

from feltdb import WorkloadError  # noqa: E402
from feltdb.client import Client, CompletionItem, HeartbeatItem, WorkloadClient  # noqa: E402
from feltdb.errors import ErrorCode  # noqa: E402
from support.crash_log import append, open_log  # noqa: E402

BATCH = 20
"""Items per batch call."""
LEASE_MS = 3_600_000
"""Leases outlive the run (an hour, longer than any soak's case): what a killed child held
is only recovered by the parent's final ``recover_expired``, never mid-run."""
RETRY_POLICY = {"max_attempts": 25, "initial_delay_ms": 0, "max_delay_ms": 0}
"""Failed work is ready again at once, and no workload runs out of attempts in a run."""
FAIL_KIND = "transient_connection"
FAIL_RATE = 0.15
REPLAY_RATE = 0.1
OUTAGE_S = 120.0
"""A server that answers nothing for this long ends the child (the parent sees it exit)."""
PAUSE_S = 0.05
"""The pause before a request that got no answer is sent again."""

T = TypeVar("T")


class Unanswered(Exception):
    """A call that is not sent again got no answer: what it held is abandoned."""


class ClientChild:
    """One child's loop over one server."""

    def __init__(self, client: WorkloadClient, log: int, round_id: str) -> None:
        self.client = client
        self.log = log
        self.round_id = round_id
        self.rng = random.Random()
        self.numbers = itertools.count()
        self.acknowledged: list[str] = []

    # ---------------------------------------------------------------- transport

    def no_answer(self, operation: str, error: WorkloadError) -> bool:
        """Whether ``error`` says no answer came (logged as such), rather than a refusal."""
        if error.code != ErrorCode.WORKLOAD_STORAGE_FAILURE:
            return False
        append(self.log, [f"unanswered {operation} {getattr(error, 'status', None)}"])
        return True

    def until_answered(self, operation: str, call: Callable[[], T]) -> T:
        """``call()``, sent again while no answer comes (it is idempotent or replayable)."""
        deadline = time.monotonic() + OUTAGE_S
        while True:
            try:
                return call()
            except WorkloadError as error:
                if not self.no_answer(operation, error) or time.monotonic() > deadline:
                    raise
            time.sleep(PAUSE_S)

    def once(self, operation: str, call: Callable[[], T]) -> T:
        """``call()`` once; no answer raises :class:`Unanswered`."""
        try:
            return call()
        except WorkloadError as error:
            if self.no_answer(operation, error):
                raise Unanswered(operation) from error
            raise

    # ---------------------------------------------------------------- the calls

    def submission(self, key: str) -> dict[str, Any]:
        return {
            "environment": "production",
            "definition_id": "send",
            "definition_revision": "r1",
            "trigger": "manual",
            "input": {"key": key},
            "capability_snapshot": ["email:send"],
            "idempotency_key": key,
            "retry_policy": RETRY_POLICY,
        }

    def admit(self, key: str) -> None:
        workload, created = self.until_answered(
            "admit", lambda: self.client.submit(self.submission(key))
        )
        how = "created" if created else "replayed"
        append(self.log, [f"admitted {workload.workload_id} {key} {how}"])
        self.acknowledged.append(key)

    def single_round(self) -> None:
        for _ in range(self.rng.randint(1, 2)):
            self.admit(f"{self.round_id}-{next(self.numbers)}")
        if self.acknowledged and self.rng.random() < REPLAY_RATE:
            self.admit(self.rng.choice(self.acknowledged))
        client, log = self.client, self.log
        claim = self.once("claim_next", lambda: client.claim_next(lease_ms=LEASE_MS))
        if claim is None:
            return
        wid, cid, token = claim.workload_id, claim.claim_id, claim.fencing_token
        self.once("start", lambda: client.start(wid, cid, token))
        self.once("heartbeat", lambda: client.heartbeat(wid, cid, token, extend_ms=LEASE_MS))
        context = self.once("context", lambda: client.execution_context(wid, cid, token))
        for step in range(self.rng.randint(0, 2)):
            state = {"step": step, "of": cid}
            saved = self.once("checkpoint", partial(client.checkpoint, wid, cid, token, state))
            append(log, [f"checkpointed {wid} {saved.checkpoint_id} {saved.state_hash}"])
        if self.rng.random() < FAIL_RATE:
            led_to = self.until_answered(
                "fail", lambda: client.fail(wid, cid, token, FAIL_KIND, "transient")
            )
            append(log, [f"failed {wid} {cid} {led_to}"])
            return
        output = {"done": wid, "input": context.input}
        result = self.until_answered(
            "complete", lambda: client.complete(wid, cid, token, f"result-{cid}", output)
        )
        append(log, [f"completed {wid} {result.result_id}"])

    def batch_round(self) -> None:
        client, log = self.client, self.log
        keys = [f"{self.round_id}-{next(self.numbers)}" for _ in range(BATCH)]
        submissions = [self.submission(key) for key in keys]
        admitted = self.until_answered("admit_many", lambda: client.admit_many(submissions))
        lines = []
        for key, answer in zip(keys, admitted, strict=True):
            if isinstance(answer, WorkloadError):
                lines.append(f"refused - {answer.code} admit_many")
                continue
            how = "created" if answer[1] else "replayed"
            lines.append(f"admitted {answer[0].workload_id} {key} {how}")
            self.acknowledged.append(key)
        append(log, lines)
        claimed = self.once(
            "claim_work", lambda: client.claim_work(BATCH, lease_ms=LEASE_MS, start=True)
        )
        if not claimed:
            return
        claims = [work.claim for work in claimed]
        beats = [HeartbeatItem.of(claim, LEASE_MS) for claim in claims]
        renewed = self.once("renew_leases", lambda: client.renew_leases(beats))
        append(
            log,
            [
                f"refused {claim.workload_id} {answer.code} renew_leases"
                for claim, answer in zip(claims, renewed, strict=True)
                if isinstance(answer, WorkloadError)
            ],
        )
        items = [
            CompletionItem(
                c.workload_id, c.claim_id, c.fencing_token, f"result-{c.claim_id}",
                {"done": c.workload_id},
            )
            for c in claims
        ]  # fmt: skip
        answers = self.until_answered("complete_many", lambda: client.complete_many(items))
        append(
            log,
            [
                f"refused {item.workload_id} {answer.code} complete_many"
                if isinstance(answer, WorkloadError)
                else f"completed {item.workload_id} {answer.result_id}"
                for item, answer in zip(items, answers, strict=True)
            ],
        )

    def run(self) -> None:
        while True:
            try:
                if self.rng.random() < 0.5:
                    self.single_round()
                else:
                    self.batch_round()
            except Unanswered:
                time.sleep(PAUSE_S)
            except WorkloadError as error:
                append(self.log, [f"refused - {error.code} {type(error).__name__}"])


def main(argv: list[str]) -> None:
    url, token_file, log_path, round_id = argv
    token = Path(token_file).read_text(encoding="utf-8").strip()
    log = open_log(log_path)
    with Client(url, token, timeout=15.0) as client:
        ClientChild(client, log, round_id).run()


if __name__ == "__main__":
    main(sys.argv[1:])
