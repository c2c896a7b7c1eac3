"""docs/benchmarks.md's "What bounds the missed targets": what each target asks of a
workload's CPU, and the figures of this run that say what stands in the way (the peer
targets' CPU budgets, the same SQLite drains on a RAM disk, the parts of an admission).
"""

from __future__ import annotations

from typing import Any

from harness.summary import rate, table

NAMES = {"sqlite": "SQLite", "postgres": "PostgreSQL"}
LABELS = {
    "feltdb-batches": "feltdb batch calls",
    "feltdb-worker": "feltdb worker (embedded)",
    "huey": "huey",
}
PEER_TARGETS = (("sqlite", "huey", 2.0), ("postgres", "pgqueuer", 1.5))
"""Each backend's peer and the ratio the goals ask of feltdb against it (2 processes)."""

ADMIT_TARGET = 25_000
"""The ``admit_many`` rate the goals ask for, per second."""


def bounds_section(results: dict[str, Any], drains: dict[Any, Any]) -> list[str]:
    """The section: the peer targets' CPU budgets, then the RAM disk and the admission."""
    lines = _budgets(results, drains)
    lines += _ram_disk(results, drains)
    lines += _admission(results)
    if not lines:
        return []
    return ["## What bounds the missed targets", "", *lines]


def _budgets(results: dict[str, Any], drains: dict[Any, Any]) -> list[str]:
    """What the peer targets ask of each workload's CPU, against what it took in this run."""
    cores = results.get("meta", {}).get("machine", {}).get("cpu_count")
    rows: list[list[str]] = []
    for backend, peer, target in PEER_TARGETS:
        theirs = rate(drains, backend, peer, 2)
        if theirs is None or not cores:
            continue
        needed = target * theirs
        budget = cores * 1e6 / needed
        for system in ("feltdb-batches", "feltdb-worker"):
            ours = drains.get((backend, system, 2))
            if ours is None:
                continue
            machine, own = ours["machine_cpu_us"], ours["cpu_us"]
            rows.append(
                [
                    f"{NAMES[backend]}, {LABELS[system]}",
                    f"{target:g} × {theirs:,.0f} = {needed:,.0f}/s",
                    f"{budget:,.0f} µs",
                    f"{machine:,.0f} µs",
                    f"{own:,.0f} µs",
                    f"{max(machine - own, 0):,.0f} µs",
                ]
            )
    if not rows:
        return []
    return [
        "### The peer targets: CPU per workload",
        "",
        f"A rate of R workloads a second on {cores} cores leaves at most {cores} × 10⁶ / R "
        "µs of the machine's CPU per workload, and that only if every core is busy all the "
        "time. Beside it, what each workload took in this run at P=2 (machine: every "
        "process, /proc/stat), of which feltdb's processes (user + system) and the rest "
        "(on PostgreSQL, the server's backends and its WAL writer). Where *the rest* alone "
        "passes the budget, no change on feltdb's side of the connection can meet the "
        "target while each change of a workload writes its document and a log entry.",
        "",
        *table(
            [
                "backend, system",
                "target rate",
                "CPU budget per workload",
                "machine per workload",
                "feltdb's processes",
                "the rest",
            ],
            rows,
        ),
    ]


def _ram_disk(results: dict[str, Any], drains: dict[Any, Any]) -> list[str]:
    """The SQLite drains at P=2 again with their files on a RAM disk, beside the disk's."""
    again = {row["system"]: row for row in results.get("ram_drain", [])}
    huey = rate(drains, "sqlite", "huey", 2)
    cores = results.get("meta", {}).get("machine", {}).get("cpu_count")
    if not again or huey is None or not cores:
        return []
    rows: list[list[str]] = []
    for system, row in again.items():
        on_disk = rate(drains, "sqlite", system, 2)
        rows.append(
            [
                LABELS.get(system, system),
                f"{on_disk:,.0f}/s" if on_disk is not None else "—",
                f"{row['per_s']:,.0f}/s",
                f"{row['per_s'] / huey:.2f}×",
                f"{row['machine_cpu_us_per_workload']:,.0f} µs",
                f"{row['machine_cpu_s'] / (cores * row['seconds']):.0%}",
            ]
        )
    return [
        "### SQLite without the disk",
        "",
        "The same SQLite drains at P=2, once more with their files on a RAM disk "
        "(/dev/shm), where no commit waits for the disk: what is left is each process's CPU "
        "and SQLite's one writer at a time (one round, beside the disk's medians). Each "
        f"ratio is to huey's rate *on the disk* ({huey:,.0f}/s, the target's base: 2× is "
        f"{2 * huey:,.0f}/s). Where a RAM-disk rate is below 2× huey on the disk, no change "
        "to when or how often feltdb syncs meets the target alone: it needs less CPU, or "
        "less of it spent holding the write lock. (Writing fewer bytes would help on both "
        "counts, which this does not measure.) Cores far from busy mean the processes wait: "
        "on the write lock, or in SQLite's busy handler's sleeps.",
        "",
        *table(
            [
                "system (P=2)",
                "on the disk",
                "on a RAM disk",
                "RAM disk / huey on the disk",
                "machine CPU per workload (RAM disk)",
                "cores busy (RAM disk)",
            ],
            rows,
        ),
    ]


def _admission(results: dict[str, Any]) -> list[str]:
    """What an ``admit_many`` admission costs by part, against the target's budget."""
    parts = results.get("admit_parts")
    if not parts:
        return []
    budget = 1e6 / ADMIT_TARGET
    floor = parts["statements_us"] + parts["checks_us"] + parts["record_us"]
    rows = [
        ["`admit_many(1000)`, the whole call (wall)", f"{parts['admit_many_us']:.1f} µs"],
        ["… of which the cyclic garbage collector", f"{parts['gc_us']:.1f} µs"],
        [
            "the store's two `INSERT`s alone: the run's rows and log entries written again "
            "by `executemany`, 1,000 a transaction, no Python per row (wall)",
            f"{parts['statements_us']:.1f} µs",
        ],
        ["checking the request (`validate_admission`, CPU)", f"{parts['checks_us']:.1f} µs"],
        ["building the workload and its stored text (CPU)", f"{parts['record_us']:.1f} µs"],
        ["the three parts above together", f"{floor:.1f} µs"],
    ]
    return [
        "### `admit_many`",
        "",
        f"{ADMIT_TARGET:,} admissions a second leave {budget:.0f} µs for each, one process. "
        "Measured in this run, on the same disk, with "
        f"{parts['workloads']:,} requests: what one admission costs, and three parts it "
        "cannot do without: the row and the log entry it writes (the store's schema, its "
        "indexes and full sync), the checks on what enters, and the record it stores. "
        f"Done one after another by one thread, as `admit_many` does them, those three "
        f"alone allow at most {1e6 / floor:,.0f} admissions a second; the rest of the call "
        "(ids, hashes, the audit record, the commit's plan) comes on top. The statements' "
        "figure is a floor: the store computes each revision (one index seek) where the "
        "rewrite passes it as a literal.",
        "",
        *table(["per admission", "µs"], rows),
    ]
