"""The benchmark suite behind ``make bench``: feltdb against its peers, in one run.

Measures, on embedded SQLite (WAL, synchronous=FULL) and PostgreSQL (synchronous_commit=on):

  (a) admission: ``store.admit`` one at a time against ``store.admit_many`` (100, 1,000);
  (b) draining N pre-admitted no-op workloads (claim, start, complete) with P worker
      processes: feltdb's store loop (claim_next → start → complete on WorkloadStore),
      its worker runtime embedded (Worker(store=…)), and the worker runtime over HTTP
      against a real ``feltdb serve`` process;
  (c) claim_next latency (median, p95) at 1,000 / 100,000 / 1,000,000 ready workloads;
  (d) CPU per workload (worker processes + the server) and the server's peak RSS;
  (e) peers draining the same N with the same P and durability: huey (SqliteHuey) and
      persist-queue (SQLiteAckQueue) on SQLite, pgqueuer and procrastinate on PostgreSQL,
      installed into bench/.peers-venv from bench/peers-requirements.txt;
  (f) plots (docs/benchmarks/*.png);
  (g) limits and fairness: drains with a concurrency limit on half the work, fairness
      across 100 keys and 100 tenants, beside the unlimited one (``bench_limits.py``).

Rounds alternate systems (feltdb, peer, feltdb, peer, …) and the report takes each
figure's median over rounds. Results go to --out (JSON) as they come; then
bench/render.py writes docs/benchmarks.md and bench/plot.py the PNGs from that file.

Without FELTDB_TEST_PG (and without --skip-postgres) the driver re-runs itself under
scripts/with-postgres, which starts a throwaway PostgreSQL cluster.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from feltdb_runs import admit, claim_latency, drains
from harness import machine, peer_drains, peers_venv, pg, scratch
from harness.summary import FELTDB_SYSTEMS

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent

SIZES = (1_000, 100_000, 1_000_000)


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog="\n\n".join(__doc__.split("\n\n")[1:]),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--workloads",
        type=int,
        default=20_000,
        help="N, the backlog each drain empties (default 20,000)",
    )
    parser.add_argument(
        "--http-workloads",
        type=int,
        default=None,
        help="N of the HTTP drains only (default: --workloads); they are the slowest runs, "
        "so a quick run may shorten them",
    )
    parser.add_argument(
        "--rounds",
        type=int,
        default=3,
        help="rounds of every drain; figures are medians (default 3)",
    )
    parser.add_argument(
        "--procs", default="1,2,4", help="worker process counts, comma-separated (default 1,2,4)"
    )
    parser.add_argument("--skip-peers", action="store_true", help="measure feltdb only")
    parser.add_argument("--skip-postgres", action="store_true", help="SQLite only")
    parser.add_argument(
        "--max-backlog",
        type=int,
        default=1_000_000,
        help="largest claim_next backlog (1k/100k/1M; default 1,000,000)",
    )
    parser.add_argument(
        "--claims", type=int, default=200, help="claim_next calls timed per backlog (default 200)"
    )
    parser.add_argument(
        "--claim-backends",
        default="sqlite,postgres",
        help="backends of the claim_next latency runs (default both)",
    )
    parser.add_argument(
        "--concurrency",
        type=int,
        default=32,
        help="handler slots per feltdb worker process (default 32: a claim asks for as "
        "many workloads as slots are free, and completions of attempts finishing together "
        "share one commit)",
    )
    parser.add_argument(
        "--worker-options",
        default="auto",
        help="extra Worker(...) keyword arguments as JSON, e.g. '{\"completion_batch\": 1}', "
        "or 'auto' (default): the Worker's defaults",
    )
    parser.add_argument(
        "--out",
        default=str(BENCH / "results" / "all.json"),
        help="the results file (default bench/results/all.json)",
    )
    parser.add_argument(
        "--doc",
        default=str(ROOT / "docs" / "benchmarks.md"),
        help="the report (default docs/benchmarks.md)",
    )
    parser.add_argument("--no-render", action="store_true", help="write the JSON only")
    return parser.parse_args(argv)


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


def reexec_under_postgres() -> None:
    script = ROOT / "scripts" / "with-postgres"
    log("FELTDB_TEST_PG is not set: starting a throwaway PostgreSQL (scripts/with-postgres)")
    # The test cluster runs without autovacuum (tests/support/pg_cluster.py says why); a
    # queue's table needs it, as every production server has it: dead row versions left
    # by each claim, start and completion would otherwise slow down every later claim.
    os.environ.setdefault("FELTDB_PG_SETTINGS", "autovacuum=on autovacuum_naptime=10s")
    os.execv(str(script), [str(script), sys.executable, str(Path(__file__)), *sys.argv[1:]])


class Run:
    """The results file, rewritten after each figure so a stopped run keeps what it had."""

    def __init__(self, path: Path, meta: dict[str, Any]) -> None:
        self.path = path
        self.data: dict[str, Any] = {"meta": meta, "admit": {}, "drain": [], "claim_latency": []}
        self.save()

    def save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_text(json.dumps(self.data, indent=2) + "\n")


def drain_row(
    backend: str, system: str, procs: int, n: int, attempt: int, figures: dict[str, Any]
) -> dict[str, Any]:
    seconds = figures["seconds"]
    cpu = figures["worker_cpu_s"] + figures["watched_cpu_s"]
    return {
        "backend": backend,
        "system": system,
        "procs": procs,
        "round": attempt,
        "n": n,
        "seconds": seconds,
        "per_s": n / seconds,
        "worker_cpu_s": figures["worker_cpu_s"],
        "server_cpu_s": figures["watched_cpu_s"],
        "machine_cpu_s": figures["machine_cpu_s"],
        "cpu_us_per_workload": cpu / n * 1e6,
        "worker_sys_us_per_workload": figures["worker_sys_s"] / n * 1e6,
        "machine_cpu_us_per_workload": figures["machine_cpu_s"] / n * 1e6,
        "server_peak_rss_kb": figures["watched_peak_rss_kb"],
        "duplicates": figures.get("duplicates", 0),
        "worker_options": figures.get("worker_options"),
        "per_process_done": [p["done"] for p in figures["per_process"]],
        "healthz_ms": figures.get("healthz_ms"),
    }


def interleaved(backend: str, with_peers: bool) -> list[str]:
    """feltdb, peer, feltdb, peer, …: the machine's drift falls on both sides."""
    peers = peer_drains.peers_of(backend) if with_peers else []
    order: list[str] = []
    for n, system in enumerate(FELTDB_SYSTEMS):
        order.append(system)
        if n < len(peers):
            order.append(peers[n])
    return order + peers[len(FELTDB_SYSTEMS) :]


