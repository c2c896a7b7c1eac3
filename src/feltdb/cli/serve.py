"""``feltdb serve`` (the HTTP API on a store) and ``feltdb demo`` (a tour on a store file).

The root registers both as its own commands (listed first). The server package (FastAPI,
uvicorn) is imported only when ``serve`` runs.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NoReturn

import typer
from rich.console import Console

from feltdb.cli.logs import LogJsonOption, LogLevel, LogLevelOption, configure_logging
from feltdb.cli.prune import RetainOption
from feltdb.heap import settle_heap

if TYPE_CHECKING:  # what a command runs is imported when it runs, not for --help
    from feltdb.auth import Keyring
    from feltdb.work.retention import RetentionPolicy


def demo(
    db: Annotated[
        Path,
        typer.Option(
            help="The store file (embedded SQLite); created if missing. Not the file `feltdb"
            " serve` uses, so that the tour's work never mixes with yours."
        ),
    ] = Path("feltdb-demo.sqlite3"),
) -> None:
    """Tour the authority: admit work, run it with two workers and an approver, and print
    every transition as it commits.
    """
    from feltdb.demo import run_demo

    run_demo(db, Console())


StoreOption = Annotated[
    str,
    typer.Option(help="The store: a file (embedded SQLite, created if missing) or a URL."),
]
HostOption = Annotated[str, typer.Option(help="The address to listen on.")]
PortOption = Annotated[int, typer.Option(min=0, max=65535, help="The port to listen on.")]
KeyringOption = Annotated[
    Path | None,
    typer.Option(
        help="The keyring file (default: feltdb-keyring.json beside the store file, or in "
        "the working directory for a database URL); created with an admin token when "
        "missing. FELTDB_KEYRING, when set, holds the keyring itself (its JSON, e.g. from a "
        "secret manager) and takes precedence."
    ),
]
MaintenanceOption = Annotated[
    float, typer.Option(help="Seconds between maintenance passes (deadlines, leases).")
]
MaxLeaseOption = Annotated[
    int,
    typer.Option(
        min=1,
        max=30 * 24 * 3600,
        help="The longest lease or heartbeat extension a worker may ask for, in seconds "
        "(a crashed worker's work is recovered at most this long after its last "
        "heartbeat). Default: a day; at most 30 days.",
    ),
]

RequestTimeoutOption = Annotated[
    float,
    typer.Option(
        min=0.1,
        max=300,
        help="Seconds a client has to send a whole request (line, headers, body) from "
        "connecting or from its last answer; a slower one is disconnected.",
    ),
]
MaxConnectionsOption = Annotated[
    int,
    typer.Option(
        min=1,
        max=100_000,
        help="Connections kept open at once; one more is answered 503 and closed. Keep it "
        "below the process's open-file limit (ulimit -n).",
    ),
]
SignInsOption = Annotated[
    int,
    typer.Option(
        min=1,
        max=1_000_000,
        help="Dashboard sign-ins a minute one client address may make (and at once); one "
        "grant may make 10. Clients behind one proxy share its address.",
    ),
]


def serve(
    db: StoreOption = "feltdb.sqlite3",
    host: HostOption = "127.0.0.1",
    port: PortOption = 8700,
    keyring: KeyringOption = None,
    maintenance_interval: MaintenanceOption = 1.0,
    max_lease: MaxLeaseOption = 24 * 3600,
    request_timeout: RequestTimeoutOption = 10.0,
    max_connections: MaxConnectionsOption = 1000,
    sign_ins_per_client: SignInsOption = 30,
    log_json: LogJsonOption = False,
    log_level: LogLevelOption = LogLevel.INFO,
    retain: RetainOption = None,
) -> None:
    """Serve the HTTP API (stops gracefully on SIGTERM or Ctrl-C). Logs go to stderr;
    GET /metrics answers Prometheus metrics without a token. With --retain, the
    maintenance loop prunes every tenant's finished work past those ages.
    """
    import logging

    import uvicorn

    from feltdb.server.app import create_app
    from feltdb.server.connections import guarded_protocol
    from feltdb.work.store import WorkloadStore

    retention = _retention(retain)
    config = configure_logging(json_lines=log_json, level=log_level)
    log = logging.getLogger("feltdb.server")
    console = Console()

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
        ring = _server_keyring(db, keyring, say)
        api = create_app(
            store, ring, maintenance_interval_s=maintenance_interval,
            sign_ins_per_client=sign_ins_per_client, retention=retention,
        )  # fmt: skip
        _announce(say, db, host, port, retention)
        settle_heap()  # what start-up made, frozen out of the collector's walks
        uvicorn.Server(
            uvicorn.Config(
                api,
                log_config=config,
                log_level=log_level.value,
                access_log=False,  # feltdb.access logs each request once, in either format
                http=guarded_protocol(request_timeout, max_connections),
            )
        ).run(sockets=[listening])


def _announce(
    say: Callable[[str], None], db: str, host: str, port: int, retention: RetentionPolicy | None
) -> None:
    """Say where the server serves, its dashboard and how to sign in, and its retention."""
    say(f"feltdb serving {db} at http://{host}:{port}")
    if retention is not None:
        say(f"retention: finished work pruned past {retention.summary()}")
    # Every interface: this machine's own address is one to open.
    reachable = "127.0.0.1" if host in ("0.0.0.0", "::", "") else host
    say(f"dashboard at http://{reachable}:{port}/ui/ (sign in with a token, or a link")
    say(f"  from: feltdb grant issue --admin --login --server http://{reachable}:{port})")


def _retention(items: list[str] | None) -> RetentionPolicy | None:
    """The policy ``--retain`` gives (``None``: not given); a bad item is a usage error."""
    if not items:
        return None
    from feltdb.errors import WorkloadError
    from feltdb.work.retention import parse_policy

    try:
        return parse_policy(items)
    except WorkloadError as error:
        typer.echo(f"error: --retain: {error.message}", err=True)
        raise typer.Exit(2) from None


def _server_keyring(db: str, path: Path | None, say: Callable[[str], None]) -> Keyring:
    """The server's keyring: ``FELTDB_KEYRING``'s, else the file at ``path`` (default:
    beside the store file, or in the working directory for a database), created with an
    admin token, printed, when missing; which one it is, said.
    """
    from feltdb.auth.keyrings import (
        KEYRING_ENV,
        environment_keyring,
        keyring_path_beside,
        load_or_create_keyring,
    )
    from feltdb.storage.targets import sqlite_path

    from_env = environment_keyring()
    if from_env is not None:
        # A keyring handed over by the environment is the operator's: nothing is written
        # and no admin token is minted.
        say(f"keyring from {KEYRING_ENV}")
        return from_env
    # For a database (no store file) the default is the working directory: serve is the one
    # command that may make a keyring there unasked, as it also prints the admin token that
    # makes it usable (a deciding command refuses instead: feltdb.cli.keyrings).
    keyring_path = path if path is not None else keyring_path_beside(sqlite_path(db))
    ring, admin_token = load_or_create_keyring(keyring_path, int(time.time()))
    if admin_token is None:
        say(f"using keyring {keyring_path.absolute()}")
    else:
        say(f"created keyring {keyring_path.absolute()}")
        say("admin token (tenant default, application default, 30 days):")
        # Printed bare on stdout (no wrapping or markup, not a log line) so it can be
        # copied whole.
        print(admin_token, flush=True)
        say("(mint another later with: feltdb grant issue --admin)")
    return ring


def _listen(host: str, port: int) -> socket.socket:
    """A socket listening on ``host``:``port``; a port in use is a one-line error (exit 1)."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP
        )[0]
        # The protocol is named (IPPROTO_TCP, not 0), and the socket itself is handed to
        # uvicorn, not its fd (which it rebuilds as AF_UNIX): asyncio sets TCP_NODELAY
        # only on connections of such a socket. Without it, every answer written in two
        # parts (headers, body) waited for the client's delayed ACK: measured 46 ms per
        # keep-alive request, against well under 1 ms with it.
        listening = socket.socket(family, kind, proto)
    except OSError as error:
        _cannot_listen(host, port, error)
    try:
        listening.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if family == socket.AF_INET6:  # as socket.create_server: "::" is IPv6 alone
            listening.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        listening.bind(address)
        listening.listen(2048)
    except OSError as error:
        listening.close()
        _cannot_listen(host, port, error)
    listening.set_inheritable(True)
    return listening


def _cannot_listen(host: str, port: int, error: OSError) -> NoReturn:
    """Exit 1 with a one-line error (the port in use, an unknown host)."""
    typer.echo(f"error: cannot listen on {host}:{port}: {error.strerror or error}", err=True)
    raise typer.Exit(1) from None
