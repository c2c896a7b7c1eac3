"""The benchmark scripts run: each one that drives the library directly, at a tiny size.

`make bench` takes half an hour, so a script broken by a change of the library (a record's
method renamed, an argument added) would otherwise be found only then. These runs measure
nothing worth reading; they prove the scripts still run to the end and write their JSON.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"

RUNS = {
    "bench_claim_next.py": (["--sizes", "20", "--claims", "3"], "results"),
    "bench_unclaimable.py": (
        ["--sizes", "0,20", "--claims", "3", "--backends", "sqlite"],
        "results",
    ),
    "bench_hot_path.py": (["--workloads", "5"], "ops"),
    "bench_cpu_profile.py": (["--workloads", "200", "--rounds", "1"], "cpu_us"),
    "bench_input_checks.py": (["--rounds", "1", "--calls", "20"], "admission_us"),
    "bench_commit_many.py": (["--plans", "5", "--rounds", "1"], "results"),
    "bench_schedules.py": (["--schedules", "4", "--rounds", "1"], "results"),
    "bench_limits.py": (["--workloads", "10", "--rounds", "1"], "runs"),
    "bench_log_pruning.py": (["--workloads", "10"], "runs"),
    "bench_quotas.py": (["--workloads", "16", "--rounds", "1"], "runs"),
    "bench_joined.py": (["--orders", "8", "--rounds", "1"], "runs"),
}
"""Each script, its tiny-size arguments, and a key of the figures it must write."""


@pytest.mark.parametrize("script", sorted(RUNS))
def test_a_benchmark_script_runs_to_the_end(script: str, tmp_path: Path) -> None:
    out = tmp_path / "out.json"
    arguments, figures = RUNS[script]
    ran = subprocess.run(
        [sys.executable, str(BENCH / script), *arguments, "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=240,
        cwd=tmp_path,
    )
    assert ran.returncode == 0, ran.stderr[-3000:]
    written = json.loads(out.read_text())
    assert written[figures], f"{script} wrote no {figures}"


def test_the_claim_throughput_script_loads_and_drains_a_sqlite_store(tmp_path: Path) -> None:
    out = tmp_path / "out.json"
    target = tmp_path / "work.db"
    ran = subprocess.run(
        [
            sys.executable,
            str(BENCH / "bench_claim_throughput.py"),
            "--target",
            str(target),
            "--backlog",
            "20",
            "--processes",
            "1",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=240,
        cwd=tmp_path,
    )
    assert ran.returncode == 0, ran.stderr[-3000:]
    [drained] = json.loads(out.read_text())["results"]
    assert drained["workloads"] == 20 and drained["per_process"] == [20]


def test_the_admission_parts_are_measured_and_rendered(tmp_path: Path) -> None:
    """``make bench``'s bound of ``admit_many``: its parts measured at a tiny size, and the
    section docs/benchmarks.md shows them in."""
    code = (
        "import json, sys\n"
        "from feltdb_runs import admit\n"
        "import render_bounds\n"
        "parts = admit.admission_parts(40)\n"
        "lines = render_bounds.bounds_section({'admit_parts': parts}, {})\n"
        "print(json.dumps({'parts': parts, 'lines': lines}))\n"
    )
    root = BENCH.parent
    path = [str(BENCH), str(root / "tests"), str(root / "src")]
    ran = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=240,
        cwd=tmp_path,
        env={"PYTHONPATH": ":".join(path), "PATH": "/usr/bin:/bin"},
    )
    assert ran.returncode == 0, ran.stderr[-3000:]
    written = json.loads(ran.stdout.splitlines()[-1])
    parts = written["parts"]
    assert parts["workloads"] == 40
    for name in ("admit_many_us", "statements_us", "checks_us", "record_us"):
        assert parts[name] > 0, name
    # The parts are parts: each less than the whole call.
    assert parts["checks_us"] + parts["record_us"] < parts["admit_many_us"]
    text = "\n".join(written["lines"])
    assert "### `admit_many`" in text and "25,000 admissions a second leave 40 µs" in text


def test_the_ram_disk_drains_are_rendered_beside_the_disk_and_huey(tmp_path: Path) -> None:
    """The bounds section's RAM-disk table, from results as run_all writes them."""

    def row(system: str, per_s: float) -> dict[str, object]:
        seconds = 20_000 / per_s
        return {
            "backend": "sqlite", "system": system, "procs": 2, "per_s": per_s,
            "seconds": seconds, "machine_cpu_s": seconds, "cpu_us_per_workload": 1.0,
            "machine_cpu_us_per_workload": seconds / 20_000 * 1e6,
        }  # fmt: skip

    results = {
        "meta": {"machine": {"cpu_count": 4}},
        "drain": [row("huey", 2_000.0), row("feltdb-batches", 3_000.0)],
        "ram_drain": [row("feltdb-batches", 5_000.0)],
    }
    code = (
        "import json, sys\n"
        "from harness import summary\n"
        "import render_bounds\n"
        "results = json.loads(sys.argv[1])\n"
        "print(json.dumps(render_bounds.bounds_section(results, summary.drains(results))))\n"
    )
    root = BENCH.parent
    ran = subprocess.run(
        [sys.executable, "-c", code, json.dumps(results)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
        env={"PYTHONPATH": f"{BENCH}:{root / 'src'}", "PATH": "/usr/bin:/bin"},
    )
    assert ran.returncode == 0, ran.stderr[-3000:]
    lines = json.loads(ran.stdout)
    [table_row] = [line for line in lines if line.startswith("| feltdb batch calls |")]
    # Disk 3,000/s, RAM disk 5,000/s: 2.5x huey's 2,000/s on the disk; one core of four busy.
    assert table_row.split(" | ")[1:] == ["3,000/s", "5,000/s", "2.50×", "200 µs", "25% |"]
