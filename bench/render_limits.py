"""The limits and fairness section of docs/benchmarks.md, from ``bench_limits.py``'s figures
(``results["limits"]``, written by ``run_all.py``)."""

from __future__ import annotations

from typing import Any


def limits_section(results: dict[str, Any]) -> list[str]:
    """The drains with limits and fairness beside the unlimited one, and the time to a small
    key's first claim behind a backlog; nothing when the run did not measure them.
    """
    figures = results.get("limits")
    if not figures:
        return []
    runs: dict[str, Any] = figures["runs"]
    lines = [
        "## Limits and fairness",
        "",
        f"`bench/bench_limits.py` ({figures.get('date', 'date not recorded')}): one thread "
        "drains "
        f"{figures['workloads']:,} workloads (a claim, start, complete: three commits each), "
        f"median of {figures.get('rounds', '?')} rounds alternating the shapes. With one "
        "worker no key fills: this is what taking slots and turns costs a claim.",
        "",
        "| drain | " + " | ".join(runs) + " |",
        "| --- |" + " --- |" * len(runs),
    ]
    shapes = list(next(iter(runs.values()))["per_second"])
    for shape in shapes:
        cells = [
            f"{run['per_second'][shape]:,}/s ({run['relative_to_no_key'][shape]:.2f}×)"
            for run in runs.values()
        ]
        lines.append(f"| {shape} | " + " | ".join(cells) + " |")
    lines += [
        "",
        f"Time to first claim: {figures['workloads']:,} workloads of one key (or tenant) are "
        "ready, then ten of another; one worker drains. How many claims, and how long, until "
        "the first of the ten is claimed:",
        "",
        "| | " + " | ".join(runs) + " |",
        "| --- |" + " --- |" * len(runs),
    ]
    for name in next(iter(runs.values()))["first_claim"]:
        cells = [
            f"{run['first_claim'][name]['claims']:,.0f} claims, "
            f"{run['first_claim'][name]['ms']:,.1f} ms"
            for run in runs.values()
        ]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return [*lines, ""]
