"""A throwaway PostgreSQL cluster for the tests, run from the installed server binaries.

``python tests/support/pg_cluster.py run -- COMMAND...`` starts a cluster in a new
temporary directory (listening on a unix socket in that directory only, never on a network
interface), runs COMMAND with ``FELTDB_TEST_PG`` set to a superuser URL of it, stops the
cluster and removes the directory, whatever happens to COMMAND (failure, SIGINT, SIGTERM),
and exits with COMMAND's exit code. When ``FELTDB_TEST_PG`` is already set, that server is
used and nothing is started.

The binaries (``initdb``, ``pg_ctl``) are looked up in ``$PG_BIN``, then in the newest
``/usr/lib/postgresql/*/bin`` (Debian's layout), then on ``PATH``. When none is found and
``FELTDB_INSTALL_PG=1`` (``make test`` sets it on CI), root installs Debian's
``postgresql`` package with apt-get; otherwise the message says how.

``FELTDB_PG_SETTINGS`` adds server settings after :data:`SERVER_SETTINGS` (which they
override), separated by spaces: the benchmarks run with ``autovacuum=on``, as production
servers do.

``initdb`` refuses to run as root, so as root the cluster runs as the ``postgres`` OS user
(through ``runuser``), which owns the temporary directory.
"""

from __future__ import annotations

import argparse
import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from types import FrameType

ENV_URL = "FELTDB_TEST_PG"
"""Where the tests find the server (a libpq URL of a superuser)."""

ENV_INSTALL = "FELTDB_INSTALL_PG"
"""``1``: install Debian's ``postgresql`` package when no server binaries are found."""
ENV_SETTINGS = "FELTDB_PG_SETTINGS"
"""Server settings added after :data:`SERVER_SETTINGS`, separated by spaces."""

SERVER_SETTINGS = ("fsync=on", "autovacuum=off")
"""``fsync=on``: commits are as durable as in production, so the tests measure real
commits. ``max_connections`` stays PostgreSQL's default (100), as on a server nobody
configured: the suite must fit in it, every store's pool and wake-up listener included.
``autovacuum=off``: an autovacuum ANALYZE holds a transaction id for a moment, which holds
back what log readers see (the revision scheme of postgres.py); the throwaway databases
are too short-lived to need vacuuming, and a test that reads the log right after its own
commit must not depend on the daemon's timing.
"""

INSTALL_HINT = (
    "PostgreSQL server binaries (initdb, pg_ctl) were not found in $PG_BIN, "
    "/usr/lib/postgresql/*/bin or PATH. Install Debian's package: "
    "`sudo apt-get install -y postgresql` (or set PG_BIN to a bin directory holding initdb "
    "and pg_ctl), or run only the SQLite tests: `make test-sqlite`."
)


class ClusterError(RuntimeError):
    """The cluster could not be found, installed, initialised or started."""


def _version_key(path: Path) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", path.parent.name)) or (0,)


def find_bin_dir() -> Path | None:
    """The directory holding ``initdb`` and ``pg_ctl``, or ``None``."""
    candidates: list[Path] = []
    if os.environ.get("PG_BIN"):
        candidates.append(Path(os.environ["PG_BIN"]))
    candidates.extend(
        sorted(Path("/usr/lib/postgresql").glob("*/bin"), key=_version_key, reverse=True)
    )
    on_path = shutil.which("initdb")
    if on_path is not None:
        candidates.append(Path(on_path).resolve().parent)
    for candidate in candidates:
        if all(os.access(candidate / tool, os.X_OK) for tool in ("initdb", "pg_ctl")):
            return candidate
    return None


def ensure_bin_dir() -> Path:
    """:func:`find_bin_dir`, installing the ``postgresql`` package first when allowed.

    Raises:
        ClusterError: no binaries, and installing them is not allowed or failed.
    """
    found = find_bin_dir()
    if found is not None:
        return found
    may_install = (
        os.environ.get(ENV_INSTALL) == "1"
        and os.geteuid() == 0
        and shutil.which("apt-get") is not None
    )
    if not may_install:
        raise ClusterError(INSTALL_HINT)
    print("pg_cluster: installing Debian's postgresql package (FELTDB_INSTALL_PG=1)", flush=True)
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    for command in (["apt-get", "update"], ["apt-get", "install", "-y", "postgresql"]):
        if subprocess.run(command, env=env, check=False).returncode != 0:
            raise ClusterError(f"`{' '.join(command)}` failed. {INSTALL_HINT}")
    found = find_bin_dir()
    if found is None:
        raise ClusterError(
            f"postgresql was installed but its binaries were not found. {INSTALL_HINT}"
        )
    return found


def ensure_postgres_user() -> None:
    """As root, the cluster runs as the ``postgres`` user (initdb refuses root); Debian's
    package creates that user, but binaries installed otherwise may come without it.

    Raises:
        ClusterError: the user is missing and could not be created.
    """
    try:
        pwd.getpwnam("postgres")
    except KeyError:
        made = subprocess.run(
            ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", "postgres"],
            check=False,
        )
        if made.returncode != 0:
            raise ClusterError(
                "the cluster must run as the 'postgres' user (initdb refuses root), and "
                "creating that user failed"
            ) from None


