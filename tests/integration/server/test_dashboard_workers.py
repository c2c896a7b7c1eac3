"""The dashboard's workers page at ``/ui/workers`` over plain HTTP, against the package's
real ``feltdb serve``: each worker the work names, its leases and its completions and
failures, a stale worker said in words, and the page shown only to a grant that may read
the workloads.
"""

from __future__ import annotations

import html
import re
import time

from support.dashboard import WORKER, client, seed
from support.server import Server
from test_dashboard_flows import session

from feltdb import Subject
from feltdb.auth.policy import APPROVE, READ


def test_the_workers_page_shows_each_worker_and_says_which_is_stale(server: Server, app):
    seed(server, app)  # w1 completed 3 and failed 2 in the last minutes
    worker = client(server, WORKER, app)
    try:
        claim = worker.claim_next(definitions=["report"], lease_ms=1000)
        assert claim is not None
    finally:
        worker.close()
    with session(server, app, Subject.human("ops"), capabilities=[READ]) as ops:
        page = ops.get("/ui/workers")
        assert page.status_code == 200, page.text
        assert 'href="/ui/workers"' in ops.get("/ui/").text  # the nav links it
        row = row_of(page.text, claim.worker_id)
        assert row.startswith(f"{claim.worker_id} report 1 ")
        assert "0.3 0.2" in row  # 3 completions, 2 failures in 10 minutes
        # Past the lease of 1 s, the server's maintenance recovers the work: the worker,
        # presumed lost, holds nothing and the recovery counts as its failure.
        deadline = time.monotonic() + 10
        while "0.3 0.3" not in row and time.monotonic() < deadline:
            time.sleep(0.5)
            row = row_of(ops.get("/ui/workers").text, claim.worker_id)
        assert row.startswith(f"{claim.worker_id} - 0 - 0.3 0.3 No")


def row_of(page: str, worker_id: str) -> str:
    """The words of ``page`` from ``worker_id``'s row on, markup left out."""
    text = html.unescape(re.sub(r"<[^>]+>", " ", page))
    return " ".join(text[text.index(worker_id) :].split())


def test_a_grant_that_may_not_read_the_workloads_has_no_workers_page(server: Server, app):
    with session(server, app, Subject.human("ada"), capabilities=[APPROVE]) as ada:
        assert 'href="/ui/workers"' not in ada.get("/ui/approvals").text
        assert ada.get("/ui/workers").status_code == 403
