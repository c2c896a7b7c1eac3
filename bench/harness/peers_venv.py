"""The peers' virtual environment, ``bench/.peers-venv``: created with ``python3 -m venv``
and filled from ``bench/peers-requirements.txt`` (pinned versions from PyPI) when missing
or when the requirements changed since it was made.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1]
VENV = BENCH / ".peers-venv"
REQUIREMENTS = BENCH / "peers-requirements.txt"
PYTHON = VENV / "bin" / "python"
MARKER = VENV / ".requirements.sha256"
DISTRIBUTIONS = (
    "huey",
    "persist-queue",
    "pgqueuer",
    "asyncpg",
    "procrastinate",
    "psycopg",
    "matplotlib",
)


def ensure() -> Path:
    """The peers' python, after creating or updating the environment if needed."""
    digest = hashlib.sha256(REQUIREMENTS.read_bytes()).hexdigest()
    if PYTHON.exists() and MARKER.exists() and MARKER.read_text().strip() == digest:
        return PYTHON
    print(f"peers: installing {REQUIREMENTS.name} into {VENV}", file=sys.stderr, flush=True)
    if not PYTHON.exists():
        shutil.rmtree(VENV, ignore_errors=True)
        python3 = shutil.which("python3") or sys.executable
        subprocess.run([python3, "-m", "venv", str(VENV)], check=True)
    subprocess.run(
        [
            str(PYTHON),
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "-r",
            str(REQUIREMENTS),
        ],
        check=True,
    )
    MARKER.write_text(digest + "\n")
    return PYTHON


def versions() -> dict[str, str]:
    code = (
        "import json, importlib.metadata as m; "
        f"print(json.dumps({{d: m.version(d) for d in {list(DISTRIBUTIONS)!r}}}))"
    )
    out = subprocess.run([str(PYTHON), "-c", code], check=True, capture_output=True, text=True)
    found: dict[str, str] = json.loads(out.stdout)
    return found
