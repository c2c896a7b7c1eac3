"""The driver's side of a peer's drain: prepare its store, run its fleet with the peers'
python, check what it recorded as finished.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path
from typing import Any

from harness import pg
from harness.fleet import run_fleet
from harness.scratch import SCRATCH_PREFIX

BENCH = Path(__file__).resolve().parents[1]
PEERS = {
    "huey": ("peers.huey_peer", "sqlite"),
    "persist-queue": ("peers.persistqueue_peer", "sqlite"),
    "pgqueuer": ("peers.pgqueuer_peer", "postgres"),
    "procrastinate": ("peers.procrastinate_peer", "postgres"),
}


def peers_of(backend: str) -> list[str]:
    return [name for name, (_, kind) in PEERS.items() if kind == backend]


def peer_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FELTDB_", "PYTHON"))}
    env["PYTHONPATH"] = str(BENCH)
    return env


@contextlib.contextmanager
def target_for(backend: str, label: str, under: Path = BENCH) -> Iterator[str]:
    """A fresh queue location: a file made under ``under`` (SQLite), or a fresh PostgreSQL
    database.
    """
    with tempfile.TemporaryDirectory(dir=under, prefix=SCRATCH_PREFIX) as scratch:
        if backend == "sqlite":
            yield str(Path(scratch) / "queue")
        else:
            admin = pg.admin_url()
            assert admin, "FELTDB_TEST_PG is not set"
            with pg.fresh_database(admin, label) as url:
                yield url


def drain(peer: str, procs: int, n: int, python: Path, under: Path = BENCH) -> dict[str, Any]:
    """One drain of ``n`` tasks by ``procs`` processes of ``peer``, with the peers' ``python``;
    a SQLite queue is a file made under ``under``.
    """
    module, backend = PEERS[peer]
    env = peer_env()

    def call(*args: str) -> str:
        done = subprocess.run(
            [str(python), "-m", module, *args],
            env=env,
            cwd=BENCH,
            capture_output=True,
            text=True,
        )
        if done.returncode != 0:
            raise RuntimeError(f"{peer} {args[0]} failed:\n{done.stderr[-3000:]}")
        return done.stdout

    with target_for(backend, f"{peer}_{procs}".replace("-", "_"), under) as target:
        call("prepare", "--target", target, "--n", str(n))
        commands = [
            [str(python), "-m", module, "work", "--target", target, "--index", str(i)]
            for i in range(procs)
        ]
        run = run_fleet(commands, env=env, cwd=BENCH)
        finished = int(call("count", "--target", target).strip().splitlines()[-1])
    figures = asdict(run)
    figures["finished"] = finished
    figures["duplicates"] = max(0, run.done - n)
    if finished < n:
        raise RuntimeError(f"{peer}: {finished} of {n} recorded as finished ({run.done} ran)")
    return figures
