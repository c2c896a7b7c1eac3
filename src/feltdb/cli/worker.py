"""The ``feltdb worker MODULE:OBJECT`` command: load a :class:`~feltdb.worker.Worker`
and run it until SIGTERM or Ctrl-C.
"""

from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from feltdb.cli.logs import LogJsonOption, LogLevel, LogLevelOption, configure_logging
from feltdb.cli.targets import typed, usage_error
from feltdb.cli.worker_health import HealthHostOption, HealthPortOption, UnhealthyAfterOption
from feltdb.errors import WorkloadError
from feltdb.limits import (
    DEFAULT_UNHEALTHY_AFTER_S,
    MAX_COMPLETION_WAIT_MS,
    MAX_CONCURRENCY,
    MAX_PLANS_PER_BATCH,
)

if TYPE_CHECKING:  # the runtime is imported when a worker is loaded, not for --help
    from feltdb.worker import Worker

worker_app = typer.Typer(add_completion=False, rich_markup_mode=None)
"""Holds the ``worker`` command; the root adds it without a name (a top-level command)."""


def load_worker(target: str) -> Worker:
    """The :class:`Worker` named by ``MODULE:OBJECT`` (a module importable from the
    current directory, e.g. ``tasks:worker`` for ``./tasks.py``).

    Raises:
        typer.BadParameter: the target is malformed, does not import, or is not a Worker.
    """
    from feltdb.worker import Worker

    module_name, _, attribute = target.partition(":")
    if not module_name or not attribute:
        raise typer.BadParameter(
            f"expected MODULE:OBJECT, got {target!r}", param_hint="MODULE:OBJECT"
        )
    # Like `python -m`: the working directory's modules are importable.
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise typer.BadParameter(
            f"cannot import {module_name!r}: {error}", param_hint="MODULE:OBJECT"
        ) from None
    found = getattr(module, attribute, None)
    if not isinstance(found, Worker):
        what = "missing" if found is None else f"an instance of {type(found).__name__}"
        raise typer.BadParameter(
            f"{target} is {what}, not a feltdb.worker.Worker", param_hint="MODULE:OBJECT"
        )
    return found


TargetArgument = Annotated[
    str,
    typer.Argument(
        metavar="MODULE:OBJECT",
        help="The Worker to run, e.g. tasks:worker for worker = Worker(...) in ./tasks.py.",
    ),
]
UrlOption = Annotated[
    str | None,
    typer.Option(envvar="FELTDB_URL", help="The feltdb server (overrides the Worker's)."),
]
TokenOption = Annotated[
    str | None,
    typer.Option(
        envvar="FELTDB_TOKEN",
        help="The worker's token: a grant with workload:claim (overrides the Worker's); "
        "feltdb grant issue --worker NAME mints one.",
    ),
]
TokenFileOption = Annotated[
    Path | None,
    typer.Option(
        envvar="FELTDB_TOKEN_FILE",
        exists=True,
        dir_okay=False,
        help="A file holding the worker's token, instead of --token: it is re-read when it "
        "changes (looked at every second or so), so writing a new token there rotates it "
        "without a restart. A file holding no usable token is said once; the token is kept. "
        "A --token typed on the command line wins over FELTDB_TOKEN_FILE.",
    ),
]
DbOption = Annotated[
    str | None, typer.Option(help="Work on this store directly (embedded), with no server.")
]
TenantOption = Annotated[
    str | None, typer.Option(help="With --db: the tenant whose work is claimed.")
]
ApplicationOption = Annotated[
    str | None, typer.Option(help="With --db: the application whose work is claimed.")
]
ConcurrencyOption = Annotated[
    int | None,
    typer.Option(min=1, max=MAX_CONCURRENCY, help="Handlers run at once (overrides the Worker's)."),
]
CompletionBatchOption = Annotated[
    int | None,
    typer.Option(
        min=1,
        max=MAX_PLANS_PER_BATCH,
        help="Completions sent in one call (one commit) at most, for attempts finishing "
        "together; 1: one call each (overrides the Worker's; default 100).",
    ),
]
CompletionWaitOption = Annotated[
    int | None,
    typer.Option(
        min=0,
        max=MAX_COMPLETION_WAIT_MS,
        help="Milliseconds a finished attempt waits for others to join its completion's "
        "call; it goes at once when every running attempt waits (default 20).",
    ),
]
GraceOption = Annotated[
    float | None,
    typer.Option(
        min=0,
        help="Seconds running handlers get to finish after SIGTERM/Ctrl-C before they "
        "are reported failed (overrides the Worker's; default 30).",
    ),
]


