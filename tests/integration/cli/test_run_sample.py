"""``make run``'s script, ``scripts/run-sample``, in a terminal: work flows, and one Ctrl-C
stops the script, its worker and its server, also when it lands inside a submission (a
child in a session of its own, which the terminal's SIGINT does not reach).

The script runs from a copy of its part of the checkout in a directory of the test's own
(it writes its store and keyring beside ``scripts/``), in a pseudo-terminal, so that
Ctrl-C reaches it as a terminal's does: as SIGINT to the foreground process group.
"""

from __future__ import annotations

import os
import pty
import select
import shutil
import signal
import sys
import time
from pathlib import Path

import pytest
from support.server import free_port

ROOT = Path(__file__).parents[3]
CTRL_C = b"\x03"


class Terminal:
    """A command in a pseudo-terminal, and everything it has printed."""

    def __init__(self, argv: list[str], cwd: Path, env: dict[str, str]) -> None:
        self.pid, self.fd = pty.fork()
        if self.pid == 0:  # the child: becomes the command
            os.chdir(cwd)
            os.execve(argv[0], argv, env)
        self.output = b""
        self.status: int | None = None

    def read_until(self, text: str, timeout_s: float) -> bool:
        """Read until ``text`` has been printed (True), or the command ended or the time
        passed (False)."""
        deadline = time.monotonic() + timeout_s
        while text.encode() not in self.output:
            if time.monotonic() > deadline or not self._read(0.1):
                return text.encode() in self.output
        return True

    def wait(self, timeout_s: float) -> int | None:
        """Read until the command exits: its exit status, or ``None`` past the timeout."""
        deadline = time.monotonic() + timeout_s
        while self.status is None and time.monotonic() < deadline:
            self._read(0.1)
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid == self.pid:
                self.status = os.waitstatus_to_exitcode(status)
        return self.status

    def _read(self, timeout_s: float) -> bool:
        """Read what is there; False once the terminal is closed."""
        ready, _, _ = select.select([self.fd], [], [], timeout_s)
        if ready:
            try:
                chunk = os.read(self.fd, 65536)
            except OSError:  # EIO: every process of the terminal has closed it
                return False
            if not chunk:
                return False
            self.output += chunk
        return True

    def kill(self) -> None:
        if self.status is None:
            os.killpg(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)
        os.close(self.fd)


def running_in(directory: Path) -> dict[int, str]:
    """The running feltdb processes started in ``directory``: their command lines by pid."""
    mine = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            if "feltdb" in command and (entry / "cwd").resolve() == directory.resolve():
                mine[int(entry.name)] = command
        except OSError:  # it ended meanwhile, or is not ours to read
            continue
    return mine


@pytest.mark.multiprocess
def test_one_ctrl_c_during_a_submission_stops_the_script_its_worker_and_its_server(
    tmp_path: Path,
) -> None:
    (tmp_path / "scripts").mkdir()
    shutil.copy(ROOT / "scripts" / "run-sample", tmp_path / "scripts" / "run-sample")
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    port = free_port()
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(tmp_path),
        "BIN": str(Path(sys.executable).parent),
        "FELTDB_PORT": str(port),
    }
    terminal = Terminal(["/bin/bash", "scripts/run-sample"], tmp_path, env)
    try:
        assert terminal.read_until("submitted workload_", 90), terminal.output.decode()
        # Catch the script inside a submission, whose process the SIGINT does not reach.
        deadline = time.monotonic() + 30
        while not any(" submit send-email" in line for line in running_in(tmp_path).values()):
            assert time.monotonic() < deadline, "no submission seen in 30 s"
            terminal._read(0.01)
        os.write(terminal.fd, CTRL_C)
        status = terminal.wait(60)
        said = terminal.output.decode(errors="replace")
        deadline = time.monotonic() + 10
        while running_in(tmp_path) and time.monotonic() < deadline:
            time.sleep(0.1)
        left = running_in(tmp_path)
    finally:
        terminal.kill()
        for pid in running_in(tmp_path):  # in sessions of their own: no terminal reaches them
            os.kill(pid, signal.SIGKILL)
    assert status == 130, said
    assert "stopping the worker..." in said and "stopping the server..." in said, said
    assert left == {}  # the submission finished, nothing is left behind


def test_a_busy_port_stops_the_script_before_it_starts_anything(tmp_path: Path) -> None:
    import socket
    import subprocess

    (tmp_path / "scripts").mkdir()
    shutil.copy(ROOT / "scripts" / "run-sample", tmp_path / "scripts" / "run-sample")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        env = {
            "PATH": os.environ["PATH"],
            "HOME": str(tmp_path),
            "BIN": str(Path(sys.executable).parent),
            "FELTDB_PORT": str(port),
        }
        ran = subprocess.run(
            ["/bin/bash", "scripts/run-sample"], cwd=tmp_path, env=env,
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
    assert ran.returncode == 1, ran
    assert f"cannot listen on 127.0.0.1:{port}" in ran.stderr
    assert f"FELTDB_PORT={port + 1} make run" in ran.stderr
    assert "feltdb is running" not in ran.stdout
    assert not (tmp_path / "feltdb.sqlite3").exists()  # no server was started
    assert running_in(tmp_path) == {}
