"""Where a run's stores and queues are made: scratch folders, and the RAM disk."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Final

SCRATCH_PREFIX: Final = "tmp-feltdb-bench-"
"""Every scratch folder of a run starts so (on /dev/shm too: one a killed run left behind
is easy to find and remove)."""

RAM_DISK: Final = Path("/dev/shm")
"""The RAM disk the SQLite drains run on once more, where the machine has one."""

RAM_DISK_ROOM: Final = 4 * 1024**3
"""Free bytes the RAM disk must have for those drains (a 20,000-workload store and its
log take about 0.3 GiB; a container's default /dev/shm of 64 MiB would not do)."""


def ram_disk() -> Path | None:
    """The RAM disk, if there is one with :data:`RAM_DISK_ROOM` free."""
    if not RAM_DISK.is_dir():
        return None
    return RAM_DISK if shutil.disk_usage(RAM_DISK).free >= RAM_DISK_ROOM else None
