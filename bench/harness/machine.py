"""The machine and the versions a run measured: recorded beside every figure."""

from __future__ import annotations

import os
import platform
import sqlite3
import subprocess
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def disk_of(path: Path) -> str:
    """The block device under ``path`` and whether it is rotational (as the kernel says;
    a virtual disk reports what its hypervisor tells it).
    """
    try:
        source = subprocess.run(
            ["findmnt", "-n", "-o", "SOURCE,FSTYPE", "--target", str(path)],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()
        device = Path(source[0]).name
        rotational = Path(f"/sys/block/{device}/queue/rotational").read_text().strip()
        kind = "rotational" if rotational == "1" else "non-rotational (SSD/NVMe)"
        virtual = " (virtio)" if device.startswith("vd") else ""
        return f"{source[0]} {source[1]}, {kind} by the kernel{virtual}"
    except (OSError, IndexError, subprocess.CalledProcessError):
        return "unknown"


def git_commit() -> str:
    try:
        out = subprocess.run(
            ["git", "-C", str(ROOT), "describe", "--always", "--dirty", "--abbrev=12"],
            capture_output=True,
            text=True,
            check=True,
        )
        return out.stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def describe() -> dict[str, Any]:
    import feltdb

    return {
        "cpu_count": os.cpu_count(),
        "cpu_model": cpu_model(),
        "kernel": platform.release(),
        "os": platform.platform(),
        "disk": disk_of(ROOT),
        "memory_gb": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1),
        "python": platform.python_version(),
        "sqlite": sqlite3.sqlite_version,
        "feltdb_commit": git_commit(),
        "feltdb_version": getattr(feltdb, "__version__", "?"),
    }
