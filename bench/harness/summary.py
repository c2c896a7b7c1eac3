"""Medians over rounds, shared by render.py and plot.py (standard library only)."""

from __future__ import annotations

import statistics
from typing import Any

FELTDB_SYSTEMS = ("feltdb-store", "feltdb-batches", "feltdb-worker", "feltdb-http")
LABELS = {
    "feltdb-store": "feltdb store loop",
    "feltdb-batches": "feltdb batch calls",
    "feltdb-worker": "feltdb worker (embedded)",
    "feltdb-http": "feltdb worker over HTTP",
}

Key = tuple[str, str, int]


def drains(results: dict[str, Any]) -> dict[Key, dict[str, Any]]:
    """(backend, system, procs) → the median figures of its rounds."""
    grouped: dict[Key, list[dict[str, Any]]] = {}
    for row in results.get("drain", []):
        grouped.setdefault((row["backend"], row["system"], row["procs"]), []).append(row)
    summary = {}
    for key, rows in grouped.items():
        rates = sorted(r["per_s"] for r in rows)
        summary[key] = {
            "per_s": statistics.median(rates),
            "rates": rates,
            "rounds": len(rows),
            "cpu_us": statistics.median(r["cpu_us_per_workload"] for r in rows),
            "machine_cpu_us": statistics.median(r["machine_cpu_us_per_workload"] for r in rows),
            "worker_sys_us": (
                statistics.median(r["worker_sys_us_per_workload"] for r in rows)
                if all("worker_sys_us_per_workload" in r for r in rows)
                else None
            ),
            "server_peak_rss_kb": max(r.get("server_peak_rss_kb", 0) for r in rows),
            "duplicates": max(r.get("duplicates", 0) for r in rows),
            "worker_options": rows[0].get("worker_options"),
        }
    return summary


def systems(summary: dict[Key, Any], backend: str) -> list[str]:
    seen = {system for (b, system, _) in summary if b == backend}
    ordered = [s for s in FELTDB_SYSTEMS if s in seen]
    return ordered + sorted(seen - set(FELTDB_SYSTEMS))


def procs(summary: dict[Key, Any], backend: str) -> list[int]:
    return sorted({p for (b, _, p) in summary if b == backend})


def label(system: str) -> str:
    return LABELS.get(system, system)


def table(header: list[str], rows: list[list[str]]) -> list[str]:
    """A Markdown table, and the blank line after it."""
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join("---" for _ in header) + " |"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return [*lines, ""]


def rate(drains: dict[Key, dict[str, Any]], backend: str, system: str, p: int) -> float | None:
    """The median workloads per second of one drain, if it ran."""
    figures = drains.get((backend, system, p))
    return None if figures is None else float(figures["per_s"])


def ratio(a: float | None, b: float | None) -> float | None:
    """``a / b``, or ``None`` when either is missing (or ``b`` is 0)."""
    return None if a is None or b is None or b == 0 else a / b
