"""Processes the fault suite breaks: a ``feltdb serve`` that can be killed and started again
on the same port, a PostgreSQL cluster of the test's own that can be restarted, and the
termination of every session of a database.

Every wait is bounded, and everything started here is stopped by its context manager, even
after a failure.
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg
import pytest

from feltdb.auth.tokens import Keyring
from support.ci import ON_CI
from support.pg_cluster import INSTALL_HINT, ClusterError, PostgresCluster, find_bin_dir
from support.server import Server, free_port, serve_command, stop, wait_until_healthy

STORAGE_FAILURE_LOGGED = "feltdb.errors.WorkloadError: WORKLOAD_STORAGE_FAILURE"
"""How a logged ``WorkloadError`` of ``WORKLOAD_STORAGE_FAILURE`` ends its traceback."""
PG_CTL_TIMEOUT_S = 120


class RestartableServer:
    """``feltdb serve --db TARGET`` on one fixed port and one keyring, so that it can be
    killed and started again where its clients and workers expect it.

    Each start logs to ``home/server-N.log``. Use as a context manager: the server last
    started is stopped on exit.
    """

    def __init__(self, home: Path, target: str, backend: str, *args: str) -> None:
        self.home = home
        self.target = target
        self.backend = backend
        self.args = args
        self.port = free_port()
        self.keyring = Keyring.generate()
        self.keyring_path = home / "keyring.json"
        self.keyring.save(self.keyring_path)
        self.starts = 0
        self.server: Server | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> Server:
        """Start the server and wait until it answers ``/healthz``."""
        self.starts += 1
        log = self.home / f"server-{self.starts}.log"
        env = {k: v for k, v in os.environ.items() if not k.startswith("FELTDB_")}
        command = serve_command(
            "--db", self.target, "--keyring", str(self.keyring_path), "--port", str(self.port),
            *self.args,
        )  # fmt: skip
        with log.open("wb") as output:
            process = subprocess.Popen(
                command, stdout=output, stderr=subprocess.STDOUT, env=env, cwd=self.home
            )
        self.server = Server(self.url, self.keyring, process, log, self.backend, self.target)
        try:
            wait_until_healthy(self.url, process, log)
        except BaseException:
            stop(process)
            raise
        return self.server

    def kill(self) -> None:
        """SIGKILL the running server and reap it."""
        assert self.server is not None
        process = self.server.process
        process.send_signal(signal.SIGKILL)
        assert process.wait(timeout=30) == -signal.SIGKILL

    def logs(self) -> str:
        """Every start's log, for a failure message."""
        return "\n".join(
            f"--- {path.name}\n{path.read_text(errors='replace')}"
            for path in sorted(self.home.glob("server-*.log"))
        )

    def tracebacks(self) -> list[str]:
        """Each traceback of every start's log (a 500 answered, a crash, an exception a
        loop logged), as ``LOG: MESSAGE | EXCEPTION``: the log line before it and the last
        exception of its chain.
        """
        found = []
        for path in sorted(self.home.glob("server-*.log")):
            lines = path.read_text(errors="replace").splitlines()
            number = 0
            while number < len(lines):
                if not lines[number].startswith("Traceback"):
                    number += 1
                    continue
                before = lines[number - 1] if number else ""
                error, number = _last_exception(lines, number)
                found.append(f"{path.name}: {before} | {error}")
        return found

    def defects(self) -> tuple[list[str], int]:
        """The tracebacks of :meth:`tracebacks` that are defects (their exception is not a
        ``WORKLOAD_STORAGE_FAILURE``: an untranslated error, a crash), and how many others
        there were: a storage failure logged with its traceback by a loop that goes on
        (the maintenance loop says an outage in one line without one, and is not counted).
        """
        tracebacks = self.tracebacks()
        defects = [
            t for t in tracebacks if not t.rsplit(" | ", 1)[-1].startswith(STORAGE_FAILURE_LOGGED)
        ]
        return defects, len(tracebacks) - len(defects)

    def __enter__(self) -> RestartableServer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self.server is not None:
            stop(self.server.process)


_CHAINED = ("The above exception", "During handling of the above exception")


def _last_exception(lines: list[str], start: int) -> tuple[str, int]:
    """The last exception line of the (possibly chained) traceback at ``lines[start]``,
    and the number of the first line after it.
    """
    number, error = start, ""
    while number < len(lines):
        line = lines[number]
        if line.startswith("Traceback") or not line.strip() or line[0].isspace():
            number += 1
            continue
        if line.startswith(_CHAINED):
            number += 1
            continue
        error = line  # an exception of the chain; its message may go on, indented
        number += 1
        while number < len(lines) and lines[number][:1].isspace():
            number += 1
        following = number
        while following < len(lines) and not lines[following].strip():
            following += 1
        if following < len(lines) and lines[following].startswith(_CHAINED):
            number = following
            continue
        break
    return error, number


@contextmanager
def own_cluster() -> Iterator[PostgresCluster]:
    """A PostgreSQL cluster of this test alone (never the shared ``FELTDB_TEST_PG`` one),
    stopped and removed at the end. Without server binaries: skipped, but failed on CI.
    """
    bin_dir = find_bin_dir()
    if bin_dir is None:
        message = f"this test starts a PostgreSQL cluster of its own: {INSTALL_HINT}"
        if ON_CI:
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    cluster = PostgresCluster(bin_dir)
    try:
        try:
            cluster.start()
        except ClusterError as error:
            pytest.fail(f"the test's own cluster did not start: {error}", pytrace=False)
        yield cluster
    finally:
        cluster.stop()


def pg_ctl(cluster: PostgresCluster, *arguments: str) -> None:
    """``pg_ctl -D DATA ARGUMENTS`` on ``cluster`` (as the ``postgres`` user under root, as
    :class:`PostgresCluster` runs it), the server's output appended to its log.

    ``restart`` reuses the options of the last start (``postmaster.opts``), also when the
    server is not running, so it is how a stopped cluster is started again.
    """
    assert cluster.directory is not None
    command = [
        str(cluster.bin_dir / "pg_ctl"), "-D", str(cluster.directory / "data"),
        "-l", str(cluster.directory / "server.log"), *arguments,
    ]  # fmt: skip
    if os.geteuid() == 0:
        command = ["runuser", "-u", "postgres", "--", *command]
    done = subprocess.run(
        command, capture_output=True, text=True, check=False, timeout=PG_CTL_TIMEOUT_S
    )
    assert done.returncode == 0, (
        f"`{' '.join(command)}` exited with {done.returncode}:\n"
        f"{done.stdout}{done.stderr}{cluster.log()[-4000:]}"
    )


def terminate_sessions(url: str) -> int:
    """End every other session of ``url``'s database, waiting (up to 10 s each) until each
    has gone; answers how many were ended.
    """
    with psycopg.connect(url, autocommit=True) as connection:
        rows = connection.execute(
            "SELECT count(*) FROM pg_stat_activity, pg_terminate_backend(pid, 10000) AS ended "
            "WHERE datname = current_database() AND pid <> pg_backend_pid() AND ended"
        ).fetchall()
    ended: int = rows[0][0]
    return ended
