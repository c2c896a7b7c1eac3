"""Render docs/benchmarks.md from bench/results/all.json (no measuring: re-run it freely).

Usage: python bench/render.py [--results R] [--doc D]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import render_bounds
import render_goals
import render_limits
from harness import summary
from harness.summary import rate, ratio, table

BENCH = Path(__file__).resolve().parent

BACKEND_TITLES = {
    "sqlite": "SQLite (one file, WAL, `synchronous=FULL`)",
    "postgres": "PostgreSQL (`fsync=on`, `synchronous_commit=on`)",
}
PEER_NOTES = {
    "huey": '`SqliteHuey(journal_mode="wal", fsync=True)`: huey defaults to WAL but leaves '
    "`synchronous` at SQLite's default unless `fsync` is given; `fsync=True` runs `PRAGMA "
    "synchronous=2` (FULL) on each connection (read in `huey/storage.py`, "
    "`SqliteStorage._create_connection`). The task returns a value, which huey stores (its "
    "result row: the record that the task finished). Each process runs huey's own "
    "`huey.dequeue()` + `huey.execute(task)` until the queue is empty (a consumer's worker "
    "loop without its idle polling).",
    "persist-queue": "`SQLiteAckQueue`, one file shared by the processes; persist-queue only "
    "sets `journal_mode=WAL`, so the driver's subclass adds `PRAGMA synchronous=FULL` to each "
    "connection it opens. Each item is `get` (commits its `unack` mark) then `ack`ed (commits "
    "`acked`). persist-queue is thread-safe, not process-safe: `get` selects and marks in two "
    "statements, so two processes can take the same item (counted as duplicates below).",
    "pgqueuer": "`QueueManager.run(mode=drain)` per process on asyncpg, schema installed with "
    "its default durability (`durable`, all tables LOGGED). Defaults kept: it dequeues "
    "`batch_size=10` jobs per query and buffers its completion log, writing it in batches.",
    "procrastinate": "`app.run_worker_async(wait=False, concurrency=1)` per process "
    "(psycopg 3 connector), async no-op task; finished jobs stay as `succeeded` rows.",
}


def fmt_rate(value: float | None) -> str:
    return "—" if value is None else f"{value:,.0f}"


def fmt_ratio(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f}×"


def machine_section(meta: dict[str, Any]) -> list[str]:
    m = meta["machine"]
    rows = [
        ["CPU", f"{m['cpu_count']} × {m['cpu_model']}"],
        ["kernel", m["kernel"]],
        ["disk", m["disk"]],
        ["memory", f"{m['memory_gb']} GiB"],
        ["Python", m["python"]],
        ["SQLite", m["sqlite"]],
        ["feltdb commit", f"`{m['feltdb_commit']}`"],
    ]
    if "postgres" in meta:
        p = meta["postgres"]
        rows.append(
            [
                "PostgreSQL",
                f"{p['server_version']} (fsync={p['fsync']}, "
                f"synchronous_commit={p['synchronous_commit']}, "
                f"wal_sync_method={p['wal_sync_method']}"
                + (
                    f", autovacuum={p['autovacuum']}, naptime {p['autovacuum_naptime']})"
                    if "autovacuum" in p
                    else ")"
                ),
            ]
        )
    for name, version in sorted(meta.get("peers", {}).items()):
        rows.append([name, version])
    load = meta.get("load_average_at_start")
    lines = [
        "## Machine and versions",
        "",
        f"Run of {meta['started']}: N = {meta['workloads']:,} workloads per drain, "
        f"{meta['rounds']} round(s) (figures are medians), worker processes "
        f"{meta['procs']}, {meta.get('seconds', 0) / 60:.1f} minutes "
        f"(`{' '.join(['bench/run_all.py', *meta.get('argv', [])])}`).",
        "",
    ]
    if load:
        lines += [
            f"Load average at start: {', '.join(f'{x:.2f}' for x in load)} "
            "(other work on the machine shows here, and in the spread between rounds).",
            "",
        ]
    return lines + table(["what", "value"], rows)


def admit_section(results: dict[str, Any]) -> list[str]:
    admits = results.get("admit", {})
    if not admits:
        return []
    kinds = list(next(iter(admits.values())).keys())
    rows = [
        [BACKEND_TITLES[b].split(" (")[0], *(fmt_rate(rates[k]["per_s"]) for k in kinds)]
        for b, rates in admits.items()
    ]
    header = ["backend", *(f"`{k}`/s" for k in kinds)]
    return [
        "## (a) Admission",
        "",
        "Workloads admitted per second, one process: `store.admit` one at a time (one fsync'd "
        "commit each; at most 2,000 timed) against `store.admit_many` in batches of 100 and "
        "1,000 (one commit per batch).",
        "",
        *table(header, rows),
    ]


def drain_section(results: dict[str, Any], drains: dict[Any, Any]) -> list[str]:
    n = results["meta"]["workloads"]
    http_n = results["meta"].get("http_workloads", n)
    lines = [
        "## (b, e) Draining a backlog",
        "",
        f"{n:,} pre-admitted no-op workloads (tasks), drained through their whole lifecycle by "
        "P worker processes; the clock runs from one start signal (every process already "
        "imported and connected) until the last process finds nothing left, and the run is "
        "checked afterwards: every workload SUCCEEDED (every peer task recorded as finished).",
        "",
        "- **feltdb store loop**: `claim_next` → `start` → `complete` on `WorkloadStore` (three "
        "guarded commits per workload): the library's cost, and what the peers are compared to.",
        "- **feltdb worker (embedded)**: `feltdb.worker.Worker(store=WorkloadStore.open(…))` "
        "with a no-op handler, `worker.drain()`.",
        "- **feltdb worker over HTTP**: the same runtime as `Worker(url, token=…)` against a "
        "real `feltdb serve` process (`--log-level warning`) on the same store"
        + (
            f" ({http_n:,} workloads per HTTP drain, set by `--http-workloads`)."
            if http_n != n
            else "."
        ),
        "",
        worker_options_line(drains),
        "",
        "![throughput](benchmarks/throughput.png)",
        "",
    ]
    for backend in ("sqlite", "postgres"):
        systems = summary.systems(drains, backend)
        if not systems:
            continue
        counts = summary.procs(drains, backend)
        rows = []
        for system in systems:
            cells = []
            for p in counts:
                figures = drains.get((backend, system, p))
                if figures is None:
                    cells.append("—")
                    continue
                spread = ""
                if figures["rounds"] > 1:
                    spread = f" ({figures['rates'][0]:,.0f}–{figures['rates'][-1]:,.0f})"
                dup = f", {figures['duplicates']} dup." if figures["duplicates"] else ""
                cells.append(f"{figures['per_s']:,.0f}{spread}{dup}")
            rows.append([summary.label(system), *cells])
        lines += [f"### {BACKEND_TITLES[backend]}: workloads per second", ""]
        lines += table(["system", *(f"P={p}" for p in counts)], rows)
        lines += ratio_tables(drains, backend, counts)
    return lines


def worker_options_line(drains: dict[Any, Any]) -> str:
    used = [
        f["worker_options"]
        for (_, system, _), f in drains.items()
        if system in ("feltdb-worker", "feltdb-http") and f["worker_options"] is not None
    ]
    if not used:
        return "The worker runtime was not measured."
    if not any(used):
        return (
            "The worker runtime ran with its defaults: each claim asks for as many workloads "
            "as slots are free and starts them in the same commit, heartbeats renew every "
            "held lease in one call, and completions of attempts finishing together share "
            "one call and one commit (`completion_batch=100`, `completion_wait_ms=20`)."
        )
    shown = ", ".join(sorted({f"`{k}={v!r}`" for options in used for k, v in options.items()}))
    return f"The worker runtime ran with these options: {shown}."


def ratio_tables(drains: dict[Any, Any], backend: str, counts: list[int]) -> list[str]:
    peers = [s for s in summary.systems(drains, backend) if s not in summary.FELTDB_SYSTEMS]
    if not peers:
        return []
    rows = []
    for ours in ("feltdb-store", "feltdb-batches", "feltdb-worker"):
        for peer in peers:
            cells = [
                fmt_ratio(ratio(rate(drains, backend, ours, p), rate(drains, backend, peer, p)))
                for p in counts
            ]
            rows.append([f"{summary.label(ours)} / {peer}", *cells])
    return [
        "Ratio feltdb / peer (above 1: feltdb faster):",
        "",
        *table(["ratio", *(f"P={p}" for p in counts)], rows),
    ]


def cpu_section(results: dict[str, Any], drains: dict[Any, Any]) -> list[str]:
    rows = []
    for backend in ("sqlite", "postgres"):
        for system in summary.systems(drains, backend):
            for p in summary.procs(drains, backend):
                f = drains.get((backend, system, p))
                if f is None:
                    continue
                rss = (
                    f"{f['server_peak_rss_kb'] / 1024:,.0f} MiB" if f["server_peak_rss_kb"] else ""
                )
                rows.append(
                    [
                        backend,
                        summary.label(system),
                        str(p),
                        f"{f['cpu_us']:,.0f}",
                        "—" if f["worker_sys_us"] is None else f"{f['worker_sys_us']:,.0f}",
                        f"{f['machine_cpu_us']:,.0f}",
                        rss,
                    ]
                )
    floors: dict[str, list[float]] = {}
    for row in results.get("drain", []):
        if row.get("healthz_ms"):
            floors.setdefault(row["backend"], []).append(row["healthz_ms"])
    floor = []
    if floors:
        each = ", ".join(
            f"{statistics.median(v):.1f} ms serving {b}" for b, v in sorted(floors.items())
        )
        floor = [
            "Over HTTP every request pays at least the server's round trip: `GET /healthz` "
            f"took {each} (median, one kept-alive connection, measured before each HTTP drain).",
            "",
        ]
    return [
        "## (d) CPU per workload and the server's memory",
        "",
        "CPU microseconds per workload: user + system time of the worker processes over the "
        "drain (each reports its own `getrusage` from the start signal to its end), plus, over "
        "HTTP, the `feltdb serve` process's (from /proc) over the same interval; the workers' "
        "system (kernel) share is shown apart, since fsync'd commits on a virtual disk cost "
        "kernel time. *Machine* is "
        "every process's CPU over the interval (/proc/stat), so it includes PostgreSQL's "
        "backends, and anything else running then. Peak RSS is the server's `VmHWM` after an "
        "HTTP drain.",
        "",
        *floor,
        *table(
            [
                "backend",
                "system",
                "P",
                "µs CPU/workload",
                "of which workers' system µs",
                "machine µs/workload",
                "server peak RSS",
            ],
            rows,
        ),
    ]


def claim_section(results: dict[str, Any]) -> list[str]:
    rows = [
        [
            r["backend"],
            f"{r['ready_backlog']:,}",
            f"{r['median_ms']:.2f}",
            f"{r['p95_ms']:.2f}",
            str(r["claims"]),
            f"{r['load_seconds']:.0f}",
            "" if r.get("store_mb") is None else f"{r['store_mb']:,.0f}",
        ]
        for r in results.get("claim_latency", [])
    ]
    if not rows:
        return []
    return [
        "## (c) `claim_next` latency against the ready backlog",
        "",
        "One process; each call selects from the scheduling index and commits the claim. The "
        "backlog is bulk-loaded through the storage protocol (20,000 guarded mutations per "
        "commit, as `bench/bench_claim_next.py` does), because a million single fsync'd "
        "admissions would take hours; each document is a real admitted workload.",
        "",
        "![claim latency](benchmarks/claim_latency.png)",
        "",
        *table(
            ["backend", "ready backlog", "median ms", "p95 ms", "claims", "load s", "store MB"],
            rows,
        ),
    ]


def nearest(counts: list[int], wanted: int) -> int | None:
    return min(counts, key=lambda p: (abs(p - wanted), p)) if counts else None


def wakeups_section(results: dict[str, Any]) -> list[str]:
    measured = results.get("wakeups")
    if not measured:
        return []
    rates = measured["median_admissions_per_s"]
    on, off = rates["hints on"], rates["hints off"]
    latency = measured["hint_latency_ms"]
    return [
        "## Wake-up hints (PostgreSQL `NOTIFY`)",
        "",
        "`bench/bench_wakeups.py`: what announcing the commits that may make work claimable "
        f"costs the committing side ({measured['threads']} threads admitting "
        f"{measured['workloads']:,} workloads through one store, medians of alternating "
        "rounds), and how soon another process's subscriber hears an admission.",
        "",
        *table(
            ["", "admissions/s"],
            [
                ["hints on", fmt_rate(on)],
                ["hints off", fmt_rate(off)],
                ["ratio on / off", fmt_ratio(ratio(on, off))],
            ],
        ),
        f"Hint latency (admission returned → subscriber called, {latency['samples']} samples, "
        f"{latency['lost']} lost): median {latency['median']:.2f} ms, "
        f"p95 {latency['p95']:.2f} ms.",
        "",
    ]


def notes_section(results: dict[str, Any]) -> list[str]:
    lines = ["## How each peer was run, and its durability", ""]
    lines += [f"- **{name}**: {text}" for name, text in PEER_NOTES.items()]
    lines += [
        "- **feltdb**: SQLite in WAL with `synchronous=FULL` (set by the store on every "
        "connection); PostgreSQL at the server's `synchronous_commit=on`, `fsync=on`.",
        "",
        "Peers' backlogs are loaded in bulk (one transaction), untimed, as feltdb's are "
        "(`admit_many` in batches of 1,000). Every PostgreSQL scenario gets a fresh database "
        "(created, then dropped); every SQLite scenario a fresh file.",
        "",
        "## Limitations",
        "",
        "- Two cores: with P processes plus (over HTTP) a server, plus PostgreSQL, the "
        "processes share the cores; figures above P=2 measure contention as much as scaling.",
        "- The machine is shared with whatever else runs on it (the load average above); "
        "rounds alternate systems so that drift falls on each, and the spread is shown.",
        "- The peers do less per task than feltdb does per workload (no leases, fencing "
        "tokens, audit or idempotency); the ratios compare durable work queues as each ships, "
        "not equal work.",
        "",
    ]
    return lines


def render(results: dict[str, Any]) -> str:
    drains = summary.drains(results)
    lines = [
        "# Benchmarks",
        "",
        "Written by `make bench` (`bench/run_all.py`, then `bench/render.py` from "
        "`bench/results/all.json`); `make bench-quick` runs a small version. Do not edit by "
        "hand: re-render with `python bench/render.py`.",
        "",
    ]
    lines += render_goals.goals_section(results, drains)
    lines += render_bounds.bounds_section(results, drains)
    lines += machine_section(results["meta"])
    lines += admit_section(results)
    lines += drain_section(results, drains)
    lines += cpu_section(results, drains)
    lines += claim_section(results)
    lines += render_goals.unclaimable_section(results)
    lines += render_goals.profile_section(results)
    lines += render_goals.startup_section(results)
    lines += wakeups_section(results)
    lines += render_limits.limits_section(results)
    lines += notes_section(results)
    return "\n".join(lines).rstrip() + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", default=str(BENCH / "results" / "all.json"))
    parser.add_argument("--doc", default=str(BENCH.parent / "docs" / "benchmarks.md"))
    options = parser.parse_args()
    results = json.loads(Path(options.results).read_text())
    Path(options.doc).write_text(render(results))
    print(f"wrote {options.doc}")


if __name__ == "__main__":
    main()
