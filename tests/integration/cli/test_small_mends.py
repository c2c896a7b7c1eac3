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
