"""``feltdb workflow submit|show|cancel`` through a real ``feltdb`` process at 80 columns."""

from __future__ import annotations

import json
from pathlib import Path

from test_newcomer import feltdb

from feltdb import WorkloadStore

NIGHTLY = {
    "key": "nightly",
    "nodes": [
        {"name": "extract", "submission": {"definition_id": "extract", "input": {}}},
        {
            "name": "load",
            "after": ["extract"],
            "submission": {"definition_id": "load", "input": {}},
        },
        {
            "name": "alert",
            "after": ["load:DEAD_LETTER"],
            "submission": {"definition_id": "alert", "input": {}},
        },
    ],
}


def _file(tmp_path: Path, document: dict) -> str:
    path = tmp_path / "workflow.json"
    path.write_text(json.dumps(document))
    return str(path)


def test_a_workflow_file_is_submitted_shown_and_cancelled(tmp_path: Path):
    target = ["--db", str(tmp_path / "work.db")]
    path = _file(tmp_path, NIGHTLY)
    first = feltdb("workflow", "submit", path, *target, columns=80)
    assert first.returncode == 0, first.stderr
    assert ": submitted" in first.stdout and "nightly: RUNNING" in first.stdout
    assert all(len(line) <= 80 for line in first.stdout.splitlines()), first.stdout
    again = feltdb("workflow", "submit", path, "--json", *target)
    run = json.loads(again.stdout)
    assert [(n["name"], n["after"], n["state"]) for n in run["nodes"]] == [
        ("extract", [], "READY"),
        ("load", ["extract"], "READY"),
        ("alert", ["load:DEAD_LETTER"], "READY"),
    ]
    replay = feltdb("workflow", "submit", path, *target, columns=80)
    assert "already submitted (a replay)" in replay.stdout
    with WorkloadStore.open(target[1]) as store:
        assert len(store.list("default", "default")) == 3, "a replay admits nothing more"
    shown = feltdb("workflow", "show", run["workflow_id"], *target, columns=80)
    assert "load:DEAD_LETTER" in shown.stdout and run["nodes"][0]["workload_id"] in shown.stdout
    cancelled = feltdb("workflow", "cancel", run["workflow_id"], *target, columns=80)
    assert cancelled.returncode == 0, cancelled.stderr
    assert "nightly: CANCELLED" in cancelled.stdout


def test_a_workflow_that_cannot_run_is_one_line_and_admits_nothing(tmp_path: Path):
    target = ["--db", str(tmp_path / "work.db")]
    looping = json.loads(json.dumps(NIGHTLY))
    looping["nodes"][0]["after"] = ["load"]
    refused = feltdb("workflow", "submit", _file(tmp_path, looping), *target, columns=80)
    assert refused.returncode == 1 and "Traceback" not in refused.stderr
    [line] = [row for row in refused.stderr.splitlines() if row.startswith("error")]
    assert "WORKLOAD_INVALID" in line and "extract → load → extract" in line
    with WorkloadStore.open(target[1]) as store:
        assert store.list("default", "default") == []
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    usage = feltdb("workflow", "submit", str(broken), *target)
    assert usage.returncode == 2 and "is not JSON" in usage.stderr


def test_names_that_look_like_markup_are_shown_as_written(tmp_path: Path):
    target = ["--db", str(tmp_path / "work.db")]
    odd = {
        "key": "[bold]k[/]",
        "nodes": [{"name": "[red]x", "submission": {"definition_id": "d", "input": {}}}],
    }
    shown = feltdb("workflow", "submit", _file(tmp_path, odd), *target, columns=80)
    assert shown.returncode == 0, shown.stderr
    assert "[bold]k[/]: RUNNING" in shown.stdout and "│ [red]x" in shown.stdout
