"""``feltdb migrate-legacy``: import a pre-canonical JSON store file into a store."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

from feltdb.cli.render import stdout_console
from feltdb.cli.targets import DbOption, refusals, usage_error

migrate_app = typer.Typer(add_completion=False, rich_markup_mode=None)
"""Holds ``migrate-legacy``; the root adds it without a name (a top-level command)."""


@migrate_app.command("migrate-legacy")
def migrate_legacy(
    file: Annotated[
        Path, typer.Argument(metavar="FILE", help="The legacy JSON store file to import.")
    ],
    db: DbOption = None,
) -> None:
    """Import a pre-canonical JSON store file into the store --db names, and verify it
    (idempotent: work already imported identically is skipped, and counted so).

    The file is one JSON object: "workloads" maps each workload id to its record (a
    workload as the API answers it), and "idempotency" ("tenant:application:key" to id),
    "result_ids" (result id to id) and "event_sequence" (the highest event sequence) are
    the evidence the import is verified against. A bad record is named on a line of its
    own (index, id, field, why), and nothing is written.
    """
    if not db:
        raise usage_error("migrate-legacy needs --db, the store to import into")
    console = stdout_console()
    counted = [0]
    written = [0]
    from feltdb.work.store import WorkloadStore  # here, as every command: not for --help

    with refusals(), WorkloadStore.open(db) as store:
        with Progress(
            TextColumn("migrating"),
            BarColumn(),
            MofNCompleteColumn(),
            console=console,
        ) as bar:
            task = bar.add_task("migrate", total=None)

            def advance(done: int, total: int) -> None:
                counted[0] = done
                bar.update(task, completed=done, total=total)

            def count(workload_id: str, new: bool) -> None:
                written[0] += new

            WorkloadStore.migrate_legacy_file(store.db, file, advance, imported=count)
    skipped = counted[0] - written[0]
    console.print(
        f"migrated {written[0]} workloads from {file} into {db}"
        + (f" ({skipped} already there, skipped)" if skipped else "")
        + ", verified"
    )
