"""Plots of bench/results/all.json (run with the peers' python, which has matplotlib):
throughput against worker processes (one panel per backend) and claim_next latency
against the ready backlog. Writes docs/benchmarks/throughput.png and claim_latency.png.

Usage: bench/.peers-venv/bin/python bench/plot.py [--results R] [--out-dir D]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from harness import summary

BENCH = Path(__file__).resolve().parent
TITLES = {
    "sqlite": "SQLite (WAL, synchronous=FULL)",
    "postgres": "PostgreSQL (synchronous_commit=on)",
}
STYLES = {"feltdb-store": "o-", "feltdb-batches": "d-", "feltdb-worker": "s-", "feltdb-http": "^-"}


def throughput(results: dict, out: Path) -> Path:  # type: ignore[type-arg]
    drains = summary.drains(results)
    backends = [b for b in ("sqlite", "postgres") if summary.systems(drains, b)]
    figure, axes = plt.subplots(1, len(backends), figsize=(6.2 * len(backends), 4.6), squeeze=False)
    for axis, backend in zip(axes[0], backends, strict=True):
        for system in summary.systems(drains, backend):
            points = [
                (p, drains[(backend, system, p)])
                for p in summary.procs(drains, backend)
                if (backend, system, p) in drains
            ]
            xs = [p for p, _ in points]
            axis.plot(
                xs,
                [f["per_s"] for _, f in points],
                STYLES.get(system, "x--"),
                label=summary.label(system),
            )
            for x, (_, f) in zip(xs, points, strict=True):
                axis.vlines(x, min(f["rates"]), max(f["rates"]), alpha=0.3)
        axis.set_title(TITLES[backend])
        axis.set_xlabel("worker processes")
        axis.set_ylabel("workloads (tasks) per second")
        axis.set_xticks(summary.procs(drains, backend))
        axis.set_ylim(bottom=0)
        axis.grid(alpha=0.3)
        axis.legend(fontsize=8)
    n = results["meta"]["workloads"]
    figure.suptitle(f"Drain of {n:,} no-op workloads, median of rounds (bars: range)")
    figure.tight_layout()
    path = out / "throughput.png"
    figure.savefig(path, dpi=110)
    return path


def claim_latency(results: dict, out: Path) -> Path:  # type: ignore[type-arg]
    figure, axis = plt.subplots(figsize=(6.2, 4.4))
    for backend in ("sqlite", "postgres"):
        rows = sorted(
            (r for r in results.get("claim_latency", []) if r["backend"] == backend),
            key=lambda r: r["ready_backlog"],
        )
        if not rows:
            continue
        xs = [r["ready_backlog"] for r in rows]
        axis.plot(xs, [r["median_ms"] for r in rows], "o-", label=f"{backend} median")
        axis.plot(xs, [r["p95_ms"] for r in rows], "o:", label=f"{backend} p95")
    axis.set_xscale("log")
    axis.set_xlabel("ready workloads in the backlog")
    axis.set_ylabel("claim_next latency (ms)")
    axis.set_ylim(bottom=0)
    axis.set_title("claim_next latency against backlog")
    axis.grid(alpha=0.3, which="both")
    axis.legend(fontsize=8)
    figure.tight_layout()
    path = out / "claim_latency.png"
    figure.savefig(path, dpi=110)
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", default=str(BENCH / "results" / "all.json"))
    parser.add_argument("--out-dir", default=str(BENCH.parent / "docs" / "benchmarks"))
    options = parser.parse_args()
    results = json.loads(Path(options.results).read_text())
    out = Path(options.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for path in (throughput(results, out), claim_latency(results, out)):
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
