"""The ``feltdb`` command put together: every group of commands under one typer app, and
the one place that turns a refusal or a usage error into a line and an exit code.
"""

from __future__ import annotations

from typing import Annotated

import typer
from typer.exceptions import TyperException

from feltdb.cli.audit import audit_app
from feltdb.cli.grants import auth_app
from feltdb.cli.migrate import migrate_app
from feltdb.cli.serve import demo, serve
from feltdb.cli.submit import submit_app
from feltdb.cli.work import work_app
from feltdb.cli.worker import worker_app
from feltdb.errors import WorkloadError

__all__ = ["app", "main"]

app = typer.Typer(
    help="feltdb: a durable workload authority. Work is admitted, claimed under leases with "
    "fencing tokens, retried by policy, held for approval, and recovered from dead workers.",
    no_args_is_help=True,
    add_completion=False,
    # Plain help: wrapped to the terminal, no metavar on a flag, no boxes; -h works too.
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)
app.command()(demo)
app.command()(serve)
# Added without names, so their commands and groups appear at the top level.
for group in (auth_app, submit_app, work_app, audit_app, migrate_app, worker_app):
    app.add_typer(group)


def _print_version(asked: bool) -> None:
    if asked:
        from feltdb import __version__

        typer.echo(f"feltdb {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option(
            "--version",
            help="Print feltdb's version and exit.",
            is_eager=True,
            callback=_print_version,
        ),
    ] = False,
) -> None:
    """Feltdb's command line."""


def main() -> None:
    """Entry point: run the command. A refusal prints its code and message on one line and
    exits 1; a usage error (a malformed option, a missing argument) prints one line and
    exits 2; nothing prints a traceback of feltdb's.
    """
    try:
        # Not standalone: click hands back its exceptions, to be said in one line here.
        code = app(standalone_mode=False, prog_name="feltdb")
    except WorkloadError as error:
        from feltdb.cli.targets import refusal_line

        typer.echo(refusal_line(error), err=True)
        raise SystemExit(1) from None
    except typer.Exit as done:
        raise SystemExit(done.exit_code) from None
    except typer.Abort:
        typer.echo("aborted", err=True)
        raise SystemExit(130) from None
    except TyperException as error:  # click's usage errors, as typer vendors them
        if type(error).__name__ == "NoArgsIsHelpError":
            # `feltdb` (or `feltdb grant`) alone: the help, as asked for.
            typer.echo(error.format_message() if hasattr(error, "format_message") else "")
            raise SystemExit(0) from None
        exit_code = getattr(error, "exit_code", 2)
        context = getattr(error, "ctx", None)
        words = context.command_path.split()[1:] if context is not None else []
        command = " ".join(["feltdb", *words])
        message = error.format_message() if hasattr(error, "format_message") else str(error)
        typer.echo(f"error: {message} (see {command} --help)", err=True)
        raise SystemExit(exit_code) from None
    if isinstance(code, int) and code:
        raise SystemExit(code)