def measure_drains(run: Run, options: argparse.Namespace, backends: list[str]) -> None:
    counts = [int(p) for p in options.procs.split(",")]
    n = options.workloads
    for backend in backends:
        for procs in counts:
            for attempt in range(1, options.rounds + 1):
                for system in interleaved(backend, not options.skip_peers):
                    size = n
                    if system == "feltdb-http" and options.http_workloads:
                        size = options.http_workloads
                    log(f"drain {backend} {system} P={procs} N={size:,} round {attempt} …")
                    if system in FELTDB_SYSTEMS:
                        figures = drains.drain(
                            system,
                            backend,
                            procs,
                            size,
                            options.concurrency,
                            options.worker_options,
                        )
                    else:
                        figures = peer_drains.drain(system, procs, size, peers_venv.PYTHON)
                    row = drain_row(backend, system, procs, size, attempt, figures)
                    run.data["drain"].append(row)
                    run.save()
                    extra = f", {row['duplicates']} duplicates" if row["duplicates"] else ""
                    log(
                        f"  {row['per_s']:,.1f}/s ({row['seconds']:.1f} s, "
                        f"{row['cpu_us_per_workload']:,.0f} µs CPU/workload{extra})"
                    )


RAM_DRAINS = ("feltdb-batches", "huey", "feltdb-worker")
"""What drains SQLite again on a RAM disk, at P=2: where no commit waits for the disk, what
is left is the CPU and the one writer at a time (docs/benchmarks.md, the bounds)."""


