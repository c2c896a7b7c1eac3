"""Small things a newcomer met (issue 25, point 9), each through a real process."""

from __future__ import annotations

import httpx
from support.server import Server, free_port
from test_newcomer import feltdb


def test_a_server_that_is_not_there_is_said_to_be_unreachable_in_one_line():
    url = f"http://127.0.0.1:{free_port()}"
    run = feltdb("ls", "--url", url, "--token", "fgt2.x")
    assert run.returncode == 1 and "Traceback" not in run.stderr
    (line,) = run.stderr.strip().splitlines()
    assert line.startswith(f"error: cannot reach the feltdb server at {url}:"), line
    assert "STORAGE_FAILURE" not in line and "feltdb serve" in line


def test_the_servers_root_leads_to_the_dashboard(server: Server):
    answer = httpx.get(f"{server.url}/", follow_redirects=False)
    assert answer.status_code == 307 and answer.headers["location"] == "/ui/"


def test_approving_with_a_worker_token_names_what_approving_needs(server: Server):
    from test_newcomer import submit

    from feltdb import Subject
    from feltdb.auth.policy import CLAIM

    app = "approving-as-worker"
    gated = submit(["--url", server.url, "--token", server.token(app)], "send", "--approval")
    worker = server.token(app, subject=Subject.worker("w"), capabilities=[CLAIM])
    run = feltdb("approve", gated["workload_id"], "--url", server.url, "--token", worker)
    assert run.returncode == 1
    (line,) = run.stderr.strip().splitlines()
    assert "WORKLOAD_UNAUTHORIZED" in line and "'workload:approve'" in line, line


def test_a_retry_needs_a_reason_as_on_the_dashboard(tmp_path):
    from test_newcomer import one_line_usage_error

    run = feltdb("retry", "workload_000000000000000000000000", "--db", str(tmp_path / "w.db"))
    assert "--reason" in one_line_usage_error(run)


def test_at_80_columns_the_tables_say_what_they_leave_out_and_keep_why_whole(tmp_path):
    from test_newcomer import submit

    from feltdb import WorkloadStore

    db = ["--db", str(tmp_path / "w.db")]
    dead = submit(db, "report", "--max-attempts", "1")
    with WorkloadStore.open(db[1]) as store:
        claim = store.claim(dead["workload_id"], "w", set())
        store.start(dead["workload_id"], claim.claim_id, "w", claim.fencing_token)
        store.fail(dead["workload_id"], claim.claim_id, "w", claim.fencing_token,
                   "permanent", "the mail relay refused the message")  # fmt: skip
    listed = feltdb("ls", *db, columns=80).stdout
    said = " ".join(listed.split())
    assert "priority, attempts, created: from 120 columns, or --json" in said, listed
    why = feltdb("dead", *db, columns=80).stdout
    cells = [line.split("│")[2].strip() for line in why.splitlines() if line.count("│") == 3]
    assert cells and min(len(cell) for cell in cells[:-1]) >= 30, why  # never 11-char bits
    help_text = feltdb("ls", "--help", columns=80).stdout
    assert max(len(line) for line in help_text.splitlines()) <= 80, help_text


def test_at_80_columns_show_gives_each_event_one_unbroken_line(tmp_path):
    from test_newcomer import submit

    db = ["--db", str(tmp_path / "w.db")]
    work = submit(db, "send")
    assert feltdb("cancel", work["workload_id"], *db).returncode == 0
    shown = feltdb("show", work["workload_id"], *db, columns=80).stdout
    events = [line for line in shown.splitlines() if "  ready  " in line or "  cancelled  " in line]
    assert len(events) == 2, shown
    assert "READY → CANCELLED  by human:" in events[1], shown  # never cut mid-cell
    assert max(len(line) for line in shown.splitlines()) <= 80
