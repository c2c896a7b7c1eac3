"""The child's side of a fleet run (see :mod:`harness.fleet`).

A child sets itself up (imports, connections), prints ``READY``, waits for ``GO`` on its
standard input, works, and prints one ``RESULT {json}`` line: how many items it finished,
when it finished (``time.monotonic()``, one clock for every process on Linux) and the CPU
seconds (user + system, all threads) it spent between ``GO`` and the end.
"""

from __future__ import annotations

import json
import resource
import sys
import time
from typing import Any


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def system_seconds() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_stime


_system_at_go = 0.0


def wait_for_go() -> float:
    """Say ``READY``, block until the driver says ``GO``; returns the CPU seconds so far."""
    global _system_at_go
    print("READY", flush=True)
    line = sys.stdin.readline()
    if line.strip() != "GO":
        sys.exit(f"expected GO, got {line!r}")
    _system_at_go = system_seconds()
    return cpu_seconds()


def report(done: int, cpu_at_go: float, **extra: Any) -> None:
    figures = {
        "done": done,
        "end": time.monotonic(),
        "cpu_s": cpu_seconds() - cpu_at_go,
        "sys_s": system_seconds() - _system_at_go,
    }
    figures.update(extra)
    print("RESULT " + json.dumps(figures), flush=True)
