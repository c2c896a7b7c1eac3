"""``feltdb workers``: the workers the application's work names, as ``GET /v1/workers``
answers them (:func:`feltdb.work.workers.workers_seen`), in a table that fits 80 columns.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import typer

from feltdb.auth.capabilities import READ
from feltdb.cli.targets import JsonOption, Target, connected, targeted

if TYPE_CHECKING:  # what a command runs is imported when it runs, not for --help
    from rich.console import Console

    from feltdb.records.workers import WorkerSeen, WorkersSeen

workers_app = typer.Typer(add_completion=False, rich_markup_mode=None)
"""Holds ``feltdb workers``; the root adds it without a name (a top-level command)."""

DEFINITIONS_WIDTH = 16
"""The narrowest the definitions column becomes at 80 columns (a usual id is whole in it)."""
STALE = "STALE"
"""How a stale worker's row says so, in words (not colour alone)."""


@workers_app.command("workers")
@targeted
def workers(json_output: JsonOption = False, *, target: Target) -> None:
    """List the workers the application's work names (needs workload:read): the
    definitions and leases each holds, its last heartbeat, its completions and failures
    per minute over the last 10 minutes, and STALE when a lease it holds expired or it
    has not heartbeat for over 120 s.
    """
    from feltdb.cli.render import print_json, stdout_console

    with connected(target, needs=(READ,)) as client:
        seen = client.workers()
    if json_output:
        print_json(seen.to_json())
        return
    workers_table(stdout_console(), seen)


def workers_table(console: Console, seen: WorkersSeen) -> None:
    """A table of ``seen``'s workers (id, definitions, leases held, last heartbeat as a time
    relative to the answer's ``now``, done and failed per minute, stale in words), with
    what it could not say below it.
    """
    from rich.table import Table

    notes = [] if seen.complete else ["some records were not read (bounded): --json for all"]
    if not seen.counted:
        notes.append("done/failed: not counted for a grant narrowed to some work")
    table = Table(
        title=f"workers (done/failed per minute over the last {seen.minutes} minutes)",
        title_justify="left", caption="; ".join(notes) or None, caption_justify="left",
    )  # fmt: skip
    # A worker id is never cut (it is what the audit's --subject takes); the rest folds.
    table.add_column("worker", no_wrap=True, min_width=len("worker"))
    table.add_column("definitions", overflow="fold", min_width=DEFINITIONS_WIDTH)
    table.add_column("held", justify="right", no_wrap=True)
    table.add_column("heartbeat", no_wrap=True)
    table.add_column("done/m", justify="right", no_wrap=True)
    table.add_column("fail/m", justify="right", no_wrap=True)
    table.add_column("stale", overflow="fold", min_width=len("stale"))
    for worker in seen.workers:
        table.add_row(*_row(worker, seen.now))
    if not seen.workers:
        console.print("workers: none seen")
        return
    console.print(table)


def _row(worker: WorkerSeen, now: int) -> list[str]:
    """One worker's cells, as :func:`workers_table` shows them."""
    from feltdb.cli.render import relative

    beat = "-" if worker.last_heartbeat is None else relative(worker.last_heartbeat, now)
    stale = "-" if worker.stale_reason is None else f"{STALE}: {worker.stale_reason}"
    return [
        worker.worker_id, ", ".join(worker.definitions) or "-", str(worker.lease_count), beat,
        f"{worker.completed_per_minute:g}", f"{worker.failed_per_minute:g}", stale,
    ]  # fmt: skip