def free_port() -> int:
    """A port number no local TCP listener holds (it only names the socket file here)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


class PostgresCluster:
    """One throwaway cluster: :meth:`start` it, use :attr:`url`, :meth:`stop` it.

    Also a context manager.
    """

    def __init__(self, bin_dir: Path | None = None) -> None:
        self.bin_dir = bin_dir or ensure_bin_dir()
        self.directory: Path | None = None
        self.port = 0
        self.url = ""
        self._as_postgres = os.geteuid() == 0
        if self._as_postgres:
            ensure_postgres_user()

    # The data directory and the socket live in one private directory, so two clusters
    # (two checkouts, two CI jobs on one machine) never share a socket or a port.
    def start(self) -> str:
        """Initialise and start the cluster; returns its superuser URL.

        Raises:
            ClusterError: initdb or pg_ctl failed (their output is in the message).
        """
        directory = Path(tempfile.mkdtemp(prefix="feltdb-pg-"))
        self.directory = directory
        try:
            if self._as_postgres:
                shutil.chown(directory, user="postgres", group="postgres")
            self.port = free_port()
            self._run(
                "initdb",
                "-D",
                str(directory / "data"),
                "-A",
                "trust",
                "-U",
                "postgres",
                "-E",
                "UTF8",
                "--locale=C",
                "--no-sync",
            )
            settings = [*SERVER_SETTINGS, *os.environ.get(ENV_SETTINGS, "").split()]
            options = f"-k {directory} -h '' -p {self.port}" + "".join(
                f" -c {setting}" for setting in settings
            )
            self._run(
                "pg_ctl",
                "-D",
                str(directory / "data"),
                "-o",
                options,
                "-l",
                str(directory / "server.log"),
                "-w",
                "-t",
                "60",
                "start",
            )
        except BaseException:
            self.stop()
            raise
        self.url = f"postgresql://postgres@/postgres?host={directory}&port={self.port}"
        return self.url

    def stop(self) -> None:
        """Stop the server (immediately: nothing in it is worth a checkpoint) and remove
        its directory. Safe to call twice, and after a failed :meth:`start`.
        """
        directory, self.directory = self.directory, None
        if directory is None:
            return
        try:
            if (directory / "data" / "postmaster.pid").exists():
                self._run(
                    "pg_ctl",
                    "-D",
                    str(directory / "data"),
                    "-m",
                    "immediate",
                    "-w",
                    "stop",
                    check=False,
                )
        finally:
            shutil.rmtree(directory, ignore_errors=True)

    def log(self) -> str:
        """The server's log so far ("" once stopped)."""
        if self.directory is None:
            return ""
        try:
            return (self.directory / "server.log").read_text(errors="replace")
        except OSError:
            return ""

    def _run(self, tool: str, *arguments: str, check: bool = True) -> None:
        command = [str(self.bin_dir / tool), *arguments]
        if self._as_postgres:
            command = ["runuser", "-u", "postgres", "--", *command]
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        if check and done.returncode != 0:
            raise ClusterError(
                f"`{' '.join(command)}` exited with {done.returncode}:\n"
                f"{done.stdout}{done.stderr}{self.log()}"
            )

    def __enter__(self) -> PostgresCluster:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


# --- the CLI -----------------------------------------------------------------------------

SIGINT_GRACE_S = 2.0
"""A terminal's Ctrl-C reaches the whole foreground process group, the command included.
A SIGINT the command has not acted on within this long was sent to us alone: pass it on.
"""


def run(command: Sequence[str]) -> int:
    """Run ``command`` against a fresh cluster (or ``$FELTDB_TEST_PG``); its exit code."""
    if os.environ.get(ENV_URL):
        print(f"pg_cluster: {ENV_URL} is set; using that server", flush=True)
        return subprocess.run(list(command), check=False).returncode

    received: list[tuple[int, float]] = []

    def on_signal(signum: int, frame: FrameType | None) -> None:
        received.append((signum, time.monotonic()))

    # Noted before the cluster starts, so a signal during startup still ends in stop().
    previous = {
        signum: signal.signal(signum, on_signal) for signum in (signal.SIGINT, signal.SIGTERM)
    }
    cluster: PostgresCluster | None = None
    try:
        try:
            cluster = PostgresCluster()
            url = cluster.start()
        except ClusterError as error:
            print(f"pg_cluster: {error}", file=sys.stderr, flush=True)
            return 2
        if received:
            return 128 + received[0][0]
        print(f"pg_cluster: PostgreSQL at {url}", flush=True)
        child = subprocess.Popen(list(command), env=dict(os.environ, **{ENV_URL: url}))
        forwarded = 0
        while True:
            try:
                code = child.wait(timeout=0.2)
            except subprocess.TimeoutExpired:
                pass
            else:
                # Killed by a signal: report it as a shell does (128 + the signal).
                return 128 - code if code < 0 else code
            for signum, at in received[forwarded:]:
                if signum == signal.SIGINT and time.monotonic() - at < SIGINT_GRACE_S:
                    break
                child.send_signal(signum)
                forwarded += 1
    finally:
        if cluster is not None:
            cluster.stop()
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="pg_cluster.py", description=__doc__.split("\n\n")[0] if __doc__ else None
    )
    commands = parser.add_subparsers(dest="action", required=True)
    run_parser = commands.add_parser(
        "run", help="run a command against a throwaway cluster (FELTDB_TEST_PG is its URL)"
    )
    run_parser.add_argument("command", nargs=argparse.REMAINDER)
    arguments = parser.parse_args(argv)
    command = list(arguments.command)
    if command[:1] == ["--"]:
        command = command[1:]
    if not command:
        parser.error("run needs a command: pg_cluster.py run -- COMMAND...")
    return run(command)


if __name__ == "__main__":
    sys.exit(main())
