"""What operators and approvers see (issue 25), in Chromium against a real ``feltdb serve``,
each page photographed (``make screenshots`` writes them into docs/screenshots/):

- a deliberate failure raised before any side effect is a dead letter whose effect is
  ``none``, never "unknown: it may have acted" (point 1);
- an expired approval is one plain sentence on the workload's page, its times in words
  (point 2);
- ready work waiting on another says so in the workloads table (point 3);
- a grant that may only approve lands on its inbox (point 9).
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Page, expect
from support.dashboard import APPROVER, REQUESTER, WORKER, client, submission
from support.server import Server, serve

from feltdb.auth.policy import APPROVE
from feltdb.worker import Context, Permanent, Worker

pytestmark = pytest.mark.browser

DOCS_SCREENSHOTS = Path(__file__).resolve().parents[2] / "docs" / "screenshots"
WRITE_DOCS = os.environ.get("FELTDB_SCREENSHOTS") == "docs"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    yield from serve(tmp_path_factory.mktemp("operator-views"))


@pytest.fixture
def app() -> str:
    return f"ops-{uuid.uuid4().hex[:10]}"


def shot(page: Page, name: str, tmp_path: Path) -> None:
    folder = DOCS_SCREENSHOTS if WRITE_DOCS else tmp_path
    folder.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=folder / f"{name}.png", full_page=True)
    assert (folder / f"{name}.png").stat().st_size > 0


def signed_in(confined: Any, server: Server, app: str, **grant: Any) -> Page:
    page: Page = confined(server.url).page
    page.goto(f"{server.url}/ui/login")
    page.locator("#token").fill(server.token(app, subject=APPROVER, **grant))
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_load_state()
    return page


def test_a_refusal_before_any_effect_is_a_dead_letter_whose_effect_is_none(
    server: Server, app: str, confined: Any, tmp_path: Path
) -> None:
    with client(server, REQUESTER, app) as requester:
        workload, _ = requester.submit(
            submission("refund-1", "issue-refund", {"amount": -5}, retry_policy={"max_attempts": 1})
        )
    worker = Worker(url=server.url, token=server.token(app, subject=WORKER))

    @worker.handler("issue-refund")
    def refund(ctx: Context) -> Any:
        raise Permanent("amount must be positive")

    assert worker.drain() == 1
    page = signed_in(confined, server, app)
    page.goto(f"{server.url}/ui/dead-letters")
    row = page.locator("#dead-letters tbody tr").filter(has_text=workload.workload_id)
    expect(row).to_contain_text("Effect of the last attempt: none.")
    expect(row).not_to_contain_text("it may have acted")
    expect(row).to_contain_text("its last attempt failed: permanent: amount must be positive")
    shot(page, "dead-letter-effect", tmp_path)


def test_an_expired_approval_is_one_plain_sentence(
    server: Server, app: str, confined: Any, tmp_path: Path
) -> None:
    with client(server, REQUESTER, app) as requester:
        held, _ = requester.submit(
            submission("payout-1", "payout", {"n": 1}, approval={},
                       timeouts={"approval_ms": 1000})
        )  # fmt: skip
        deadline = time.monotonic() + 30
        while requester.get(held.workload_id).state.value != "DEAD_LETTER":
            assert time.monotonic() < deadline, "the approval never expired"
            time.sleep(0.2)
    page = signed_in(confined, server, app)
    page.goto(f"{server.url}/ui/workloads/{held.workload_id}")
    ended = page.locator("#ended")
    expect(ended).to_contain_text("approval expired at ")
    expect(ended).to_contain_text("1 s after it was asked, undecided")
    expect(page.locator("#undecided")).to_contain_text("Never decided: approval expired at ")
    history = page.locator("#history").inner_text()
    assert str(held.created_at + 1) not in history, "a raw epoch on the page"
    shot(page, "approval-expired", tmp_path)


def test_ready_work_waiting_on_another_says_so(
    server: Server, app: str, confined: Any, tmp_path: Path
) -> None:
    with client(server, REQUESTER, app) as requester:
        first, _ = requester.submit(submission("extract-1", "extract", {}))
        second, _ = requester.submit(
            submission("load-1", "load", {}, dependencies=[{"workload_id": first.workload_id}])
        )
    page = signed_in(confined, server, app)
    page.goto(f"{server.url}/ui/workloads")

    def row_of(workload_id: str) -> Any:
        first_cell = page.locator("td:first-child", has_text=workload_id)
        return page.locator("#workloads tbody tr", has=first_cell)

    expect(row_of(second.workload_id)).to_contain_text(
        f"waits for {first.workload_id} to be succeeded"
    )
    expect(row_of(first.workload_id)).not_to_contain_text("waits for")
    shot(page, "waiting", tmp_path)


def test_a_grant_that_may_only_approve_lands_on_its_inbox(
    server: Server, app: str, confined: Any, tmp_path: Path
) -> None:
    with client(server, REQUESTER, app) as requester:
        requester.submit(submission("payout-2", "payout", {"n": 2}, approval={}))
    page = signed_in(confined, server, app, capabilities={APPROVE})
    expect(page).to_have_url(f"{server.url}/ui/approvals")
    expect(page.locator("h1")).to_have_text("Approval inbox")
    expect(page.locator("main")).not_to_contain_text("Your grant does not")
    shot(page, "approver-inbox", tmp_path)
