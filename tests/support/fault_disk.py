"""A full disk under a SQLite store, for ``tests/reliability/test_faults.py``.

The parent (the test) gives the store a small file system: a ``tmpfs`` of a few MiB that it
mounts (:func:`mount_tmpfs`; it unmounts it in a ``finally``), or, where mounting is not
permitted, nothing: then this module's child process limits the size of the files it may
write with ``RLIMIT_FSIZE`` (a write past it fails with ``EFBIG``, Python ignoring
``SIGXFSZ``). The load runs in the child, ``python fault_disk.py MODE DIR OUT ROUNDS
HOLD_S``, so that a store that hangs can be killed with it.

The child (:func:`run`) opens one store in ``DIR`` and starts a load on it: two
submitters admitting work with a 1 KiB input and a worker claiming and completing it. Then,
``ROUNDS`` times: the space is filled (on tmpfs the load fills it by itself, a filler file
having taken part of it first; under the limit, the limit is lowered to the files' sizes),
the load is left refused for ``HOLD_S``, the space is freed (the filler deleted in the first
round, the tmpfs remounted 512 KiB bigger in the next ones; under the limit, the limit
raised), and the time until the load is acknowledged again is measured. Where 512 KiB is
not enough room for the store to go on (once the WAL reaches SQLite's checkpoint threshold,
the checkpoint needs room for every page it copies into the database file: measured, the
round that crosses 4 MiB), more is freed, up to :data:`MAX_FREES` times, and counted
(``extra_frees``). At the end all the space is
given back, the load drained, and the same open store checked: ``PRAGMA integrity_check``,
every acknowledged admission readable, every acknowledged completion ``SUCCEEDED``. The
figures go to ``OUT`` as JSON.
"""

from __future__ import annotations

import json
import os
import resource
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

_TESTS = str(Path(__file__).resolve().parents[1])
if _TESTS not in sys.path:
    sys.path.insert(0, _TESTS)

from feltdb import WorkloadError, WorkloadStore  # noqa: E402
from support.factories import CAPABILITIES, make_request  # noqa: E402
from support.fault_load import (  # noqa: E402
    STORAGE_FAILURE,
    Ledger,
    Load,
    acceptable_refusals,
    audit,
    batch_worker,
    wait_until_settled,
)

MIB = 1024 * 1024
SIZE_BYTES = 2 * MIB
"""The tmpfs at the start. Below SQLite's automatic checkpoint (1,000 pages of WAL, 4 MiB)
through the bounded rounds, so every commit appends to the WAL and a full disk is met at
once rather than after a checkpoint makes room in the WAL."""
FILLER_BYTES = 512 * 1024
"""The filler written before the load starts, deleted to free space in the first round."""
STEP_BYTES = 512 * 1024
"""What each later round adds to the tmpfs (or to the size limit)."""
BIG_BYTES = 256 * MIB
"""The room given back at the end."""
PAD = "x" * 1024
"""Each workload's input carries this, so the load fills the space quickly."""
REFUSAL_TIMEOUT_S = 60.0
"""A full disk that the store does not refuse within this long fails the case."""
RECOVERY_TIMEOUT_S = 30.0
ENOUGH_S = 10.0
"""A load not acknowledged again this long after space was freed is given more space."""
MAX_FREES = 4
"""How many times a round frees space (each :data:`STEP_BYTES`) before a store that still
makes no progress fails the case."""
SETTLE_TIMEOUT_S = 60.0
WARM_UP = 10
"""Completions acknowledged before the first round (the load is running)."""
SLOWEST_CALL_S = 10.0
"""No call may take longer (the store's busy timeout): a full disk is refused, not waited on."""


def mount_tmpfs(directory: Path, size_bytes: int) -> bool:
    """Mount a tmpfs of ``size_bytes`` on ``directory``: ``True`` if it was mounted,
    ``False`` if mounting is not permitted here (not root, no ``CAP_SYS_ADMIN``).

    Raises:
        AssertionError: the mount failed for another reason.
    """
    if os.geteuid() != 0:
        return False
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size_bytes}", "tmpfs", str(directory)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode == 0:
        return True
    text = (done.stdout + done.stderr).lower()
    if "permission denied" in text or "not permitted" in text or "superuser" in text:
        return False
    raise AssertionError(f"mount failed: {done.stdout}{done.stderr}")


def unmount(directory: Path) -> None:
    """Unmount ``directory`` (lazily if something still holds it open)."""
    done = subprocess.run(["umount", str(directory)], capture_output=True, check=False)
    if done.returncode != 0:
        subprocess.run(["umount", "-l", str(directory)], capture_output=True, check=False)


def integrity(path: Path) -> list[str]:
    """``PRAGMA integrity_check`` of the file, on a connection of its own."""
    connection = sqlite3.connect(path)
    try:
        return [row[0] for row in connection.execute("PRAGMA integrity_check").fetchall()]
    finally:
        connection.close()


