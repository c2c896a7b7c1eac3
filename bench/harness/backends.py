"""Where a benchmark's stores live: a fresh SQLite file in a scratch folder on disk, and,
when asked and a server is there (``scripts/with-postgres``), a fresh PostgreSQL database;
and the JSON a benchmark writes of its runs (:func:`write_runs`).
"""

from __future__ import annotations

import json
import platform
import sys
import tempfile
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from harness import pg

Measure = Callable[[Callable[[str], str]], dict[str, Any]]
"""Measures on the stores a target maker (a name in, a new store's target out) makes."""


def on_backends(measure: Measure, *, postgres: bool, label: str) -> dict[str, Any]:
    """``measure`` on SQLite files, then on PostgreSQL databases (``postgres``, when a
    server is there), by backend; every store made is removed at the end.
    """
    runs: dict[str, Any] = {}
    with ExitStack() as stack:
        scratch = Path(stack.enter_context(tempfile.TemporaryDirectory(dir="/var/tmp")))
        print("sqlite", file=sys.stderr)
        runs["sqlite"] = measure(lambda name: str(scratch / f"{name}.db"))
        admin = pg.admin_url()
        if postgres and admin is not None:
            print("postgres", file=sys.stderr)

            def database(name: str) -> str:
                return stack.enter_context(pg.fresh_database(admin, f"{label}_{name}"))

            runs["postgres"] = measure(database)
    return runs


def write_runs(out: Path, benchmark: str, runs: dict[str, Any], **figures: Any) -> None:
    """Write to ``out`` (and print) a benchmark's result: what it measures, the machine,
    its ``figures`` (sizes, rounds…) and its ``runs`` by backend.
    """
    machine = f"{platform.machine()}, CPython {platform.python_version()}"
    result = {"benchmark": benchmark, "machine": machine, **figures, "runs": runs}
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
