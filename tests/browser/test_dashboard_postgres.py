"""The dashboard over PostgreSQL, in a real browser: sign in, read the overview, approve a
held workload in the inbox, and a worker claims it (the SQLite module,
``test_dashboard.py``, covers the rest).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from playwright.sync_api import expect
from support.browser import OfflinePage
from support.dashboard import APPLICATION, APPROVER, WORKER, client, seed
from support.server import Server, serve

from feltdb.work.states import ApprovalOutcome, WorkloadState

pytestmark = [pytest.mark.postgres, pytest.mark.browser]


@pytest.fixture(scope="module")
def pg_server(pg_databases: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    database = pg_databases.create("dashboard")
    try:
        yield from serve(
            tmp_path_factory.mktemp("dashboard-pg"),
            pg_databases.url_of(database),
            backend="postgres",
        )
    finally:
        pg_databases.drop(database)


def test_approving_in_the_browser_on_postgres(
    pg_server: Server, confined: Callable[[str], OfflinePage]
) -> None:
    server = pg_server
    assert server.backend == "postgres"
    seeded = seed(server)
    offline = confined(server.url)
    page = offline.page
    page.goto(f"{server.url}/ui/login")
    page.locator("#token").fill(server.token(APPLICATION, subject=APPROVER))
    with page.expect_response(lambda r: r.request.method == "POST") as posted:
        page.get_by_role("button", name="Sign in").click()
    assert posted.value.status == 303, page.locator("main").inner_text()
    expect(page).to_have_url(f"{server.url}/ui/")
    send = page.locator("#counts tbody tr", has_text="send").locator("td")
    expect(send).to_have_text(["1", "3", "0", "0", "4"])  # ready, succeeded, …, all

    page.get_by_role("link", name="Approvals", exact=True).click()
    approved = seeded.held[0]
    article = page.locator(f'article.approval[data-workload="{approved}"]')
    with page.expect_navigation(url=re.compile(r"outcome=approved")):
        article.get_by_role("button", name="Approve").click()
    expect(page.locator("#decided")).to_have_text(
        re.compile(rf"^{approved} was approved by human:ada at ")
    )
    expect(page.locator("article.approval")).to_have_count(1)

    worker = client(server, WORKER)
    try:
        workload = worker.get(approved)
        assert workload.state is WorkloadState.READY
        assert workload.approval is not None and workload.approval.decision is not None
        assert workload.approval.decision.outcome is ApprovalOutcome.APPROVED
        claim = worker.claim_next(definitions=["payout"])
        assert claim is not None and claim.workload_id == approved
        assert worker.claim_next(definitions=["payout"]) is None
    finally:
        worker.close()
    assert offline.outside == []
    assert offline.console_errors == []
