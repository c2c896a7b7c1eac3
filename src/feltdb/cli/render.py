"""How the operator commands show records: rich tables, a workload's page, audit lines.

Rendering only: every function takes records and a console and prints; none reads a store.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from rich.console import Console, Group
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

if TYPE_CHECKING:  # what is rendered arrives with the command that runs: not for --help
    from feltdb.records.summary import WorkloadSummary
    from feltdb.records.workload import (
        Workload,
        WorkloadApproval,
        WorkloadDependency,
        WorkloadEvent,
    )
    from feltdb.storage.audit_chain import ChainReport
from feltdb.work.states import WorkloadState

PIPE_WIDTH = 200
"""The width of tables written to a pipe or file, where no terminal says how wide: wide
enough that ids are never folded across lines (so ``grep`` finds them)."""

STATE_STYLES: Mapping[WorkloadState, str] = {
    WorkloadState.READY: "cyan",
    WorkloadState.CLAIMED: "blue",
    WorkloadState.RUNNING: "blue",
    WorkloadState.CHECKPOINTED: "blue",
    WorkloadState.SUCCEEDED: "green",
    WorkloadState.FAILED: "red",
    WorkloadState.DEAD_LETTER: "bold red",
    WorkloadState.TIMED_OUT: "red",
    WorkloadState.REJECTED: "red",
    WorkloadState.CANCELLED: "dim",
    WorkloadState.CANCELLATION_REQUESTED: "yellow",
    WorkloadState.AWAITING_APPROVAL: "yellow",
    WorkloadState.RECOVERING: "magenta",
}


def stdout_console() -> Console:
    """A console on stdout, made per command so it sees this invocation's ``COLUMNS`` and
    stream; a pipe gets :data:`PIPE_WIDTH` columns unless ``COLUMNS`` says otherwise.
    """
    console = Console(highlight=False)
    if not console.is_terminal and "COLUMNS" not in os.environ:
        console = Console(highlight=False, width=PIPE_WIDTH)
    return console


def when(at: float | None) -> str:
    """A unix time as :func:`~feltdb.fields.instant_text` writes it; ``-`` for none."""
    from feltdb.fields import instant_text

    return "-" if at is None else instant_text(at)


def relative(at: float, now: float) -> str:
    """How far ``at`` is from ``now``: ``in 5m``, ``3h ago``, ``now``."""
    seconds = round(at - now)
    if seconds == 0:
        return "now"
    size = abs(seconds)
    for unit, length in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        if size >= length or unit == "s":
            amount = f"{size // length}{unit}"
            break
    return f"in {amount}" if seconds > 0 else f"{amount} ago"


def when_from(at: float | None, now: float) -> str:
    """:func:`when` with a relative hint: ``2026-12-01 10:30:00 UTC (in 5m)``."""
    if at is None:
        return "-"
    return f"{when(at)} ({relative(at, now)})"


def state_text(state: WorkloadState | None) -> Text:
    """A state, coloured by what it means for the work."""
    if state is None:
        return Text("-")
    return Text(state.value, style=STATE_STYLES.get(state, ""))


def print_json(document: Any) -> None:
    """Print ``document`` as one JSON text on stdout, nothing else (no rich markup, no
    wrapping), for machines.
    """
    print(json.dumps(document, sort_keys=True), flush=True)


def evidence_summary(evidence: Mapping[str, str]) -> str:
    """``key=value`` pairs of an event's evidence, whole (the table wraps them, never cuts:
    ``effect=unknown`` is what an operator looks for); instants (``…_at`` keys) as :func:`when`.
    """
    return " ".join(
        f"{key}={_instant(value) if key.endswith('_at') else value}"
        for key, value in sorted(evidence.items())
    )


def _instant(value: str) -> str:
    try:
        return when(int(value))
    except ValueError:
        return value


TIMELINE_TABLE_WIDTH = 120
"""From this many columns on, a timeline is a table; below, a line per event."""


def timeline(events: Iterable[WorkloadEvent], width: int = TIMELINE_TABLE_WIDTH) -> Table | Group:
    """A workload's committed transitions, in order: time, event, from → to, actor, evidence;
    a table on a console ``width`` wide enough, else an unbroken line per event (its
    evidence indented below), so that no cell is cut into pieces.
    """
    if width < TIMELINE_TABLE_WIDTH:
        return Group(Text("timeline", style="italic"), *map(_event_lines, events))
    table = Table(title="timeline", title_justify="left")
    table.add_column("#", justify="right")
    table.add_column("time", overflow="fold", min_width=len("time"))
    table.add_column("event", overflow="fold", min_width=len("event"))
    table.add_column("transition", overflow="fold", min_width=len("transition"))
    table.add_column("actor", overflow="fold", min_width=len("actor"))
    table.add_column("evidence", overflow="fold", min_width=len("evidence"))
    for event in events:
        transition = Text.assemble(state_text(event.from_state), " → ", state_text(event.to))
        table.add_row(
            str(event.sequence),
            when(event.at),
            event.event_type,
            transition,
            event.actor,
            evidence_summary(event.evidence),
        )
    return table


def _event_lines(event: WorkloadEvent) -> Text:
    line = Text.assemble(
        f"{event.sequence:>3}  {when(event.at)}  {event.event_type.removeprefix('workload.')}  ",
        state_text(event.from_state), " → ", state_text(event.to), f"  by {event.actor}",
    )  # fmt: skip
    if event.evidence:
        line.append(f"\n     {evidence_summary(event.evidence)}")
    return line


FINAL_STATES = frozenset(
    {
        WorkloadState.SUCCEEDED,
        WorkloadState.CANCELLED,
        WorkloadState.REJECTED,
        WorkloadState.DEAD_LETTER,
    }
)
"""States after which no attempt is next (an operator's retry aside)."""


DependencyStates = Mapping[str, "WorkloadState | None"]
"""Each dependency's state as the reader sees it (``None``: not visible to the reader)."""


def waits_for(w: Workload, now: float, seen: DependencyStates | None = None) -> str | None:
    """What READY or held-for-approval work waits for before a worker may take it, or
    ``None`` for work in any other state. With ``seen``, a dependency seen in the state it
    requires is met, and not named.
    """
    if w.state not in (WorkloadState.READY, WorkloadState.AWAITING_APPROVAL):
        return None
    reasons = []
    if w.state is WorkloadState.AWAITING_APPROVAL:
        reasons.append("an approval decision (feltdb approve / reject)")
    if w.next_attempt_at is not None and w.next_attempt_at > now:
        reasons.append(f"its time: not before {when_from(w.next_attempt_at, now)}")
    for dependency in w.dependencies:
        if seen is None or seen.get(dependency.workload_id) is not dependency.required_state:
            reasons.append(f"{dependency.workload_id} to be {dependency.required_state.value}")
    if w.capability_snapshot:
        needs = ", ".join(sorted(w.capability_snapshot))
        reasons.append(f"a worker of definition {w.definition_id!r} holding {needs}")
    else:
        reasons.append(f"a worker of definition {w.definition_id!r}")
    return "; ".join(reasons)


def why_it_ended(w: Workload | WorkloadSummary) -> str | None:
    """Why ended work stopped, in one sentence (:mod:`feltdb.work.explanations`, as every
    surface says it); ``None`` for work still going.
    """
    from feltdb.records.summary import WorkloadSummary
    from feltdb.work.explanations import ended_because

    return w.ended_because if isinstance(w, WorkloadSummary) else ended_because(w)


def show_workload(
    console: Console, w: Workload, now: float | None = None, seen: DependencyStates | None = None
) -> None:
    """Everything an operator asks about one workload: its header, what it waits for (each
    dependency as ``seen``, when given), attempts, checkpoints, result, approval, and the
    timeline of its history.
    """
    at = now if now is not None else time.time()
    header = Table.grid(padding=(0, 2))
    header.add_column(style="bold")
    header.add_column()
    for name, value in _header_rows(w, at, seen):
        header.add_row(name, value)
    parts: list[Any] = [header]
    if w.attempts:
        parts.append(_attempts(w))
    if w.checkpoints:
        parts.append(_checkpoints(w))
    if w.result is not None:
        r = w.result
        parts.append(
            Text(
                f"result {r.result_id} ({r.status}) by {r.produced_by} at {when(r.created_at)}: "
                + json.dumps(r.output, sort_keys=True)
            )
        )
    if w.approval is not None:
        parts.append(Text(_approval_line(w.approval)))
    parts.append(timeline(w.execution_history, console.width))
    console.print(Panel(Group(*parts), title=w.workload_id, title_align="left", expand=False))


def _header_rows(
    w: Workload, at: float, seen: DependencyStates | None = None
) -> list[tuple[str, Text | str]]:
    """The name and value of each line of a workload's header."""
    rows: list[tuple[str, Text | str]] = [
        ("state", state_text(w.state)),
        ("definition", f"{w.definition_id} (revision {w.definition_revision})"),
        ("tenant / app", f"{w.tenant_id} / {w.application_id}"),
        ("environment", w.environment),
        ("trigger", w.trigger),
        ("requested by", str(w.requested_by)),
        ("grant", w.authorization_snapshot.grant.id),
        ("priority", str(w.priority)),
        ("capabilities", ", ".join(sorted(w.capability_snapshot)) or "-"),
        ("idempotency key", w.idempotency_key),
        ("created", when_from(w.created_at, at)),
        ("updated", when_from(w.updated_at, at)),
        (
            "attempts",
            f"{w.attempt_count} of {w.retry_policy.max_attempts} (retries {w.retry_count})",
        ),
        ("fencing token", str(w.fencing_token)),
        ("input hash", w.input_hash),
        ("input", json.dumps(w.input, sort_keys=True)),
    ]
    if w.next_attempt_at is not None and w.state not in FINAL_STATES:
        rows.insert(-3, ("next attempt at", when_from(w.next_attempt_at, at)))
    if w.dependencies:
        rows.append(("depends on", ", ".join(_dependency(d, seen) for d in w.dependencies)))
    waiting = waits_for(w, at, seen)
    if waiting is not None:
        rows.append(("waits for", waiting))
    ended = why_it_ended(w)
    if ended is not None:
        rows.append(("why it ended", ended))
    elif w.last_failure:
        rows.append(("last failure", w.last_failure))
    from feltdb.work.deadlines import deadline_instants

    approval_by = dict(deadline_instants(w)).get("approval")
    if approval_by is not None:
        rows.append(("approval deadline", when_from(approval_by, at)))
    if w.current_claim is not None:
        claim = w.current_claim
        rows.append(("held by", f"{claim.worker_id} until {when_from(claim.expires_at, at)}"))
    return rows


def _dependency(dependency: WorkloadDependency, seen: DependencyStates | None) -> str:
    """A dependency, with what is seen of it: met, its state now, or not visible."""
    wanted = dependency.required_state.value
    if seen is None:
        return f"{dependency.workload_id} ({wanted})"
    if dependency.workload_id not in seen:
        return f"{dependency.workload_id} ({wanted}; not read)"
    state = seen[dependency.workload_id]
    if state is None:
        return f"{dependency.workload_id} ({wanted}; not visible to you)"
    if state is dependency.required_state:
        return f"{dependency.workload_id} ({wanted}: met)"
    return f"{dependency.workload_id} ({wanted}; now {state.value})"


def _attempts(w: Workload) -> Table:
    attempts = Table(title="attempts", title_justify="left")
    for column in ("attempt", "worker", "fence", "status", "started", "ended", "error"):
        attempts.add_column(column, overflow="fold", min_width=len(column))
    for a in w.attempts:
        attempts.add_row(
            a.attempt_id,
            a.worker_id,
            str(a.fencing_token),
            a.status.value,
            when(a.started_at),
            when(a.ended_at),
            a.error or "",
        )
    return attempts


def _checkpoints(w: Workload) -> Table:
    checkpoints = Table(title="checkpoints", title_justify="left")
    for column in ("#", "attempt", "at", "state"):
        checkpoints.add_column(column)
    for c in w.checkpoints:
        checkpoints.add_row(str(c.sequence), c.attempt_id, when(c.created_at), json.dumps(c.state))
    return checkpoints


def _approval_line(approval: WorkloadApproval) -> str:
    policy = approval.policy
    who = ", ".join(sorted(str(s) for s in policy.approvers)) or "any"
    line = f"approval: kinds {', '.join(sorted(policy.approver_kinds))}; approvers {who}"
    decision = approval.decision
    if decision is None:
        return line + "; undecided"
    return line + (
        f"; {decision.outcome.value} by {decision.decided_by} at {when(decision.decided_at)}"
        + (f" ({decision.reason})" if decision.reason else "")
    )


def verify_lines(report: ChainReport) -> list[str]:
    """``feltdb audit verify``'s answer: the verdict, what was checked, the head to note,
    and the problem.
    """
    verdict = "ok" if report.ok else "FAILED"
    lines = [
        f"audit chain: {verdict}",
        f"  transactions: {report.transactions:,} checked, {report.sealed:,} sealed",
        f"  rows: {report.rows:,} checked, {report.rows_not_covered:,} not covered "
        "(written before the chain existed)",
        f"  head: {report.head_revision}:{report.head_link}"
        if report.head_revision
        else "  head: none sealed yet",
    ]
    if report.pruned_through:
        lines.append(
            f"  pruned: through revision {report.pruned_through}, {report.pruned:,} links "
            "walked without their transactions"
        )
    if report.rows_pending:
        lines.append(f"  rows pending: {report.rows_pending:,} (their transactions not final yet)")
    problem = report.problem
    if problem is not None:
        lines.append(f"  problem: {problem.kind} at revision {problem.revision}")
        if problem.transaction_id is not None:
            lines.append(f"  transaction: {problem.transaction_id}")
        if problem.address is not None:
            lines.append(f"  row: {problem.address}")
        lines.append(f"  {problem.message}")
    return lines
