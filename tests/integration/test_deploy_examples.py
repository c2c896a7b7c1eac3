"""The deployment examples run as written: ``examples/systemd/feltdb-worker.service`` (with
``worker.env``) and ``examples/container/Dockerfile``, each read here as its runner reads
it, its worker command started as that runner would start it (same argv, same
environment) against a real ``feltdb serve`` on either backend.

What cannot run on this machine, and is not pretended: no container engine runs here (nor
on CI), so the image is not built; systemd is not PID 1, so the unit is not started by
systemd. Instead ``systemd-analyze verify`` checks the unit, systemd's notification socket
is played by a socket of the test's, and the Dockerfile's build context is assembled as
its COPY lines say and its feltdb built into a wheel and installed apart, so that the
worker runs the image's feltdb, not the checkout's.

Each test changes what a deployment would choose: the server's URL and a free health port
(tests run side by side), the token file's path, and the unhealthy bound (8 s, not 60),
through the same environment variables a deployment sets. The worker takes only a bound
longer than the sample worker's 2 s long-poll and a 5 s margin (an idle worker's wait for
work must not cross it), so 8 s; a stopped server is seen at once (its claims are refused
a connection) and judged 8 s later.
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from support.deploy_files import (
    Dockerfile,
    environment_file,
    healthz,
    path_in,
    seconds,
    setting,
    unit_sections,
)
from support.server import WORK_CAPABILITY, Server, free_port, serve, stop, submission

from feltdb import Subject
from feltdb.auth.policy import CLAIM

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
BIN = Path(sys.executable).parent
UNHEALTHY_AFTER = "8"
WAIT_S = 60.0
"""The longest any step is waited for (a bound on failure, not a measured time)."""
SYSTEMD_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin"
"""The PATH systemd gives a service."""


@pytest.fixture
def server(backend: str, new_target: Callable[..., str], tmp_path: Path) -> Iterator[Server]:
    home = tmp_path / "server"
    home.mkdir()
    yield from serve(home, new_target("deploy"), backend=backend)


def worker_token(server: Server, path: Path) -> Path:
    path.write_text(
        server.token("default", subject=Subject.worker("w1"), capabilities={CLAIM, WORK_CAPABILITY})
    )
    return path


def submit(server: Server) -> str:
    headers = server.headers("default", subject=Subject.human("ops"))
    body = submission(uuid.uuid4().hex, definition_id="send-email")
    answer = httpx.post(f"{server.url}/v1/workloads", json=body, headers=headers, timeout=10)
    assert answer.status_code == 201, answer.text
    workload_id: str = answer.json()["workload_id"]
    return workload_id


def wait_for_state(server: Server, workload_id: str, state: str, log: Path) -> None:
    headers = server.headers("default", subject=Subject.human("ops"))
    deadline = time.monotonic() + WAIT_S
    while True:
        found = httpx.get(f"{server.url}/v1/workloads/{workload_id}", headers=headers).json()
        if found["state"] == state:
            return
        assert time.monotonic() < deadline, (found["state"], log.read_text())
        time.sleep(0.05)


def until(check: Callable[[], bool], what: str, log: Path) -> None:
    deadline = time.monotonic() + WAIT_S
    while not check():
        assert time.monotonic() < deadline, f"{what}:\n{log.read_text()}"
        time.sleep(0.1)


class Running:
    """A worker process started with ``argv`` in ``cwd`` with exactly ``env``."""

    def __init__(self, argv: list[str], cwd: Path, env: dict[str, str], log: Path) -> None:
        self.log = log
        with log.open("wb") as output:
            self.process = subprocess.Popen(
                argv, cwd=cwd, env=env, stdout=output, stderr=subprocess.STDOUT
            )

    def terminate(self, within_s: float) -> int:
        """SIGTERM, the stop signal of both examples; its exit code within ``within_s``."""
        self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout=within_s)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            pytest.fail(f"no exit within {within_s}s of SIGTERM:\n{self.log.read_text()}")

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()


class Notifications:
    """systemd's notification socket, played by the test: every datagram received."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.said: list[bytes] = []
        self._socket = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self._socket.bind(str(path))
        self._socket.settimeout(0.1)

    def wait_for(self, prefix: bytes, log: Path) -> None:
        """Until a notification starting with ``prefix`` has come."""
        deadline = time.monotonic() + WAIT_S
        while not any(message.startswith(prefix) for message in self.said):
            assert time.monotonic() < deadline, (prefix, self.said, log.read_text())
            try:
                self.said.append(self._socket.recv(200))
            except TimeoutError:
                pass

    def close(self) -> None:
        self._socket.close()


# --- systemd -------------------------------------------------------------------------------


UNIT = EXAMPLES / "systemd" / "feltdb-worker.service"


