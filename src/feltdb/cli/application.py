"""The ``feltdb`` command put together: every group of commands under one typer app, and
the one place that turns a refusal or a usage error into a line and an exit code, and a
stdout whose reader went away into a quiet exit.
"""

from __future__ import annotations

import os
import sys
from typing import Annotated

import typer
from typer.exceptions import TyperException

from feltdb.cli import log_pruning  # noqa: F401  (adds prune-log, check-export to audit)
from feltdb.cli.audit import audit_app
from feltdb.cli.grants import auth_app
from feltdb.cli.limits import limits_app
from feltdb.cli.migrate import migrate_app
from feltdb.cli.prune import prune_app
from feltdb.cli.schedules import schedule_app
from feltdb.cli.serve import demo, serve
from feltdb.cli.submit import submit_app
from feltdb.cli.work import work_app
from feltdb.cli.worker import worker_app
from feltdb.cli.workers import workers_app
from feltdb.cli.workflows import workflow_app
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
for group in (
    auth_app,
    submit_app,
    work_app,
    workers_app,
    limits_app,
    audit_app,
    migrate_app,
    prune_app,
    worker_app,
):
    app.add_typer(group)
app.add_typer(workflow_app, name="workflow")
app.add_typer(schedule_app, name="schedule")


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


PIPE_CLOSED = 141
"""The exit code of a command whose stdout's reader went away before it finished."""


def main() -> None:
    """Entry point: run the command. A refusal prints its code and message on one line and
    exits 1; a usage error (a malformed option, a missing argument) prints one line and
    exits 2; a closed stdout (``feltdb audit --json | head -1``) prints nothing and exits
    :data:`PIPE_CLOSED`; nothing prints a traceback of feltdb's.
    """
    try:
        _run()
    except (SystemExit, BrokenPipeError) as ended:
        if not _stdout_closed(ended):
            raise
        # 128 + SIGPIPE, what a shell reports of any tool a closed pipe ends (`yes | head
        # -1`): a `set -o pipefail` script sees feltdb as it sees `cat`. Not 0: the output
        # was cut short, and a script that must know can tell.
        _silence_stdout()
        raise SystemExit(PIPE_CLOSED) from None


def _stdout_closed(ended: BaseException) -> bool:
    """Whether the run ended because stdout's reader went away: a ``BrokenPipeError`` that
    reached here, or the exit that typer (an ``OSError`` of ``EPIPE``) or rich (a
    ``BrokenPipeError``) made of one while handling it.
    """
    # Only the exit's own context: a refusal's exit, made from a broken connection to a
    # server, is further down its chain, and is said, not silenced.
    return isinstance(ended, BrokenPipeError) or isinstance(ended.__context__, BrokenPipeError)


def _silence_stdout() -> None:
    """Point stdout's descriptor at the null device: what is still buffered for it is
    flushed there at exit, not into the closed pipe (which Python would report on stderr).
    """
    try:
        descriptor = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):  # replaced, or detached: nothing to flush
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, descriptor)
    os.close(devnull)


def _run() -> None:
    """Run the command, each way it may end said in one line (see :func:`main`)."""
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
