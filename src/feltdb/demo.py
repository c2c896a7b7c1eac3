"""``feltdb demo``: a guided tour of the authority on a real store, on a simulated clock.

It admits a handful of workloads (one scheduled for later, one held for approval, one that
fails and is retried, one whose worker dies and is recovered), drives them with two
workers and an approver, and prints every transition as it commits. The clock is
simulated (every operation takes ``now``), so a minute of work takes a moment to show.
"""

from __future__ import annotations

import secrets
import shlex
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from feltdb.auth import GrantSigner, Subject
from feltdb.auth.policy import APPROVE, SUBMIT, application_grant
from feltdb.auth.scope import Scope
from feltdb.client.local import LocalClient
from feltdb.records.workload import DURABLE_WORK_COLLECTION, ApprovalPolicy, WorkloadTimeouts
from feltdb.work.states import ApprovalOutcome, WorkloadState
from feltdb.work.store import WorkloadStore

TENANT = "acme"
APPLICATION = "billing"
"""Each run admits its work into its own application, ``billing-<run>``, so that a run
never meets work an earlier (perhaps interrupted) run left behind."""
CAPABILITIES = frozenset({"email:send", "payments:send", "crm:sync", "images:resize", "reports"})

_STATE_STYLE = {
    WorkloadState.SUCCEEDED: "green",
    WorkloadState.DEAD_LETTER: "red",
    WorkloadState.REJECTED: "red",
    WorkloadState.FAILED: "yellow",
    WorkloadState.RECOVERING: "yellow",
    WorkloadState.AWAITING_APPROVAL: "magenta",
    WorkloadState.TIMED_OUT: "yellow",
}


_TOLD = frozenset(
    {
        "approval",
        "decision",
        "decided_by",
        "effect",
        "failure_kind",
        "fencing_token",
        "recovery_reason",
        "worker_id",
        "deadline",
    }
)
"""The evidence keys the tour prints; the history keeps them all."""


@dataclass
class _Narrator:
    """Prints each workload's new history events after every step."""

    store: WorkloadStore
    console: Console
    start: int
    names: dict[str, str] = field(default_factory=dict)
    printed: dict[str, int] = field(default_factory=dict)

    def show(self) -> None:
        for workload_id, name in self.names.items():
            workload = self.store.get(workload_id)
            for event in workload.execution_history[self.printed.get(workload_id, 0) :]:
                source = event.from_state.value if event.from_state else "—"
                style = _STATE_STYLE.get(event.to, "cyan")
                detail = ", ".join(
                    f"{k}={v}" for k, v in sorted(event.evidence.items()) if k in _TOLD
                )
                self.console.print(
                    f"  t+{event.at - self.start:>3}s  [bold]{name:<15}[/bold] "
                    f"{source:>17} → [{style}]{event.to.value:<17}[/{style}] "
                    f"by {event.actor}" + (f"  [dim]({detail})[/dim]" if detail else "")
                )
            self.printed[workload_id] = len(workload.execution_history)


class _Tour:
    """One run of the tour: the store, its simulated clock, and a
    :class:`~feltdb.client.LocalClient` for each who acts (the requesting service, two
    workers, an approver), as a server would see their tokens.
    """

    def __init__(self, store: WorkloadStore, console: Console, start: int) -> None:
        self.store = store
        self.console = console
        self.start = start
        self.now = start
        self.run = secrets.token_hex(3)
        self.application = f"{APPLICATION}-{self.run}"
        self.scope = Scope(TENANT, self.application)
        self.narrator = _Narrator(store, console, start)
        self._signer = GrantSigner("demo", b"feltdb-demo-key-not-for-production")
        self.requester = self._client(Subject.service("billing-api"), SUBMIT)
        self.approver = self._client(Subject.human("ada"), APPROVE)
        self.workers = {
            name: LocalClient(
                store, self.scope, Subject.worker(name), clock=self.clock, capabilities=CAPABILITIES
            )
            for name in ("worker-1", "worker-2")
        }

    def clock(self) -> int:
        return self.now

    def _client(self, subject: Subject, capability: str) -> LocalClient:
        grant = application_grant(
            subject,
            TENANT,
            self.application,
            {capability},
            issued_at=self.now - 60,
            expires_at=self.now + 86_400,
            issuer=Subject.human("ops-admin"),
            grant_id=f"grant-{subject.id}",
        )
        return LocalClient(
            self.store, self.scope, subject, clock=self.clock, grant=self._signer.sign(grant)
        )

    def step(self, title: str, seconds: int = 0) -> None:
        self.now += seconds
        self.console.print(
            f"\n[bold blue]▸ {title}[/bold blue]  [dim](t+{self.now - self.start}s)[/dim]"
        )

    def admit(self, name: str, **fields: Any) -> str:
        workload, _ = self.requester.submit(
            {
                "environment": "demo",
                "definition_id": name,
                "definition_revision": "v1",
                "trigger": "demo",
                "input": {"demo": name},
                "capability_snapshot": [],
                "idempotency_key": f"demo-{name}",
                **fields,
            }
        )
        self.narrator.names[workload.workload_id] = name
        return workload.workload_id

    def work(self, worker: str, *, lease_ms: int = 30_000) -> str | None:
        """``worker`` claims and starts the next workload; its id (``None``: none)."""
        claim = self.workers[worker].claim_next(lease_ms=lease_ms)
        if claim is None:
            self.console.print(f"  {worker}: nothing claimable")
            return None
        self.workers[worker].start(claim.workload_id, claim.claim_id, claim.fencing_token)
        return claim.workload_id

    def fence(self, workload_id: str) -> tuple[str, str, int]:
        """The workload, claim id and fencing token of ``workload_id``'s current claim."""
        current = self.store.get(workload_id).current_claim
        assert current is not None
        return workload_id, current.claim_id, current.fencing_token

    def finish(self, worker: str, workload_id: str, output: dict[str, object]) -> None:
        fence = self.fence(workload_id)
        result_id = f"result-{workload_id}-{fence[2]}"
        self.workers[worker].complete(*fence, result_id, output)

    def then(self, action: Callable[[], object]) -> None:
        action()
        self.narrator.show()

    def runs(self, worker: str, workload_id: str, output: dict[str, object]) -> None:
        """``worker`` claims the next workload and, if it is one, completes it with
        ``output`` (as ``workload_id``'s).
        """
        self.then(lambda: self.finish(worker, workload_id, output) if self.work(worker) else None)


