"""``feltdb schedule`` through a real ``feltdb`` subprocess at 80 columns: on a store file
(``--db``, as the local operator) and through a server (``--url --token``)."""

from __future__ import annotations

import getpass
import json
from datetime import datetime
from pathlib import Path
from zoneinfo import ZoneInfo

from support.server import serve
from test_newcomer import feltdb

from feltdb import Subject, WorkloadStore
from feltdb.auth.capabilities import READ, SCHEDULE, SUBMIT


def ok(*args: str) -> str:
    run = feltdb(*args, columns=80)
    assert run.returncode == 0, (run.stdout, run.stderr)
    if "--json" not in args:  # JSON is one line, for machines
        lines = run.stdout.splitlines()
        assert all(len(line) <= 80 for line in lines), "\n".join(lines)
    return run.stdout


def test_schedule_commands_on_a_store_file(tmp_path: Path) -> None:
    db = ["--db", str(tmp_path / "w.db")]
    made = ok("schedule", "create", "nightly", "--definition", "report", "--input",
              '{"period": "day"}', "--cron", "30 2 * * *", "--tz", "Europe/Berlin",
              *db)  # fmt: skip
    assert "schedule nightly: active" in made
    assert "cron '30 2 * * *' Europe/Berlin, catch-up skip" in made
    assert "(02:30 Europe/Berlin)" in made  # the next occurrence, in the zone's wall time
    ok("schedule", "create", "often", "--definition", "tick", "--every", "60",
       "--catch-up", "all", *db)  # fmt: skip
    listed = ok("schedule", "ls", *db)
    assert listed.index("schedule nightly") < listed.index("schedule often")
    assert "every 60s, catch-up all" in listed

    upcoming = json.loads(ok("schedule", "next", "nightly", "-n", "3", "--json", *db))
    walls = [datetime.fromtimestamp(t, ZoneInfo("Europe/Berlin")) for t in upcoming]
    assert [(w.hour, w.minute) for w in walls] == [(2, 30)] * 3
    assert ok("schedule", "next", "nightly", "-n", "2", *db).count("(02:30 Europe/Berlin)") == 2

    assert "paused schedule often" in ok("schedule", "pause", "often", *db)
    assert "schedule often: paused" in ok("schedule", "ls", *db)
    assert "resumed schedule often; next" in ok("schedule", "resume", "often", *db)
    assert "deleted schedule nightly" in ok("schedule", "rm", "nightly", *db)
    gone = feltdb("schedule", "rm", "nightly", *db, columns=80)
    assert gone.returncode == 1 and "WORKLOAD_NOT_FOUND" in gone.stderr
    bad = feltdb("schedule", "create", "x", "--definition", "d", "--cron", "61 * * * *", *db)
    assert bad.returncode == 1 and "cron" in bad.stderr

    # What the scheduler admits is the local operator's submission.
    with WorkloadStore.open(db[1]) as store:
        [schedule] = store.schedules.listed("default", "default")
        occurrences = store.schedules.run_due(now=schedule["next_occurrence"])
        [work] = store.list("default", "default")
        assert [o.workload_id for o in occurrences] == [work.workload_id]
    assert work.requested_by == Subject.human(getpass.getuser())
    assert (work.definition_id, work.trigger) == ("tick", "schedule:often")
    assert "1 admitted" in ok("schedule", "ls", *db)


def test_schedule_commands_through_a_server(tmp_path: Path) -> None:
    server = next(serve_once := serve(tmp_path))
    try:
        token = server.token(
            "default", tenant="default", subject=Subject.human("ops"),
            capabilities=[SCHEDULE, SUBMIT, READ],
        )  # fmt: skip
        target = ["--url", server.url, "--token", token]
        ok("schedule", "create", "hourly", "--definition", "d", "--cron", "0 * * * *", *target)
        shown = json.loads(ok("schedule", "ls", "--json", *target))
        assert [(s["schedule_id"], s["created_by"]) for s in shown] == [("hourly", "human:ops")]
        reader = server.token("default", tenant="default", capabilities=[READ])
        refused = feltdb("schedule", "ls", "--url", server.url, "--token", reader)
        assert refused.returncode == 1 and "schedule:manage" in refused.stderr
    finally:
        serve_once.close()
