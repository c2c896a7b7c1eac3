"""The ``feltdb`` command: parse, call the library, render. No logic of its own."""

from __future__ import annotations

import os
import socket
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from typer.exceptions import TyperException

from feltdb.cli_auth import auth_app
from feltdb.cli_logging import LogJsonOption, LogLevel, LogLevelOption, configure_logging
from feltdb.cli_ops import ops_app
from feltdb.cli_worker import worker_app
from feltdb.errors import WorkloadError

app = typer.Typer(
    help="feltdb: a durable workload authority. Work is admitted, claimed under leases with "
    "fencing tokens, retried by policy, held for approval, and recovered from dead workers.",
    no_args_is_help=True,
    add_completion=False,
    # Plain help: wrapped to the terminal, no metavar on a flag, no boxes; -h works too.
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)
console = Console()
app.add_typer(auth_app)  # `feltdb keys ...` and `feltdb grant ...`
app.add_typer(ops_app)  # submit, ls, show, approve, ..., audit, migrate-legacy
app.add_typer(worker_app)  # `feltdb worker MODULE:OBJECT`


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


@app.command()
def serve(
    db: Annotated[
        str,
        typer.Option(help="The store: a file (embedded SQLite, created if missing) or a URL."),
    ] = "feltdb.sqlite3",
    host: Annotated[str, typer.Option(help="The address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=0, max=65535, help="The port to listen on.")] = 8700,
    keyring: Annotated[
        Path | None,
        typer.Option(
            help="The keyring file (default: feltdb-keyring.json beside the store file); "
            "created with an admin token when missing. FELTDB_KEYRING, when set, holds the "
            "keyring itself (its JSON, e.g. from a secret manager) and takes precedence."
        ),
    ] = None,
    maintenance_interval: Annotated[
        float, typer.Option(help="Seconds between maintenance passes (deadlines, leases).")
    ] = 1.0,
    max_lease: Annotated[
        int,
        typer.Option(
            min=1,
            max=30 * 24 * 3600,
            help="The longest lease or heartbeat extension a worker may ask for, in seconds "
            "(a crashed worker's work is recovered at most this long after its last "
            "heartbeat). Default: a day; at most 30 days.",
        ),
    ] = 24 * 3600,
    log_json: LogJsonOption = False,
    log_level: LogLevelOption = LogLevel.INFO,
) -> None:
    """Serve the HTTP API (stops gracefully on SIGTERM or Ctrl-C). Logs go to stderr;
    GET /metrics answers Prometheus metrics without a token.
    """
    import logging

    import uvicorn

    from feltdb.auth.tokens import Keyring
    from feltdb.server.app import (
        KEYRING_ENV,
        create_app,
        default_keyring_path,
        load_or_create_keyring,
        wall_clock,
    )
    from feltdb.work.store import WorkloadStore

    config = configure_logging(json_lines=log_json, level=log_level)
    log = logging.getLogger("feltdb.server")

    def say(message: str) -> None:
        # Human mode prints to the console as before; JSON mode keeps every line of the
        # logs JSON, so these become log records too.
        if log_json:
            log.info(message)
        else:
            console.print(message)

    # Bind first, then open the store, then mint: a busy port or a store that cannot be
    # opened fails before a keyring is written or an admin token printed (and lost).
    listening = _listen(host, port)
    with WorkloadStore.open(db, max_lease_ms=max_lease * 1000) as store:
        from_env = os.environ.get(KEYRING_ENV)
        if from_env:
            # A keyring handed over by the environment is the operator's: nothing is
            # written and no admin token is minted.
            ring, admin_token = Keyring.from_json(from_env), None
            say(f"keyring from {KEYRING_ENV}")
        else:
            keyring_path = keyring if keyring is not None else default_keyring_path(db)
            ring, admin_token = load_or_create_keyring(keyring_path, wall_clock())
        url = f"http://{host}:{port}"
        if admin_token is not None:
            say(f"created keyring {keyring_path}")  # only created when read from a file
            say("admin token (tenant default, application default, 30 days):")
            # Printed bare on stdout (no wrapping or markup, not a log line) so it can be
            # copied whole.
            print(admin_token, flush=True)
            say("(mint another later with: feltdb grant issue --admin)")
        api = create_app(store, ring, maintenance_interval_s=maintenance_interval)
        say(f"feltdb serving {db} at {url}")
        uvicorn.Server(
            uvicorn.Config(
                api,
                fd=listening.fileno(),
                log_config=config,
                log_level=log_level.value,
                access_log=False,  # feltdb.access logs each request once, in either format
            )
        ).run()


def _listen(host: str, port: int) -> socket.socket:
    """A socket listening on ``host``:``port``; a port in use is a one-line error (exit 1)."""
    try:
        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
        listening = socket.create_server((host, port), family=family, backlog=2048)
    except OSError as error:
        typer.echo(f"error: cannot listen on {host}:{port}: {error.strerror or error}", err=True)
        raise typer.Exit(1) from None
    listening.set_inheritable(True)
    return listening


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
        typer.echo(f"error {error.code}: {error.message}", err=True)
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
