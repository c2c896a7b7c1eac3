"""Run P worker processes against one backlog and time them from one starting signal.

Each child speaks :mod:`harness.child`'s protocol. The clock starts when every child is
ready (imported, connected) and ``GO`` is written to each; it stops at the latest ``end``
a child reports (each child runs until nothing is left to claim). CPU is counted three
ways: what the children report for their working interval, what ``watched`` processes
(a server) spent over the same interval (from /proc), and what the whole machine spent
(/proc/stat: the database server and everything else included).
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from harness import procfs


class FleetError(RuntimeError):
    """A child failed, or the fleet did not finish in time."""


@dataclass
class FleetRun:
    seconds: float
    done: int
    worker_cpu_s: float
    worker_sys_s: float
    watched_cpu_s: float
    machine_cpu_s: float
    watched_peak_rss_kb: int
    per_process: list[dict[str, Any]] = field(default_factory=list)


def _read_tagged(stream: IO[str], tag: str) -> str | None:
    """The rest of the first line of ``stream`` that starts with ``tag``; None at EOF."""
    for line in stream:
        if line.startswith(tag):
            return line[len(tag) :].strip()
    return None


def run_fleet(
    commands: Sequence[Sequence[str]],
    *,
    env: dict[str, str] | Sequence[dict[str, str]],
    cwd: Path,
    watched: Sequence[int] = (),
    timeout_s: float = 4 * 3600.0,
) -> FleetRun:
    logs = [tempfile.TemporaryFile("w+") for _ in commands]
    envs = [env] * len(commands) if isinstance(env, dict) else list(env)
    children = [
        subprocess.Popen(
            list(command),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=log,
            env=child_env,
            cwd=cwd,
            text=True,
        )
        for command, log, child_env in zip(commands, logs, envs, strict=True)
    ]
    timer = threading.Timer(timeout_s, lambda: [c.kill() for c in children])
    timer.start()
    try:
        for child in children:
            if _read_tagged(child.stdout, "READY") is None:  # type: ignore[arg-type]
                raise FleetError("a child exited before it was ready")
        watched_before = [procfs.process_cpu_seconds(pid) for pid in watched]
        machine_before = procfs.machine_busy_seconds()
        began = time.monotonic()
        for child in children:
            assert child.stdin is not None
            child.stdin.write("GO\n")
            child.stdin.flush()
        results = []
        for child in children:
            line = _read_tagged(child.stdout, "RESULT ")  # type: ignore[arg-type]
            if line is None:
                raise FleetError("a child exited without a result")
            results.append(json.loads(line))
        machine_after = procfs.machine_busy_seconds()
        watched_after = [procfs.process_cpu_seconds(pid) for pid in watched]
        peak = max((procfs.peak_rss_kb(pid) for pid in watched), default=0)
        for child in children:
            _, status, _ = os.wait4(child.pid, 0)
            child.returncode = os.waitstatus_to_exitcode(status)
            if child.returncode != 0:
                raise FleetError(f"a child exited with {child.returncode}")
    except BaseException as error:
        for child in children:
            if child.poll() is None:
                child.kill()
        detail = "\n".join(_tail(log) for log in logs)
        raise FleetError(f"{error}\n--- children's stderr ---\n{detail}") from error
    finally:
        timer.cancel()
        for log in logs:
            log.close()
    return FleetRun(
        seconds=max(r["end"] for r in results) - began,
        done=sum(r["done"] for r in results),
        worker_cpu_s=sum(r["cpu_s"] for r in results),
        worker_sys_s=sum(r.get("sys_s", 0.0) for r in results),
        watched_cpu_s=sum(watched_after) - sum(watched_before),
        machine_cpu_s=machine_after - machine_before,
        watched_peak_rss_kb=peak,
        per_process=results,
    )


def _tail(log: IO[str], chars: int = 3000) -> str:
    log.seek(0)
    return log.read()[-chars:]
