"""``feltdb prune``: delete (or, ``--dry-run``, list) the application's finished work past
its retention age, a bounded pass at a time, through a server or on a store (``--db``).

Each pass is :meth:`~feltdb.client.retention.RetentionClient.prune`: at most ``--limit``
workloads, deleted in guarded commits logged as ``workload.pruned``, then a bounded number
of the store's free pages returned to the file system. The command runs passes until one
finds no more due and leaves no bound's worth of free pages (at most ``--passes``), printing
each pass's count as it goes, and at the end the space returned; a dry run is one pass.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from feltdb.auth.capabilities import OPERATE
from feltdb.cli.render import print_json, stdout_console, when
from feltdb.cli.targets import JsonOption, Target, connected, targeted

if TYPE_CHECKING:
    from feltdb.client.protocol import WorkloadClient
    from feltdb.client.retention import PruneRequest
    from feltdb.work.pruning import PruneReport

prune_app = typer.Typer(add_completion=False, rich_markup_mode=None)
"""Holds the ``prune`` command; the root adds it without a name."""

MAX_PASSES = 100_000
"""The most passes one command runs (at the default limit, 50 million workloads)."""

RetainOption = Annotated[
    list[str] | None,
    typer.Option(
        "--retain",
        metavar="ITEM",
        help="A retention age, [DEFINITION:]STATE=AGE (STATE SUCCEEDED, CANCELLED, REJECTED, "
        "DEAD_LETTER or finished; AGE 30d, 12h, 45m, 90s or never), over the defaults "
        "(SUCCEEDED, CANCELLED, REJECTED 30d; DEAD_LETTER 90d), or `defaults` alone. "
        "Repeat it for more.",
        show_default=False,
    ),
]


@prune_app.command("prune")
@targeted
def prune(
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Only list what one pass would delete.")
    ] = False,
    older_than: Annotated[
        str | None,
        typer.Option(
            metavar="AGE", help="Prune every finished state past this age (7d), not the defaults."
        ),
    ] = None,
    retain: RetainOption = None,
    definition: Annotated[
        str | None, typer.Option(metavar="ID", help="Only this definition's work.")
    ] = None,
    archive: Annotated[
        Path | None,
        typer.Option(
            metavar="FILE",
            help="Append each workload to this JSON Lines file (synced) before deleting it. "
            "With --db only: a server writes no file a caller names.",
        ),
    ] = None,
    limit: Annotated[
        int, typer.Option(min=1, max=5000, help="Workloads deleted per pass (transaction).")
    ] = 500,
    passes: Annotated[
        int, typer.Option(min=1, max=MAX_PASSES, help="The most passes to run.")
    ] = MAX_PASSES,
    json_output: JsonOption = False,
    *,
    target: Target,
) -> None:
    """Delete the application's finished work past its retention age (SUCCEEDED, CANCELLED
    and REJECTED after 30 days, DEAD_LETTER after 90, unless told otherwise), in bounded,
    audited passes. Needs workload:operate over the application.
    """
    from feltdb.client.retention import PruneRequest

    asked = PruneRequest(retain or (), older_than, definition, limit, dry_run, archive)
    with connected(target, needs=(OPERATE,)) as client:
        if dry_run:
            report = client.prune(asked)
            _said_due(report, json_output)
            return
        pruned, changed, reclaimed = _prune_passes(client, asked, passes, quiet=json_output)
    if json_output:
        print_json({"pruned": len(pruned), "changed": changed, "reclaimed_bytes": reclaimed})
        return
    console = stdout_console()
    console.print(f"pruned {len(pruned):,} finished workloads")
    if reclaimed:
        console.print(f"returned {_size(reclaimed)} of free space to the file system")


def _size(count: int) -> str:
    """A number of bytes in KB below a megabyte, else in MB (powers of 1,000)."""
    return f"{count / 1e3:,.0f} KB" if count < 1_000_000 else f"{count / 1e6:,.1f} MB"


def _prune_passes(
    client: WorkloadClient, asked: PruneRequest, passes: int, *, quiet: bool
) -> tuple[list[str], int, int]:
    """Run prune passes until one finds no more due and leaves no bound's worth of free
    pages to return (at most ``passes``), saying each pass's count on stderr unless
    ``quiet``: the ids pruned, the due work left changed, and the bytes returned.
    """
    pruned: list[str] = []
    changed = reclaimed = 0
    for number in range(1, passes + 1):
        report = client.prune(asked)
        pruned += [str(item["work_id"]) for item in report.pruned]
        changed += report.changed
        reclaimed += report.reclaimed_bytes
        if not quiet and (report.again or number > 1):
            typer.echo(
                f"pass {number}: pruned {len(report.pruned):,} ({len(pruned):,} in all)", err=True
            )
        if not report.again:
            break
    return pruned, changed, reclaimed


def _said_due(report: PruneReport, json_output: bool) -> None:
    """Print what a dry run found: one line a workload, then the count."""
    if json_output:
        print_json(report.to_json())
        return
    from rich.table import Table

    console = stdout_console()
    if report.pruned:
        table = Table(title="due for pruning", title_justify="left")
        table.add_column("id", no_wrap=True)
        table.add_column("state", no_wrap=True)
        table.add_column("definition", overflow="fold")
        table.add_column("finished", overflow="fold")
        for item in report.pruned:
            table.add_row(
                item["work_id"], item["state"], item["definition_id"], when(item["updated_at"])
            )
        console.print(table)
    more = " (and more: this is one pass's worth)" if report.more else ""
    console.print(f"would prune {len(report.pruned):,} finished workloads{more}")