class TmpfsSpace:
    """The space of a tmpfs mounted on ``directory``: filled by the load, freed by deleting
    the filler (first round) or remounting bigger.
    """

    method = "tmpfs"

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.size = SIZE_BYTES
        self.filler = directory / "filler"

    def prepare(self) -> None:
        with self.filler.open("wb") as out:
            out.write(b"\0" * FILLER_BYTES)

    def fill(self, round_: int) -> None:
        """Nothing to do: the load fills what is left by itself."""

    def free(self, round_: int, attempt: int) -> str:
        if round_ == 0 and attempt == 0:
            self.filler.unlink()
            return f"deleted a {FILLER_BYTES // 1024} KiB filler"
        self.size += STEP_BYTES
        self._remount()
        return f"remounted at {self.size // 1024} KiB"

    def free_all(self) -> None:
        self.size = BIG_BYTES
        self._remount()

    def _remount(self) -> None:
        done = subprocess.run(
            ["mount", "-o", f"remount,size={self.size}", str(self.directory)],
            capture_output=True,
            text=True,
            check=False,
        )
        assert done.returncode == 0, f"remount failed: {done.stdout}{done.stderr}"


class LimitSpace:
    """The space under ``RLIMIT_FSIZE``: filled by lowering the limit to the largest file
    of ``directory``, freed by raising it.
    """

    method = "rlimit"

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.limit = resource.RLIM_INFINITY

    def prepare(self) -> None:
        """Nothing to do."""

    def fill(self, round_: int) -> None:
        self.limit = max(path.stat().st_size for path in self.directory.iterdir())
        self._set(self.limit)

    def free(self, round_: int, attempt: int) -> str:
        self.limit += STEP_BYTES
        self._set(self.limit)
        return f"raised RLIMIT_FSIZE to {self.limit // 1024} KiB"

    def free_all(self) -> None:
        self._set(resource.RLIM_INFINITY)

    @staticmethod
    def _set(soft: int) -> None:
        _, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))


def run(mode: str, directory: Path, rounds: int, hold_s: float) -> dict[str, Any]:
    """The case, in this process; answers its figures and what was wrong."""
    space = TmpfsSpace(directory) if mode == "tmpfs" else LimitSpace(directory)
    path = directory / "work.db"
    ledger = Ledger()
    problems: list[str] = []
    recoveries: list[float | None] = []
    freed: list[str] = []
    extra_frees = 0
    pause = threading.Event()
    store = WorkloadStore.open(path)
    space.prepare()
    load = Load(ledger, "disk")

    def admit(key: str) -> Any:
        request = make_request(
            idempotency_key=key, input={"key": key, "pad": PAD}, created_at=int(time.time())
        )
        return store.admit(request)[0]

    load.add_submitter(admit)
    load.add_submitter(admit)
    load.add_loop("worker", batch_worker(store, ledger, CAPABILITIES))
    began = time.monotonic()
    load.start()
    try:
        if not ledger.wait_for("completed", WARM_UP, RECOVERY_TIMEOUT_S):
            problems.append(f"the load did not start: {load.failures}")
        for round_ in range(rounds):
            refused = ledger.refused_count(STORAGE_FAILURE)
            space.fill(round_)
            deadline = time.monotonic() + REFUSAL_TIMEOUT_S
            while ledger.refused_count(STORAGE_FAILURE) == refused:
                if time.monotonic() >= deadline or load.failures:
                    problems.append(f"round {round_}: the full store refused nothing")
                    break
                pause.wait(0.01)
            pause.wait(hold_s)  # the load keeps being refused meanwhile
            recovery = None
            for attempt in range(MAX_FREES):
                freed.append(f"round {round_}: {space.free(round_, attempt)}")
                recovery = ledger.recovery_after(time.monotonic(), ENOUGH_S)
                if recovery is not None:
                    break
                # Not enough room yet: SQLite's checkpoint of a WAL at its 4 MiB threshold
                # needs room for the pages it copies into the database file.
                extra_frees += 1
            recoveries.append(recovery)
            if recovery is None:
                problems.append(f"round {round_}: no progress after {freed}")
                break
        space.free_all()
        resumed = ledger.recovery_after(time.monotonic(), RECOVERY_TIMEOUT_S)
        if resumed is None:
            problems.append("no progress once all the space was given back")
        load.stop_submitting()
        counts = wait_until_settled(store, SETTLE_TIMEOUT_S)
    finally:
        space.free_all()
        load.stop()
    took = time.monotonic() - began
    checked = integrity(path)
    found = audit(ledger, store.list("t", "app"))
    unreadable = []
    for ids in ledger.admitted.values():
        for workload_id in ids:
            try:
                store.get(workload_id)
            except WorkloadError as error:
                unreadable.append(f"{workload_id}: {error.code}")
    store.close()
    return {
        "method": space.method,
        "rounds": rounds,
        "freed": freed,
        "extra_frees": extra_frees,
        **found.figures(),
        "recovery_s": max((r for r in recoveries if r is not None), default=None),
        "recoveries_s": recoveries,
        "storage_failures": ledger.refused_count(STORAGE_FAILURE),
        "refusals": dict(ledger.refusals),
        "unexpected_refusals": ledger.unexpected_refusals(acceptable_refusals("-")),
        "untranslated": ledger.untranslated,
        "thread_failures": load.failures,
        "slowest_call_s": ledger.slowest_s,
        "calls": ledger.calls,
        "integrity": checked,
        "unreadable": unreadable,
        "states": counts,
        "stored": found.stored,
        "audit_problems": found.problems,
        "problems": problems,
        "took_s": took,
    }


def main(argv: list[str]) -> None:
    mode, directory, out, rounds, hold_s = argv
    figures = run(mode, Path(directory), int(rounds), float(hold_s))
    Path(out).write_text(json.dumps(figures, sort_keys=True), encoding="utf-8")


if __name__ == "__main__":
    main(sys.argv[1:])