@worker_app.command("worker")
def worker_command(
    context: typer.Context,
    target: TargetArgument,
    url: UrlOption = None,
    token: TokenOption = None,
    token_file: TokenFileOption = None,
    db: DbOption = None,
    tenant: TenantOption = None,
    application: ApplicationOption = None,
    concurrency: ConcurrencyOption = None,
    grace_period: GraceOption = None,
    completion_batch: CompletionBatchOption = None,
    completion_wait_ms: CompletionWaitOption = None,
    health_port: HealthPortOption = None,
    health_host: HealthHostOption = "127.0.0.1",
    unhealthy_after: UnhealthyAfterOption = DEFAULT_UNHEALTHY_AFTER_S,
    log_json: LogJsonOption = False,
    log_level: LogLevelOption = LogLevel.INFO,
) -> None:
    """Run a worker: claim work its handlers can run, heartbeat, and report results, until
    SIGTERM or Ctrl-C (then running handlers get a grace period; a second signal ends it).
    At start it says when its token expires, and again shortly before. With
    --health-port it answers GET /healthz; under systemd (NOTIFY_SOCKET set) it says
    READY=1 once it first reached its authority, and feeds the watchdog while healthy.
    """
    configure_logging(json_lines=log_json, level=log_level)
    worker = load_worker(target)
    if concurrency is not None:
        worker.concurrency = concurrency
    if grace_period is not None:
        worker.grace_period_s = grace_period
    if completion_batch is not None:
        worker.completion_batch = completion_batch
    if completion_wait_ms is not None:
        worker.completion_wait_ms = completion_wait_ms
    if tenant is not None:
        worker.tenant = tenant
    if application is not None:
        worker.application = application
    health = (health_host, health_port, unhealthy_after)
    if db is not None:
        from feltdb.work.store import WorkloadStore

        with WorkloadStore.open(db) as store:
            worker.connect(store=store)
            _run(worker, *health)
        return
    if token_file is not None and token is not None:
        if typed(context, "token") and typed(context, "token_file"):
            raise usage_error("give --token or --token-file, not both")
        if typed(context, "token"):
            token_file = None  # FELTDB_TOKEN_FILE (an image's, say) gives way to a typed token
        else:
            token = None  # FELTDB_TOKEN, from the environment, gives way to the file
    _connect(worker, url, token, token_file)
    _run(worker, *health)


def _run(worker: Worker, health_host: str, health_port: int | None, unhealthy_after: float) -> None:
    """Run ``worker`` under its supervisor: /healthz served, systemd told.

    Raises:
        typer.Exit: (2) the health port cannot be listened on, or the unhealthy bound is
            one an idle worker's claim would cross.
    """
    from feltdb.worker.supervised import Supervision

    try:
        supervision = Supervision(worker, health_host, health_port, unhealthy_after)
    except WorkloadError as error:
        raise usage_error(f"--unhealthy-after: {error.message}") from None
    except OSError as error:
        raise usage_error(
            f"--health-port: cannot listen on {health_host}:{health_port}: {error.strerror}"
        ) from None
    with supervision:
        worker.run()


def _connect(worker: Worker, url: str | None, token: str | None, token_file: Path | None) -> None:
    """Point ``worker`` at the server the options name (else its own), with the token or
    the token file they name (else its own).

    Raises:
        typer.Exit: (2) a URL that is not one, or no authority at all.
    """
    if url is not None:
        from feltdb.client.http import server_url

        try:
            server_url(url)
        except WorkloadError as error:
            raise usage_error(f"--url: {error.message}") from None
    if url is not None or token is not None or token_file is not None:
        worker.connect(url, token=token, token_file=token_file)
    has_token = worker.token or worker.token_file is not None
    if worker.client is None and worker.store is None and not (worker.url and has_token):
        raise usage_error(
            "no authority to work for: give --url and --token or --token-file (or "
            "FELTDB_URL and FELTDB_TOKEN), or --db"
        )
