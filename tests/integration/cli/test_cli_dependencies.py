"""Dependencies from the command line (issue 25, point 3): ``feltdb submit --after
ID[:STATE]`` declares one, and ``ls`` and ``show`` tell waiting work as such, each through a
real ``feltdb`` process at 80 columns."""

from __future__ import annotations

import json
from pathlib import Path

from test_newcomer import feltdb, one_line_usage_error, submit


def test_work_submitted_after_another_waits_for_it_in_ls_and_show(tmp_path: Path):
    target = ["--db", str(tmp_path / "work.db")]
    first = submit(target, "extract")
    second = submit(target, "load", "--after", first["workload_id"])
    assert second["dependencies"] == [
        {"workload_id": first["workload_id"], "required_state": "SUCCEEDED"}
    ]
    listed = feltdb("ls", *target, columns=80)
    assert listed.returncode == 0, listed.stderr
    line = next(row for row in listed.stdout.splitlines() if second["workload_id"] in row)
    assert "(waiting)" in line, listed.stdout
    assert all(len(row) <= 80 for row in listed.stdout.splitlines()), listed.stdout
    as_json = json.loads(feltdb("ls", "--json", *target).stdout)
    waiting = {w["workload_id"]: w["waits_for"] for w in as_json}
    assert waiting[second["workload_id"]] == second["dependencies"][0]
    assert waiting[first["workload_id"]] is None

    shown = feltdb("show", second["workload_id"], *target, columns=80)
    assert shown.returncode == 0, shown.stderr
    flat = " ".join(shown.stdout.split())
    assert f"{first['workload_id']} (SUCCEEDED; now READY)" in flat, shown.stdout
    assert f"{first['workload_id']} to be SUCCEEDED" in flat


def test_after_takes_a_state_in_any_case_and_refuses_what_is_none(tmp_path: Path):
    target = ["--db", str(tmp_path / "work.db")]
    first = submit(target, "extract")
    cleanup = submit(target, "cleanup", "--after", f"{first['workload_id']}:dead_letter")
    assert cleanup["dependencies"][0]["required_state"] == "DEAD_LETTER"
    refused = feltdb("submit", "x", "--after", f"{first['workload_id']}:finished", *target)
    assert "'finished' is not a state" in one_line_usage_error(refused)
    missing = feltdb("submit", "x", "--after", "workload_000000000000000000000000", *target)
    assert missing.returncode != 0 and "Traceback" not in missing.stderr
    assert "dependencies.0.workload_id" in missing.stderr
