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

from rich.console import Console
from rich.table import Table

from feltdb.auth import GrantSigner, Subject
from feltdb.auth.policy import SUBMIT, application_grant
from feltdb.work.models import (
    DURABLE_WORK_COLLECTION,
    ApprovalPolicy,
    CreateWorkload,
    WorkloadTimeouts,
)
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


def _request(
    signer: GrantSigner,
    requester: Subject,
    application: str,
    name: str,
    now: int,
    **fields: object,
) -> CreateWorkload:
    grant = application_grant(
        requester,
        TENANT,
        application,
        {SUBMIT},
        issued_at=now - 60,
        expires_at=now + 86_400,
        issuer=Subject.human("ops-admin"),
        grant_id=f"grant-{requester.id}",
    )
    values: dict[str, object] = {
        "tenant_id": TENANT,
        "application_id": application,
        "environment": "demo",
        "definition_id": name,
        "definition_revision": "v1",
        "trigger": "demo",
        "input": {"demo": name},
        "requested_by": requester,
        "authorization_snapshot": signer.sign(grant),
        "capability_snapshot": set(),
        "idempotency_key": f"demo-{name}",
        "created_at": now,
    }
    values.update(fields)
    return CreateWorkload(**values)


def run_demo(path: Path, console: Console, now: int | None = None) -> int:
    """Run the tour on the store at ``path``; returns how many workloads the store holds."""
    start = now if now is not None else int(time.time())
    run = secrets.token_hex(3)
    application = f"{APPLICATION}-{run}"
    signer = GrantSigner("demo", b"feltdb-demo-key-not-for-production")
    requester = Subject.service("billing-api")
    with WorkloadStore.open(path) as store:
        narrator = _Narrator(store, console, start)
        clock = [start]

        def step(title: str, seconds: int = 0) -> int:
            clock[0] += seconds
            console.print(f"\n[bold blue]▸ {title}[/bold blue]  [dim](t+{clock[0] - start}s)[/dim]")
            return clock[0]

        def admit(name: str, **fields: object) -> str:
            request = _request(signer, requester, application, name, clock[0], **fields)
            workload = store.create(request)
            narrator.names[workload.workload_id] = name
            return workload.workload_id

        def work(worker: str, *, lease_ms: int = 30_000) -> str | None:
            claim = store.claim_next(
                TENANT, application, worker, CAPABILITIES, now=clock[0], lease_ms=lease_ms
            )
            if claim is None:
                console.print(f"  {worker}: nothing claimable")
                return None
            store.start(claim.workload_id, claim.claim_id, worker, claim.fencing_token, clock[0])
            return claim.workload_id

        def finish(worker: str, workload_id: str, output: dict[str, object]) -> None:
            current = store.get(workload_id).current_claim
            assert current is not None
            store.complete(
                workload_id,
                current.claim_id,
                worker,
                current.fencing_token,
                f"result-{workload_id}-{current.fencing_token}",
                output,
                now=clock[0],
            )

        def then(action: Callable[[], object]) -> None:
            action()
            narrator.show()

        step("A service submits five workloads")
        invoice = admit("send-invoice", priority=5, capability_snapshot={"email:send"})
        transfer = admit(
            "wire-transfer",
            priority=4,
            capability_snapshot={"payments:send"},
            approval=ApprovalPolicy(approver_kinds={"human"}),
            timeouts=WorkloadTimeouts(approval_ms=3_600_000),
        )
        crm = admit("sync-crm", priority=3, capability_snapshot={"crm:sync"})
        images = admit("resize-images", priority=2, capability_snapshot={"images:resize"})
        admit("nightly-report", priority=1, not_before=start + 60)
        narrator.show()

        step("worker-1 claims the most urgent work and completes it", 1)
        then(lambda: finish("worker-1", invoice, {"sent": 1}) if work("worker-1") else None)

        step("worker-2 claims the next; its upstream is down, so it reports a failure")
        claimed = work("worker-2")
        assert claimed == crm
        current = store.get(crm).current_claim
        assert current is not None
        then(
            lambda: store.fail(
                crm,
                current.claim_id,
                "worker-2",
                current.fencing_token,
                "transient_connection",
                "CRM answered 503",
                now=clock[0],
                effect="none",
            )
        )

        step("worker-1 takes the image job on a short lease, checkpoints, and dies")
        assert work("worker-1", lease_ms=5_000) == images
        held = store.get(images).current_claim
        assert held is not None
        then(
            lambda: store.checkpoint(
                images, held.claim_id, "worker-1", held.fencing_token, {"resized": 40}, clock[0]
            )
        )

        step("A person approves the wire transfer; worker-2 runs it")
        then(
            lambda: store.decide(
                transfer,
                Subject.human("ada"),
                ApprovalOutcome.APPROVED,
                "checked the beneficiary",
                "grant-ada",
                store.get(transfer).input_hash,
                now=clock[0],
            )
        )
        then(lambda: finish("worker-2", transfer, {"wired": True}) if work("worker-2") else None)

        step("After the retry backoff, worker-2 retries the CRM sync", 1)
        then(lambda: finish("worker-2", crm, {"synced": 128}) if work("worker-2") else None)

        step("The maintenance pass finds worker-1's lease expired and recovers its work", 5)
        then(lambda: store.recover_expired(clock[0]))

        step("worker-2 resumes the image job from worker-1's checkpoint")
        assert work("worker-2") == images
        resumed = store.get(images).current_claim
        assert resumed is not None
        context = store.execution_context(
            images, resumed.claim_id, "worker-2", resumed.fencing_token, clock[0]
        )
        console.print(f"  worker-2 reads checkpoint: {context.checkpoints[-1].state}")
        then(lambda: finish("worker-2", images, {"resized": 100}))

        step("The nightly report is not claimable before its time", 1)
        work("worker-1")
        step("…and is, once it arrives", 53)
        report = work("worker-1")
        if report is not None:
            then(lambda: finish("worker-1", report, {"rows": 3}))

        table = Table(title=f"Workloads of this run (store: {path})")
        for column in ("workload", "state", "attempts", "result", "history"):
            table.add_column(column)
        for workload_id, name in narrator.names.items():
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
            f"Run {run} (tenant {TENANT}, application {application}) is done. The store holds "
            f"{total} workloads in all; run the demo again and they are all still there."
        )
        # Printed whole, never wrapped, so it can be copied and run as it stands.
        print(
            f"See this run's work: feltdb ls --db {shlex.quote(str(path))} --tenant {TENANT} "
            f"--application {application}",
            flush=True,
        )
        return total