def _first_half(tour: _Tour) -> dict[str, str]:
    """Admit the five workloads and run them up to the approval; their ids by name."""
    tour.step("A service submits five workloads")
    ids = {
        "invoice": tour.admit("send-invoice", priority=5, capability_snapshot=["email:send"]),
        "transfer": tour.admit(
            "wire-transfer",
            priority=4,
            capability_snapshot=["payments:send"],
            approval=ApprovalPolicy(approver_kinds=frozenset({"human"})),
            timeouts=WorkloadTimeouts(approval_ms=3_600_000),
        ),
        "crm": tour.admit("sync-crm", priority=3, capability_snapshot=["crm:sync"]),
        "images": tour.admit("resize-images", priority=2, capability_snapshot=["images:resize"]),
    }
    tour.admit("nightly-report", priority=1, not_before=tour.start + 60)
    tour.narrator.show()

    tour.step("worker-1 claims the most urgent work and completes it", 1)
    tour.runs("worker-1", ids["invoice"], {"sent": 1})
    tour.step("worker-2 claims the next; its upstream is down, so it reports a failure")
    assert tour.work("worker-2") == ids["crm"]
    failing = tour.fence(ids["crm"])
    tour.then(
        lambda: tour.workers["worker-2"].fail(
            *failing, "transient_connection", "CRM answered 503", effect="none"
        )
    )
    tour.step("worker-1 takes the image job on a short lease, checkpoints, and dies")
    assert tour.work("worker-1", lease_ms=5_000) == ids["images"]
    held = tour.fence(ids["images"])
    tour.then(lambda: tour.workers["worker-1"].checkpoint(*held, {"resized": 40}))
    return ids


def _second_half(tour: _Tour, ids: dict[str, str]) -> None:
    """The approval, the retry, the recovery and the scheduled report."""
    tour.step("A person approves the wire transfer; worker-2 runs it")
    transfer = ids["transfer"]
    reviewed = tour.approver.get(transfer).input_hash
    tour.then(
        lambda: tour.approver.decide(
            transfer, ApprovalOutcome.APPROVED, "checked the beneficiary", reviewed
        )
    )
    tour.runs("worker-2", transfer, {"wired": True})
    tour.step("After the retry backoff, worker-2 retries the CRM sync", 1)
    tour.runs("worker-2", ids["crm"], {"synced": 128})
    tour.step("The maintenance pass finds worker-1's lease expired and recovers its work", 5)
    tour.then(lambda: tour.store.recover_expired(tour.now))
    tour.step("worker-2 resumes the image job from worker-1's checkpoint")
    assert tour.work("worker-2") == ids["images"]
    context = tour.workers["worker-2"].execution_context(*tour.fence(ids["images"]))
    tour.console.print(f"  worker-2 reads checkpoint: {context.checkpoints[-1].state}")
    tour.then(lambda: tour.finish("worker-2", ids["images"], {"resized": 100}))
    tour.step("The nightly report is not claimable before its time", 1)
    tour.work("worker-1")
    tour.step("…and is, once it arrives", 53)
    report = tour.work("worker-1")
    if report is not None:
        tour.then(lambda: tour.finish("worker-1", report, {"rows": 3}))


def run_demo(path: Path, console: Console, now: int | None = None) -> int:
    """Run the tour on the store at ``path``; returns how many workloads the store holds."""
    with WorkloadStore.open(path) as store:
        tour = _Tour(store, console, now if now is not None else int(time.time()))
        _second_half(tour, _first_half(tour))
        return _summary(tour, path)


def _summary(tour: _Tour, path: Path) -> int:
    """Print the run's workloads and how to list them; how many the store holds."""
    console, store = tour.console, tour.store
    table = Table(title=f"Workloads of this run (store: {path})")
    for column in ("workload", "state", "attempts", "result", "history"):
        table.add_column(column)
    for workload_id, name in tour.narrator.names.items():
        w = store.get(workload_id)
        style = _STATE_STYLE.get(w.state, "cyan")
        table.add_row(
            name,
            f"[{style}]{w.state.value}[/{style}]",
            str(len(w.attempts)),
            str(w.result.output) if w.result is not None else "—",
            f"{len(w.execution_history)} events",
        )
    console.print()
    console.print(table)
    total = len(store.db.list_rows(DURABLE_WORK_COLLECTION))
    console.print(
        f"Run {tour.run} (tenant {TENANT}, application {tour.application}) is done. The store "
        f"holds {total} workloads in all; run the demo again and they are all still there."
    )
    # Printed whole, never wrapped, so it can be copied and run as it stands.
    print(
        f"See this run's work: feltdb ls --db {shlex.quote(str(path))} --tenant {TENANT} "
        f"--application {tour.application}",
        flush=True,
    )
    return total