def test_the_unit_passes_systemd_analyze_verify(tmp_path: Path):
    if shutil.which("systemd-analyze") is None:
        pytest.skip("systemd-analyze is not installed")
    sections = unit_sections(UNIT.read_text())
    binary = shlex.split(setting(sections, "Service", "ExecStart"))[0]
    # Its paths where they are here: verify checks that ExecStart's binary is executable.
    here = (
        UNIT.read_text()
        .replace(binary, str(BIN / "feltdb"))
        .replace(setting(sections, "Service", "EnvironmentFile"), str(tmp_path / "worker.env"))
        .replace(setting(sections, "Service", "WorkingDirectory"), str(tmp_path))
    )
    (tmp_path / "worker.env").write_text((EXAMPLES / "systemd" / "worker.env").read_text())
    (tmp_path / UNIT.name).write_text(here)
    verify = subprocess.run(
        ["systemd-analyze", "verify", "--man=no", UNIT.name],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    # verify exits 0 on an unknown key or a bad value too: what it says is the verdict.
    assert verify.returncode == 0 and verify.stdout + verify.stderr == "", verify.stderr


def test_the_unit_runs_its_worker_ready_watched_and_drained(server: Server, tmp_path: Path):
    sections = unit_sections(UNIT.read_text())
    assert setting(sections, "Service", "Type") == "notify"
    assert setting(sections, "Service", "KillSignal") == "SIGTERM"
    assert setting(sections, "Service", "Restart") == "on-failure"
    assert setting(sections, "Service", "KillMode") == "mixed"  # SIGTERM to the worker only
    stop_within = seconds(setting(sections, "Service", "TimeoutStopSec"))
    watchdog_s = seconds(setting(sections, "Service", "WatchdogSec"))
    # A worker failing at once (a revoked token) is restarted RestartSec apart and stops
    # within the start limit; one waiting for its server (never ready: TimeoutStartSec,
    # then RestartSec) is started again and again, never reaching it.
    burst = int(setting(sections, "Unit", "StartLimitBurst"))
    interval_s = seconds(setting(sections, "Unit", "StartLimitIntervalSec"))
    restart_s = seconds(setting(sections, "Service", "RestartSec"))
    start_s = seconds(setting(sections, "Service", "TimeoutStartSec"))
    assert burst * restart_s < interval_s < burst * (start_s + restart_s)
    app = tmp_path / "app"  # the unit's WorkingDirectory, holding tasks.py
    app.mkdir()
    shutil.copy(EXAMPLES / "hello_worker.py", app / "tasks.py")
    variables = environment_file((EXAMPLES / "systemd" / "worker.env").read_text())
    assert set(variables) == {"FELTDB_URL", "FELTDB_TOKEN_FILE", "FELTDB_HEALTH_PORT"}
    port = free_port()
    variables.update(
        FELTDB_URL=server.url,
        FELTDB_TOKEN_FILE=str(worker_token(server, tmp_path / "worker.token")),
        FELTDB_HEALTH_PORT=str(port),
        FELTDB_UNHEALTHY_AFTER=UNHEALTHY_AFTER,
    )
    argv = shlex.split(setting(sections, "Service", "ExecStart"))
    argv[0] = str(BIN / "feltdb")  # /opt/feltdb/bin/feltdb: the venv feltdb is installed in
    systemd = Notifications(tmp_path / "notify")
    env = {
        "PATH": SYSTEMD_PATH,
        "NOTIFY_SOCKET": str(systemd.path),
        "WATCHDOG_USEC": str(int(watchdog_s * 1_000_000)),
        **variables,
    }
    # WATCHDOG_PID is the service's main process: the shell's pid, which exec keeps.
    wrapped = ["bash", "-c", 'WATCHDOG_PID=$$ exec "$@"', "unit", *argv]
    worker = Running(wrapped, app, env, tmp_path / "worker.log")
    try:
        systemd.wait_for(b"READY=1\n", worker.log)
        systemd.wait_for(b"WATCHDOG=1", worker.log)  # fed at once, then every 45 s
        assert healthz(port) == (200, {"status": "ok"})
        first = submit(server)
        wait_for_state(server, first, "SUCCEEDED", worker.log)
        # A stop while a handler runs: it finishes (drained), and the worker exits 0.
        second = submit(server)
        wait_for_state(server, second, "RUNNING", worker.log)
        assert worker.terminate(stop_within) == 0, worker.log.read_text()
        wait_for_state(server, second, "SUCCEEDED", worker.log)
        systemd.wait_for(b"STOPPING=1", worker.log)
    finally:
        worker.kill()
        systemd.close()
    log = worker.log.read_text()
    # --log-json: each line one JSON object (a journal's structured lines)
    assert all(json.loads(line)["level"] for line in log.splitlines() if line), log


# --- the container ------------------------------------------------------------------------


DOCKERFILE = EXAMPLES / "container" / "Dockerfile"


@pytest.fixture(scope="module")
def image(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The image's file system, as far as this test needs it: the build context's files
    where its COPY lines put them, and the feltdb its RUN line installs (a wheel built from
    the copied sources, installed into ``site/``, ahead of the checkout's on the path).
    """
    root = tmp_path_factory.mktemp("image")
    dockerfile = Dockerfile.parse(DOCKERFILE.read_text())
    assert dockerfile.one("FROM") == "python:3.11-slim"
    ignore = (DOCKERFILE.parent / "Dockerfile.dockerignore").read_text().splitlines()
    assert "*" in ignore  # everything left out of the context, but:
    sent = {line.removeprefix("!") for line in ignore if line.startswith("!")}
    for sources, destination in dockerfile.copies():
        target = path_in(root, destination)
        for source in sources:
            assert source in sent, f"{source} is left out of the build context"
            found = ROOT / source
            if found.is_dir():
                shutil.copytree(found, target, ignore=shutil.ignore_patterns("__pycache__"))
            else:
                place = target / found.name if destination.endswith("/") else target
                place.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy(found, place)
    install = dockerfile.one("RUN").split("&&")[0].split()
    assert install[:2] == ["pip", "install"], install
    source = path_in(root, install[2])
    pip = [sys.executable, "-m", "pip"]
    wheels, site = root / "wheels", root / "site"
    subprocess.run([*pip, "wheel", "-q", "--no-deps", "-w", wheels, source], check=True)
    [wheel] = wheels.glob("feltdb-*.whl")
    # Its dependencies are the venv's (the same pins); feltdb itself is the wheel's.
    subprocess.run([*pip, "install", "-q", "--no-deps", "--target", site, wheel], check=True)
    return root


def container_env(image: Path, dockerfile: Dockerfile, overrides: dict[str, str]) -> dict[str, str]:
    """The container's environment: the Dockerfile's ENV, with ``overrides`` as
    ``docker run -e`` gives them; ``python`` and ``feltdb`` on PATH with the image's feltdb.
    """
    return {
        "PATH": f"{BIN}:/usr/local/bin:/usr/bin:/bin",
        "PYTHONPATH": str(image / "site"),
        **dockerfile.env,
        **overrides,
    }


def test_the_image_runs_its_worker_healthy_then_not_and_stops(
    image: Path, server: Server, tmp_path: Path
):
    dockerfile = Dockerfile.parse(DOCKERFILE.read_text())
    assert dockerfile.one("STOPSIGNAL") == "SIGTERM"
    # By number (runAsNonRoot), the user and group the RUN line creates.
    assert dockerfile.one("USER") == "10001:10001"
    assert {"--uid 10001", "--gid 10001"} <= set(
        re.findall(r"--[ug]id \d+", dockerfile.one("RUN"))
    ), dockerfile.one("RUN")
    port = free_port()
    env = container_env(
        image,
        dockerfile,
        {
            "FELTDB_URL": server.url,
            "FELTDB_TOKEN_FILE": str(worker_token(server, tmp_path / "worker-token")),
            "FELTDB_HEALTH_PORT": str(port),
            "FELTDB_UNHEALTHY_AFTER": UNHEALTHY_AFTER,
        },
    )
    workdir = path_in(image, dockerfile.one("WORKDIR"))
    found = subprocess.run(
        ["python", "-c", "import feltdb; print(feltdb.__file__)"],
        env=env, cwd=workdir, capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert found.stdout.startswith(str(image / "site")), found.stdout  # the image's feltdb
    options, probe = dockerfile.healthcheck()
    probe_timeout = seconds(options["timeout"])

    # A proxy the container was given (for the worker's own calls): the probe ignores it.
    probe_env = {**env, "http_proxy": "http://127.0.0.1:9", "HTTP_PROXY": "http://127.0.0.1:9"}

    def healthy() -> bool:
        run = subprocess.run(probe, env=probe_env, cwd=workdir, capture_output=True, timeout=60)
        assert run.returncode in (0, 1), run.stderr
        return run.returncode == 0

    worker = Running(dockerfile.cmd(), workdir, env, tmp_path / "worker.log")
    try:
        until(healthy, "the HEALTHCHECK never passed", worker.log)
        assert probe_timeout >= 1
        first = submit(server)
        wait_for_state(server, first, "SUCCEEDED", worker.log)
        stop(server.process)  # the server is gone: unhealthy once past the bound
        until(lambda: not healthy(), "the HEALTHCHECK kept passing", worker.log)
        status, body = healthz(port)
        assert status == 503 and "has not been reached" in body["reason"], body
        # docker stop: SIGTERM, then SIGKILL after --stop-timeout (30 s, as the file says)
        assert worker.terminate(30) == 0, worker.log.read_text()
    finally:
        worker.kill()