def measure_ram_drains(run: Run, options: argparse.Namespace, backends: list[str]) -> None:
    """The SQLite drains of :data:`RAM_DRAINS` at P=2 with their files on a RAM disk, when
    the disk drains ran at P=2 beside the peers and the machine has a RAM disk with room.
    A drain that fails there is logged and left out: the run goes on.
    """
    home = scratch.ram_disk()
    procs = {int(p) for p in options.procs.split(",")}
    if "sqlite" not in backends or options.skip_peers or 2 not in procs or home is None:
        return
    rows = run.data.setdefault("ram_drain", [])
    for system in RAM_DRAINS:
        log(f"drain sqlite {system} P=2 N={options.workloads:,} on a RAM disk …")
        try:
            if system in FELTDB_SYSTEMS:
                figures = drains.drain(
                    system,
                    "sqlite",
                    2,
                    options.workloads,
                    options.concurrency,
                    options.worker_options,
                    under=home,
                )
            else:
                figures = peer_drains.drain(
                    system, 2, options.workloads, peers_venv.PYTHON, under=home
                )
        except (OSError, RuntimeError) as error:
            log(f"  left out: {error}")
            continue
        rows.append(drain_row("sqlite", system, 2, options.workloads, 1, figures))
        run.save()
        log(f"  {rows[-1]['per_s']:,.1f}/s")


def measure_admits(run: Run, options: argparse.Namespace, backends: list[str]) -> None:
    for backend in backends:
        log(f"admit {backend} …")
        rates = admit.admit_rates(backend, options.workloads)
        run.data["admit"][backend] = rates
        run.save()
        log("  " + ", ".join(f"{k} {v['per_s']:,.0f}/s" for k, v in rates.items()))
        if backend == "sqlite":
            parts = admit.admission_parts(options.workloads)
            run.data["admit_parts"] = parts
            run.save()
            log("  " + ", ".join(f"{k} {v:,.1f}" for k, v in parts.items()))


def measure_claims(run: Run, options: argparse.Namespace, backends: list[str]) -> None:
    sizes = [s for s in SIZES if s <= options.max_backlog]
    if options.max_backlog not in SIZES and options.max_backlog > sizes[-1]:
        sizes.append(options.max_backlog)
    wanted = options.claim_backends.split(",")
    for backend in (b for b in backends if b in wanted):
        for size in sizes:
            log(f"claim_next {backend} backlog {size:,} …")
            row = claim_latency.claim_latency(backend, size, options.claims)
            run.data["claim_latency"].append(row)
            run.save()
            log(
                f"  median {row['median_ms']:.2f} ms, p95 {row['p95_ms']:.2f} ms "
                f"(loaded in {row['load_seconds']:.0f} s)"
            )


def measure_wakeups(run: Run, options: argparse.Namespace, backends: list[str]) -> None:
    """``bench_wakeups.py`` (PostgreSQL's wake-up hints: their cost, their latency)."""
    if "postgres" not in backends:
        return
    log("wake-up hints postgres …")
    subprocess.run(
        [sys.executable, str(BENCH / "bench_wakeups.py"), "--workloads", str(options.workloads)],
        check=True,
    )
    run.data["wakeups"] = json.loads((BENCH / "results" / "wakeups.json").read_text())
    run.save()


def script_figures(script: str, results: str, *args: str) -> Any:
    """Run ``bench/<script>`` with ``--out bench/results/<results>`` (and ``args``), and
    answer the figures it wrote.
    """
    out = BENCH / "results" / results
    command = [sys.executable, str(BENCH / script), *args, "--out", str(out)]
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    return json.loads(out.read_text())


