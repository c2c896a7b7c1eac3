"""The ``feltdb`` command: parse, call the library, render. No logic of its own."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from feltdb.errors import WorkloadError

app = typer.Typer(
    help="feltdb: a durable workload authority. Work is admitted, claimed under leases with "
    "fencing tokens, retried by policy, held for approval, and recovered from dead workers.",
    no_args_is_help=True,
    add_completion=False,
)
console = Console()
errors = Console(stderr=True)


@app.command()
def demo(
    db: Annotated[
        Path, typer.Option(help="The store file (embedded SQLite); created if missing.")
    ] = Path("feltdb.sqlite3"),
) -> None:
    """Tour the authority: admit work, run it with two workers and an approver, and print
    every transition as it commits.
    """
    from feltdb.demo import run_demo

    run_demo(db, console)


@app.callback()
def _root() -> None:
    """Feltdb's command line."""


def main() -> None:
    """Entry point: run the command; a refusal prints its code and message and exits 1."""
    try:
        app()
    except WorkloadError as error:
        errors.print(f"[red]error[/red] {error.code}: {error.message}")
        raise SystemExit(1) from None
