"""How long the ``feltdb`` command takes to start and answer: ``feltdb --version``,
``feltdb --help``, and ``feltdb ls`` on a store file of 10 workloads. Wall seconds per run,
median of N runs, each a new process (so import time is counted, as a person waits for it).

Usage: python bench/bench_cli_startup.py [--runs 11] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

FELTDB = [sys.executable, "-c", "from feltdb.cli import main; main()"]


def median_s(command: list[str], runs: int) -> float:
    timings = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run(command, check=True, capture_output=True)
        timings.append(time.perf_counter() - started)
    return round(statistics.median(timings), 3)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=11)
    parser.add_argument("--out", default=None, help="also write the figures as JSON here")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as home:
        db = str(Path(home) / "work.db")
        for n in range(10):
            subprocess.run(
                [*FELTDB, "submit", "send", "--key", f"k{n}", "--db", db],
                check=True,
                capture_output=True,
            )
        figures = {
            "python_s": median_s([sys.executable, "-c", "pass"], args.runs),
            "version_s": median_s([*FELTDB, "--version"], args.runs),
            "help_s": median_s([*FELTDB, "--help"], args.runs),
            "ls_db_s": median_s([*FELTDB, "ls", "--db", db], args.runs),
            "import_feltdb_s": median_s([sys.executable, "-c", "import feltdb"], args.runs),
        }
    print(json.dumps(figures, indent=2))
    if args.out:
        Path(args.out).write_text(json.dumps(figures, indent=2) + "\n")


if __name__ == "__main__":
    main()