def measure_unclaimable(run: Run, options: argparse.Namespace, backends: list[str]) -> None:
    """``bench_unclaimable.py``: claims and another tenant's admissions behind 15,000
    ready workloads nobody may take, against an empty store, on each backend.
    """
    log("claims behind unclaimable work …")
    figures = script_figures(
        "bench_unclaimable.py", "unclaimable.json", "--backends", ",".join(backends)
    )
    run.data["unclaimable"] = figures["results"]
    run.save()


def measure_startup(run: Run, options: argparse.Namespace, backends: list[str]) -> None:
    """``bench_cli_startup.py``: ``feltdb --version``, ``--help`` and ``ls`` as a person
    waits for them.
    """
    log("command start-up …")
    run.data["startup"] = script_figures("bench_cli_startup.py", "cli_startup.json")
    run.save()


def measure_cpu_profile(run: Run, options: argparse.Namespace, backends: list[str]) -> None:
    """``bench_cpu_profile.py``: CPU per lifecycle on the batch path, settled and not, and
    where it goes.
    """
    log("CPU per lifecycle, batch path, and its profile …")
    run.data["cpu_profile"] = script_figures("bench_cpu_profile.py", "cpu_profile.json")
    run.save()


def measure_limits(run: Run, options: argparse.Namespace, backends: list[str]) -> None:
    """``bench_limits.py``: drains with a concurrency limit on half the work, with fairness
    across 100 keys and 100 tenants, beside the unlimited one; a small key's first claim.
    """
    log("limits and fairness …")
    extra = ["--postgres"] if "postgres" in backends else []
    count = str(min(options.workloads, 2000))
    run.data["limits"] = script_figures(
        "bench_limits.py", "limits.json", "--workloads", count,
        "--rounds", str(options.rounds), *extra,
    )  # fmt: skip
    run.save()


def render(options: argparse.Namespace) -> None:
    subprocess.run(
        [sys.executable, str(BENCH / "render.py"), "--results", options.out, "--doc", options.doc],
        check=True,
    )
    python = peers_venv.ensure()
    subprocess.run(
        [
            str(python),
            str(BENCH / "plot.py"),
            "--results",
            options.out,
            "--out-dir",
            str(Path(options.doc).with_suffix("")),
        ],
        check=True,
    )


def main() -> None:
    options = parse(sys.argv[1:])
    if not options.skip_postgres and not pg.admin_url():
        reexec_under_postgres()
    began = time.time()
    backends = ["sqlite"] if options.skip_postgres else ["sqlite", "postgres"]
    meta: dict[str, Any] = {
        "machine": machine.describe(),
        "workloads": options.workloads,
        "http_workloads": options.http_workloads or options.workloads,
        "rounds": options.rounds,
        "procs": options.procs,
        "concurrency": options.concurrency,
        "argv": sys.argv[1:],
        "started": time.strftime("%Y-%m-%d %H:%M:%S %Z", time.localtime(began)),
        "load_average_at_start": os.getloadavg(),
    }
    if not options.skip_postgres:
        meta["postgres"] = pg.settings(pg.admin_url() or "")
    if not options.skip_peers or not options.no_render:
        peers_venv.ensure()
        meta["peers"] = peers_venv.versions()
    log(
        f"machine: {meta['machine']['cpu_count']} × {meta['machine']['cpu_model']}, "
        f"feltdb {meta['machine']['feltdb_commit']}; N={options.workloads}, "
        f"rounds={options.rounds}, procs={options.procs}"
    )
    run = Run(Path(options.out), meta)
    measure_admits(run, options, backends)
    measure_drains(run, options, backends)
    measure_ram_drains(run, options, backends)
    measure_claims(run, options, backends)
    measure_wakeups(run, options, backends)
    measure_unclaimable(run, options, backends)
    measure_startup(run, options, backends)
    measure_cpu_profile(run, options, backends)
    measure_limits(run, options, backends)
    run.data["meta"]["seconds"] = time.time() - began
    run.data["meta"]["load_average_at_end"] = os.getloadavg()
    run.save()
    log(f"results: {options.out} ({run.data['meta']['seconds'] / 60:.1f} min)")
    if not options.no_render:
        render(options)


if __name__ == "__main__":
    main()
