"""What /proc says about the machine's and a process's CPU time and memory."""

from __future__ import annotations

import os

TICKS = os.sysconf("SC_CLK_TCK")


def machine_busy_seconds() -> float:
    """CPU seconds spent by every process of the machine (all cores), not idle or iowait."""
    with open("/proc/stat") as stat:
        fields = [int(f) for f in stat.readline().split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    return (sum(fields[:8]) - idle) / TICKS


def process_cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` (all its threads) so far."""
    with open(f"/proc/{pid}/stat") as stat:
        after_name = stat.read().rsplit(")", 1)[1].split()
    return (int(after_name[11]) + int(after_name[12])) / TICKS


def peak_rss_kb(pid: int) -> int:
    """The process's peak resident set size (``VmHWM``), in KiB."""
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return 0
