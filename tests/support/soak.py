"""The two sizes of the reliability suites, and where their figures go.

``make test`` runs every reliability suite at its bounded size: enough rounds to fail on a
real defect, few enough to keep the whole suite within its time. ``make soak`` runs the same
tests with ``FELTDB_SOAK=1`` at their long size, and ``FELTDB_FIGURES`` naming a JSON-lines
file: each suite appends one record per case to it (:func:`record`), and
``tests/reliability/report.py`` turns the file into the figures of ``docs/reliability.md``.

Both variables are read once, at import: the autouse fixture of ``tests/conftest.py``
removes every ``FELTDB_*`` variable from the tests' environment.
"""

from __future__ import annotations

import json
import os
import platform
import time
from pathlib import Path
from typing import Any

SOAK = os.environ.get("FELTDB_SOAK", "") not in ("", "0")
"""Whether this is the long run (``make soak``)."""

FIGURES = Path(os.environ["FELTDB_FIGURES"]) if os.environ.get("FELTDB_FIGURES") else None
"""The JSON-lines file the figures are appended to; ``None``: figures are not kept."""


def scaled(bounded: int, soak: int) -> int:
    """``soak`` in the long run, ``bounded`` otherwise."""
    return soak if SOAK else bounded


def record(suite: str, case: str, backend: str, **figures: Any) -> None:
    """Append one case's figures to :data:`FIGURES` (nothing if it is not set).

    ``figures`` are the case's counts, named as ``docs/reliability.md`` states them:
    ``attempted``, ``acknowledged``, ``lost``, ``duplicated``, ``illegal``,
    ``recovery_s``... and ``command``, the command that reproduces it.
    """
    if FIGURES is None:
        return
    line = {
        "suite": suite,
        "case": case,
        "backend": backend,
        "soak": SOAK,
        "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": f"{platform.system()} {platform.machine()}, {os.cpu_count()} cores",
        **figures,
    }
    FIGURES.parent.mkdir(parents=True, exist_ok=True)
    with FIGURES.open("a", encoding="utf-8") as out:
        out.write(json.dumps(line, sort_keys=True) + "\n")
