"""The dashboard at ``/ui/`` in a real browser, over a real ``feltdb serve`` (SQLite).

One server for the module, seeded once (:func:`support.dashboard.seed`) in the application
``shop``, whose data the read-only tests assert exactly. A test that changes work (decides,
retries, cancels, submits) does it in an application of its own (:func:`fresh_app`), so the
tests hold in any order. Every page is confined to the server (nothing from the internet)
and its console errors are collected (:func:`~tests.browser.conftest.confined`).
"""

from __future__ import annotations

import os
import re
import struct
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import parse_qs, urlencode, urlsplit

import pytest
from playwright.sync_api import Page, Response, ViewportSize, expect
from support.browser import OfflinePage
from support.dashboard import (
    APPLICATION,
    APPROVER,
    REQUESTER,
    SCRIPT,
    WORKER,
    Seeded,
    client,
    form_token,
    hold,
    seed,
    signed_in,
    submission,
)
from support.server import Server, serve

from feltdb import Subject
from feltdb.auth.policy import READ
from feltdb.auth.sessions import issue_ticket
from feltdb.records.workload import ApprovalDecision, Workload
from feltdb.work.states import ApprovalOutcome, WorkloadState

pytestmark = pytest.mark.browser

Confined = Callable[[str], OfflinePage]
DOCS_SCREENSHOTS = Path(__file__).resolve().parents[2] / "docs" / "screenshots"
WRITE_DOCS = os.environ.get("FELTDB_SCREENSHOTS") == "docs"
"""``make screenshots`` writes the README's pictures (docs/screenshots/); any other run
writes them to a temporary folder, so that a test run leaves the checkout as it was.
Read at import: the test environment is stripped of ``FELTDB_*`` variables."""
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
PHONE: ViewportSize = {"width": 390, "height": 844}
DESKTOP: ViewportSize = {"width": 1280, "height": 900}
OTHER_APPROVER = Subject.human("bob")
CONTROLS = "header nav a, header .signout button, main h1, main button, main input, main select"
"""What a phone's screen must show whole (outside a sideways-scrolled table)."""


# --- fixtures and helpers ----------------------------------------------------------------


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    yield from serve(tmp_path_factory.mktemp("dashboard"))


@pytest.fixture(scope="module")
def seeded(server: Server) -> Seeded:
    """``shop``'s seed: never changed by a test (the counts are asserted exactly)."""
    return seed(server)


@pytest.fixture
def fresh_app() -> str:
    """An application of this test alone, for work the test changes."""
    return f"shop-{uuid.uuid4().hex[:10]}"


def approver_token(server: Server, application: str = APPLICATION, **grant: object) -> str:
    """A token of ``human:ada`` holding every capability over ``application``."""
    return server.token(application, subject=APPROVER, **grant)


def sign_in(offline: OfflinePage, server: Server, token: str) -> Page:
    """Sign ``offline``'s browser in by pasting ``token``; its page, on the overview."""
    page = offline.page
    page.goto(f"{server.url}/ui/login")
    page.locator("#token").fill(token)
    with page.expect_response(is_post_to("/ui/login")) as posted:
        page.get_by_role("button", name="Sign in").click()
    if posted.value.status != 303:
        page.wait_for_load_state()
        pytest.fail(
            f"the sign-in form's post was answered {posted.value.status}: "
            f"{page.locator('main').inner_text()}"
        )
    expect(page).to_have_url(f"{server.url}/ui/")
    return page


def signed_in_page(
    confined: Confined, server: Server, application: str = APPLICATION, **grant: object
) -> tuple[OfflinePage, Page]:
    offline = confined(server.url)
    return offline, sign_in(offline, server, approver_token(server, application, **grant))


def workload_ids(page: Page) -> list[str]:
    """The ids the workloads table lists, in the order shown."""
    return page.locator("#workloads tbody tr td:first-child a").all_inner_texts()


def query_of(page: Page) -> dict[str, list[str]]:
    return parse_qs(urlsplit(page.url).query)


def held_in(server: Server, application: str, *keys: str) -> list[str]:
    """Submit one workload per key that waits for approval in ``application``; their ids."""
    requester = client(server, REQUESTER, application)
    try:
        return [hold(requester, key, {"amount": 10, "key": key}) for key in keys]
    finally:
        requester.close()


def state_of(server: Server, application: str, workload_id: str) -> Workload:
    """The committed workload (as the API answers it)."""
    reader = client(server, APPROVER, application)
    try:
        workload: Workload = reader.get(workload_id)
        return workload
    finally:
        reader.close()


def decision_of(workload: Workload) -> ApprovalDecision:
    """The workload's committed approval decision (there must be one)."""
    assert workload.approval is not None and workload.approval.decision is not None
    return workload.approval.decision


def is_post_to(path_part: str) -> Callable[[Response], bool]:
    def matches(answer: Response) -> bool:
        return answer.request.method == "POST" and path_part in answer.url

    return matches


def no_horizontal_overflow(page: Page) -> bool:
    return bool(page.evaluate("document.documentElement.scrollWidth <= window.innerWidth"))


OFF_SCREEN = """selector => Array.from(document.querySelectorAll(selector))
  .filter(e => e.getClientRects().length > 0 && !e.closest('.scroll'))
  .filter(e => {
    const box = e.getBoundingClientRect();
    return box.left < 0 || box.right > window.innerWidth + 0.5;
  })
  .map(e => e.outerHTML.slice(0, 160))"""
"""The shown elements ``selector`` names that stick out of the viewport's width (those in a
``.scroll`` region, a table scrolled sideways, are not counted)."""


def off_screen(page: Page, selector: str) -> list[str]:
    found: list[str] = page.evaluate(OFF_SCREEN, selector)
    return found


# --- 1. signing in by token, the overview --------------------------------------------------


def test_signing_in_by_token_lands_on_the_overview_with_the_seeded_counts(
    server: Server, seeded: Seeded, confined: Confined
) -> None:
    offline, page = signed_in_page(confined, server)
    expect(page).to_have_title("Overview · feltdb")
    expect(page.locator("header .who")).to_have_text("human:ada · t/shop")
    expect(page.locator("header nav a")).to_have_text(
        ["Overview", "Workloads", "Workers", "Approvals", "Dead letters", "Audit", "Schedules"]
    )
    cookie = next(c for c in page.context.cookies() if c["name"] == "feltdb_session")
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict" and cookie["path"] == "/ui"

    table = page.locator("#counts")
    headers = table.locator("thead th").all_inner_texts()
    states = ["ready", "succeeded", "dead letter", "awaiting approval"]
    assert headers == ["Definition", *states, "all"]
    counts = {}
    for row in table.locator("tbody tr").all():
        definition = row.locator("th").inner_text()
        numbers = [int(text) for text in row.locator("td").all_inner_texts()]
        counts[definition] = dict(zip(headers[1:], numbers, strict=True))
    assert counts == {
        "payout": {"ready": 0, "succeeded": 0, "dead letter": 0, "awaiting approval": 2, "all": 2},
        "report": {"ready": 2, "succeeded": 0, "dead letter": 2, "awaiting approval": 0, "all": 4},
        "send": {"ready": 1, "succeeded": 3, "dead letter": 0, "awaiting approval": 0, "all": 4},
    }
    # A count links to the workloads of that definition in that state.
    link = table.locator("tbody tr", has_text="send").get_by_role("link", name="3", exact=True)
    assert link.get_attribute("href") == "/ui/workloads?definition=send&state=SUCCEEDED"

    waiting = page.locator("#oldest-ready li").all_inner_texts()
    assert [item.split(";")[0] for item in waiting] == ["report: 2 ready", "send: 1 ready"]

    chart = page.locator("figure.chart")
    expect(chart).to_be_visible()
    expect(chart.locator("svg[role=img] line.axis")).to_have_count(1)
    expect(chart.locator("figcaption")).to_contain_text("Per minute over the last hour")

    recent = page.locator("section[aria-labelledby=recent-dead] li a").all_inner_texts()
    assert sorted(recent) == sorted(seeded.dead)
    # This server was not given --retain (test_dashboard_retention.py's is).
    expect(page.locator("#retention-next")).to_contain_text("Retention is off")
    assert offline.outside == []
    assert offline.console_errors == []


def test_the_overview_chart_counts_the_seeded_completions_and_failures(
    server: Server, seeded: Seeded, confined: Confined
) -> None:
    """3 ``send`` completed and 2 ``report`` dead-lettered a moment ago: the last hour's
    chart shows them (bars above the axis for completions, below it for failures)."""
    offline, page = signed_in_page(confined, server)
    caption = page.locator("figure.chart figcaption")
    expect(caption).to_contain_text("In all, 3 completed and 2 failed.")
    assert page.locator("figure.chart rect.done").count() >= 1
    assert page.locator("figure.chart rect.failed").count() >= 1
    titles = page.locator("figure.chart rect title").all_text_contents()
    completed = sum(int(m) for t in titles for m in re.findall(r"(\d+) completed", t))
    failed = sum(int(m) for t in titles for m in re.findall(r"(\d+) failed", t))
    assert (completed, failed) == (3, 2)
    assert offline.console_errors == []


# --- 2. signing in by a one-time link ------------------------------------------------------


def test_a_sign_in_link_signs_in_once(server: Server, confined: Confined) -> None:
    grant = server.grant(APPLICATION, subject=APPROVER)
    ticket = issue_ticket(server.keyring, grant, int(time.time()))
    link = f"{server.url}/ui/login#ticket={ticket}"

    first = confined(server.url)
    first.page.goto(link)
    expect(first.page).to_have_url(f"{server.url}/ui/")
    expect(first.page.locator("header .who")).to_have_text("human:ada · t/shop")
    expect(first.page.locator("#counts")).to_be_visible()
    assert ticket not in first.page.url

    again = confined(server.url)
    with again.page.expect_response(is_post_to("/ui/login")) as posted:
        again.page.goto(link)
    assert posted.value.status == 401
    expect(again.page.locator("main .problem")).to_contain_text(
        "this sign-in link was used already"
    )
    expect(again.page.locator("#token")).to_be_visible()  # still the sign-in page
    assert "feltdb_session" not in {c["name"] for c in again.page.context.cookies()}
    assert first.outside == again.outside == []
    assert first.console_errors == []


# --- 3. the workloads table: filters, self-refresh, sorting ---------------------------------


def test_the_workloads_filter_survives_the_self_refresh(
    server: Server, fresh_app: str, confined: Confined
) -> None:
    mine = seed(server, fresh_app)
    offline, page = signed_in_page(confined, server, fresh_app)
    page.get_by_role("link", name="Workloads", exact=True).click()
    expect(page.locator("#workloads")).to_be_visible()
    everything = [*mine.succeeded, *mine.dead, *mine.held, *mine.ready, mine.script]
    assert sorted(workload_ids(page)) == sorted(everything)

    def filter_by(state: str = "", definition: str = "", text: str = "") -> None:
        page.locator("#f-state").select_option(state)
        page.locator("#f-definition").fill(definition)
        page.locator("#f-q").fill(text)
        with page.expect_navigation():
            page.get_by_role("button", name="Filter").click()

    filter_by(state="READY")
    assert query_of(page)["state"] == ["READY"]
    assert sorted(workload_ids(page)) == sorted([*mine.ready, mine.script])
    expect(page.locator("#workloads tbody .state")).to_have_text(["ready"] * 3)

    filter_by(definition="report")
    assert query_of(page)["definition"] == ["report"]
    assert sorted(workload_ids(page)) == sorted([*mine.dead, *mine.ready])

    filter_by(text="weekly")
    assert query_of(page)["q"] == ["weekly"]
    assert sorted(workload_ids(page)) == sorted(mine.ready)
    expect(page.locator("#workloads-region")).to_contain_text("Searched")

    filter_by(state="DEAD_LETTER", definition="report", text="weekly")
    expect(page.locator("#workloads tbody")).to_contain_text("No workload matches")

    filter_by(state="READY", definition="report", text="weekly")
    filtered_url = page.url
    assert query_of(page) == {"state": ["READY"], "definition": ["report"], "q": ["weekly"]}
    assert sorted(workload_ids(page)) == sorted(mine.ready)
    expect(page.locator("#f-state")).to_have_value("READY")
    expect(page.locator("#f-definition")).to_have_value("report")
    expect(page.locator("#f-q")).to_have_value("weekly")

    # Sort this page by workload id, then move the focus out of the region (a region
    # holding the focus is not refreshed, so as not to take it away).
    page.get_by_role("button", name="Sort this page by Workload").click()
    assert workload_ids(page) == sorted(mine.ready)
    page.locator("h1").click()

    # Work that arrives while the page is open: one matches the filter, two do not.
    requester = client(server, REQUESTER, fresh_app)
    try:
        late, _ = requester.submit(submission("weekly-late", "report", {"week": 9}))
        requester.submit(submission("weekly-other", "send", {"to": "x@example.com"}))
        requester.submit(submission("daily-late", "report", {"day": 9}))
    finally:
        requester.close()
    region = page.locator("#workloads-region")
    # The module's one wait for the refresh (every 5 s): until the new work is shown.
    expect(region).to_contain_text(late.workload_id, timeout=12_000)
    expect(region).to_have_attribute("data-refreshed", re.compile(r"^\d+$"))

    assert page.url == filtered_url
    shown = workload_ids(page)
    assert sorted(shown) == sorted([*mine.ready, late.workload_id])
    assert shown == sorted(shown)  # the sort is applied again to the fresh rows
    expect(page.locator("#workloads th").first).to_have_attribute("aria-sort", "ascending")
    expect(page.locator("#workloads caption")).to_contain_text(", ready, of report")
    expect(page.locator("#f-state")).to_have_value("READY")
    assert offline.outside == []
    assert offline.console_errors == []


def test_the_workloads_pages_keep_the_filter(
    server: Server, fresh_app: str, confined: Confined
) -> None:
    requester = client(server, REQUESTER, fresh_app)
    try:
        ready = [
            requester.submit(submission(f"bulk-{n:02d}", "send", {"n": n}))[0].workload_id
            for n in range(51)
        ]
        held = held_in(server, fresh_app, "not-ready")
    finally:
        requester.close()
    offline, page = signed_in_page(confined, server, fresh_app)
    page.goto(f"{server.url}/ui/workloads?state=READY")
    first_page = workload_ids(page)
    assert len(first_page) == 50
    expect(page.get_by_role("link", name="First page")).to_have_count(0)
    onward = page.get_by_role("link", name="Next page")
    assert parse_qs(urlsplit(onward.get_attribute("href") or "").query)["state"] == ["READY"]
    onward.click()
    expect(page.get_by_role("link", name="First page")).to_be_visible()
    second_page = workload_ids(page)
    assert query_of(page)["state"] == ["READY"]
    assert sorted(first_page + second_page) == sorted(ready)
    assert held[0] not in first_page + second_page
    expect(page.get_by_role("link", name="Next page")).to_have_count(0)
    page.get_by_role("link", name="First page").click()
    assert workload_ids(page) == first_page
    assert query_of(page) == {"state": ["READY"]}
    assert offline.console_errors == []


# --- 4. a dead letter's page ---------------------------------------------------------------


def test_a_dead_letter_shows_its_timeline_and_attempts(
    server: Server, seeded: Seeded, confined: Confined
) -> None:
    offline, page = signed_in_page(confined, server)
    page.get_by_role("link", name="Dead letters", exact=True).click()
    dead = seeded.dead[0]
    page.locator("#dead-letters").get_by_role("link", name=dead).click()
    expect(page).to_have_url(f"{server.url}/ui/workloads/{dead}")
    expect(page.locator("h1")).to_have_text(dead)

    facts = dict(
        zip(
            page.locator("#facts dt").all_inner_texts(),
            page.locator("#facts dd").all_inner_texts(),
            strict=True,
        )
    )
    assert facts["State"] == "dead letter"
    assert facts["Definition"] == "report (revision r1)"
    assert facts["Idempotency key"] == "nightly-0"
    assert facts["Attempts"] == "1 of 1"
    assert facts["Last failure"] == "permanent: the mail relay refused the message"
    assert facts["Requested by"].startswith("service:shop-frontend under grant ")

    events = page.locator("#history > li")
    expect(events.locator("strong")).to_have_text(
        [
            "workload.ready",
            "workload.claimed",
            "workload.started",
            "workload.failed",
            "workload.dead_lettered",
        ]
    )
    headlines = events.locator("p:first-child").all_inner_texts()
    transitions = [text.split(": ", 1)[1] for text in headlines]
    assert transitions == [
        "created → ready",
        "ready → claimed",
        "claimed → running",
        "running → failed",
        "failed → dead letter",
    ]
    actors = [text.rsplit(" by ", 1)[1] for text in events.locator("p.help").all_inner_texts()]
    assert actors == ["feltdb", "worker:w1", "worker:w1", "worker:w1", "feltdb.retry"]

    rows = page.locator("#attempt-table tbody tr")
    expect(rows).to_have_count(1)
    cells = rows.first.locator("td").all_inner_texts()
    assert cells[0] == f"attempt_{dead}_1"
    assert cells[1] == "worker:w1"
    assert cells[2] == "1"  # the fence
    assert cells[3] == "failed"
    assert cells[6] == "the mail relay refused the message"

    # An operator may retry or cancel it from here (not done: the seed stays as it is).
    expect(page.locator("#retry-reason")).to_be_visible()
    expect(page.get_by_role("button", name="Retry", exact=True)).to_be_visible()
    expect(page.get_by_role("button", name="Cancel this workload")).to_be_visible()
    assert offline.outside == []
    assert offline.console_errors == []


# --- 5. approving and rejecting in the inbox; a worker then claims the approved one ----------


def test_an_approved_workload_is_claimed_and_a_rejected_one_is_not(
    server: Server, fresh_app: str, confined: Confined
) -> None:
    mine = seed(server, fresh_app)
    approved, rejected = mine.held
    offline, page = signed_in_page(confined, server, fresh_app)
    page.get_by_role("link", name="Approvals", exact=True).click()
    articles = page.locator("article.approval")
    expect(articles).to_have_count(2)
    shown = sorted(article.get_attribute("data-workload") or "" for article in articles.all())
    assert shown == sorted(mine.held)
    first = page.locator(f'article.approval[data-workload="{approved}"]')
    expect(first.locator("pre.json")).to_contain_text('"amount": 120')
    expect(first.locator("code.hash")).to_have_text(
        state_of(server, fresh_app, approved).input_hash
    )

    with page.expect_navigation(url=re.compile(r"/ui/approvals\?decided=")):
        first.get_by_role("button", name="Approve").click()
    assert query_of(page) == {"decided": [approved], "outcome": ["approved"]}
    expect(page.locator("#decided")).to_have_text(re.compile(rf"^{approved} was approved by "))
    expect(articles).to_have_count(1)

    second = page.locator(f'article.approval[data-workload="{rejected}"]')
    # The reason is required: the browser does not post the form without one.
    second.get_by_role("button", name="Reject").click()
    expect(page).to_have_url(re.compile(r"decided=" + approved))
    assert second.locator("input[name=reason]").evaluate("field => !field.validity.valid")
    second.get_by_label("Reason for rejecting").fill("9000 to an unknown payee")
    with page.expect_navigation(url=re.compile(r"outcome=rejected")):
        second.get_by_role("button", name="Reject").click()
    expect(page.locator("#decided")).to_have_text(re.compile(rf"^{rejected} was rejected by "))
    expect(page.locator("#empty")).to_have_text("Nothing awaits approval.")

    done = state_of(server, fresh_app, approved)
    assert done.state is WorkloadState.READY
    assert decision_of(done).outcome is ApprovalOutcome.APPROVED
    assert decision_of(done).decided_by == APPROVER
    refused = state_of(server, fresh_app, rejected)
    assert refused.state is WorkloadState.REJECTED
    assert decision_of(refused).reason == "9000 to an unknown payee"

    worker = client(server, WORKER, fresh_app)
    try:
        claim = worker.claim_next(definitions=["payout"])
        assert claim is not None and claim.workload_id == approved
        assert worker.claim_next(definitions=["payout"]) is None
    finally:
        worker.close()

    page.goto(f"{server.url}/ui/workloads/{rejected}")
    expect(page.locator("section[aria-labelledby=approval]")).to_contain_text(
        "Rejected by human:ada"
    )
    assert offline.outside == []
    assert offline.console_errors == []


# --- 6. a decision made elsewhere first -----------------------------------------------------


def test_a_stale_inbox_says_the_work_was_decided_already(
    server: Server, fresh_app: str, confined: Confined
) -> None:
    (workload_id,) = held_in(server, fresh_app, "stale")
    # Two tabs of the inbox, opened before the decision.
    pages = [signed_in_page(confined, server, fresh_app) for _ in range(2)]
    for _, page in pages:
        page.goto(f"{server.url}/ui/approvals")
        expect(page.locator(f'article[data-workload="{workload_id}"]')).to_be_visible()

    elsewhere = client(server, OTHER_APPROVER, fresh_app)
    try:
        committed, replayed = elsewhere.decide(
            workload_id,
            ApprovalOutcome.APPROVED,
            None,
            elsewhere.get(workload_id).input_hash,
        )
    finally:
        elsewhere.close()
    assert not replayed and committed.decided_by == OTHER_APPROVER

    # The same outcome, and the opposite one: neither is recorded as this approver's.
    (_, same), (_, opposite) = pages
    with same.expect_response(is_post_to("/decision")) as answer:
        same.locator(f'article[data-workload="{workload_id}"]').get_by_role(
            "button", name="Approve"
        ).click()
    assert answer.value.status == 409
    expect(same.locator("p#problem")).to_contain_text(
        f"{workload_id} was already approved by human:bob at "
    )
    expect(same.locator("p#problem")).to_contain_text("your decision was not recorded")

    article = opposite.locator(f'article[data-workload="{workload_id}"]')
    article.get_by_label("Reason for rejecting").fill("too late to say no")
    with opposite.expect_response(is_post_to("/decision")) as answer:
        article.get_by_role("button", name="Reject").click()
    assert answer.value.status == 409
    expect(opposite.locator("p#problem")).to_contain_text(
        f"{workload_id} was already approved by human:bob at "
    )
    expect(opposite.locator("#empty")).to_be_visible()  # the inbox as it is now

    after = state_of(server, fresh_app, workload_id)
    assert after.state is WorkloadState.READY
    assert decision_of(after) == committed
    for offline, _ in pages:
        assert offline.outside == []


# --- 7. escaping ---------------------------------------------------------------------------


def test_a_hostile_input_is_shown_as_text(
    server: Server, seeded: Seeded, confined: Confined
) -> None:
    offline, page = signed_in_page(confined, server)
    page.goto(f"{server.url}/ui/workloads/{seeded.script}")
    shown = page.locator("#input-json")
    expect(shown).to_contain_text(SCRIPT)
    expect(shown.locator("script")).to_have_count(0)
    assert page.locator("main script").count() == 0
    expect(page).to_have_title(f"{seeded.script} · feltdb")
    assert page.title() != "pwned"
    assert offline.outside == []
    assert offline.console_errors == []


# --- 8. a reader may not approve --------------------------------------------------------


def test_a_reader_is_offered_no_approval_and_a_forged_one_is_refused(
    server: Server, fresh_app: str, confined: Confined
) -> None:
    (workload_id,) = held_in(server, fresh_app, "reader")
    offline, page = signed_in_page(confined, server, fresh_app, capabilities=[READ])
    expect(page.locator("header nav a")).to_have_text(["Overview", "Workloads", "Workers"])
    expect(page.get_by_role("link", name="Approvals")).to_have_count(0)

    page.goto(f"{server.url}/ui/workloads/{workload_id}")
    expect(page.locator("#facts")).to_contain_text("awaiting approval")
    expect(page.get_by_role("button", name="Approve")).to_have_count(0)
    expect(page.get_by_role("link", name="Decide it in the approval inbox")).to_have_count(0)
    expect(page.locator("section.actions")).to_have_count(0)

    inbox = page.goto(f"{server.url}/ui/approvals")
    assert inbox is not None and inbox.status == 403
    expect(page.locator("h1")).to_have_text("Not allowed")

    csrf = page.locator("form.signout input[name=csrf]").get_attribute("value")
    assert csrf
    input_hash = state_of(server, fresh_app, workload_id).input_hash
    for outcome in ("approved", "rejected"):
        forged = page.request.post(
            f"{server.url}/ui/approvals/{workload_id}/decision",
            form={"csrf": csrf, "input_hash": input_hash, "outcome": outcome, "reason": "x"},
        )
        assert forged.status == 403, forged.text()
        assert "Not allowed" in forged.text()
    after = state_of(server, fresh_app, workload_id)
    assert after.state is WorkloadState.AWAITING_APPROVAL
    assert after.approval is not None and after.approval.decision is None

    # An approver is offered the decision on the same page.
    _, approver = signed_in_page(confined, server, fresh_app)
    approver.goto(f"{server.url}/ui/workloads/{workload_id}")
    expect(approver.get_by_role("link", name="Decide it in the approval inbox")).to_be_visible()
    assert offline.outside == []


# --- 9. form posts need the session's form token ------------------------------------------


def test_a_post_without_its_form_token_changes_nothing(
    server: Server, fresh_app: str, confined: Confined
) -> None:
    (held,) = held_in(server, fresh_app, "csrf")
    requester = client(server, REQUESTER, fresh_app)
    try:
        ready = requester.submit(submission("csrf-ready", "send", {"n": 1}))[0].workload_id
    finally:
        requester.close()
    input_hash = state_of(server, fresh_app, held).input_hash
    offline, page = signed_in_page(confined, server, fresh_app)
    own = page.locator("form.signout input[name=csrf]").get_attribute("value")
    assert own
    other_session = signed_in(server, approver_token(server, fresh_app))
    try:
        foreign = form_token(other_session.get("/ui/").text)  # another session's token
    finally:
        other_session.close()
    assert foreign != own

    decide = f"{server.url}/ui/approvals/{held}/decision"
    cancel = f"{server.url}/ui/workloads/{ready}/cancel"
    decision: dict[str, str | float | bool] = {"input_hash": input_hash, "outcome": "approved"}
    refused = [
        page.request.post(decide, form=decision),
        page.request.post(cancel, form={}),
        page.request.post(decide, form={**decision, "csrf": ""}),
        page.request.post(decide, form={**decision, "csrf": foreign}),
        page.request.post(cancel, form={"csrf": foreign}),
        page.request.post(cancel, form={"csrf": own}, headers={"Origin": "http://evil.example"}),
        page.request.post(  # the token given twice
            decide,
            data=urlencode([*decision.items(), ("csrf", own), ("csrf", own)]),
            headers={"Content-Type": "application/x-www-form-urlencoded"},
        ),
    ]
    for answer in refused:
        assert answer.status == 403, (answer.url, answer.status, answer.text()[:500])
        assert "Not allowed" in answer.text()
    assert "the form&#39;s token is missing or not this session&#39;s" in refused[0].text()
    assert "posted from another site" in refused[5].text()

    assert state_of(server, fresh_app, held).state is WorkloadState.AWAITING_APPROVAL
    assert state_of(server, fresh_app, ready).state is WorkloadState.READY

    # With its token, the same post is done.
    done = page.request.post(cancel, form={"csrf": own})
    assert done.status == 200 and done.url.endswith("?done=cancelled")
    assert state_of(server, fresh_app, ready).state is WorkloadState.CANCELLED
    assert offline.outside == []


# --- 10. signing out -----------------------------------------------------------------------


def test_signing_out_ends_the_session_everywhere(server: Server, confined: Confined) -> None:
    offline, page = signed_in_page(confined, server)
    (old,) = [c for c in page.context.cookies() if c["name"] == "feltdb_session"]
    csrf = page.locator("form.signout input[name=csrf]").get_attribute("value")
    # The cookie's value in another browser: it is the session while the session lasts.
    replay = confined(server.url)
    replay.page.context.add_cookies(
        [
            {
                "name": old["name"],
                "value": old["value"],
                "domain": old["domain"],
                "path": old["path"],
                "httpOnly": True,
                "sameSite": "Strict",
            }
        ]
    )
    replay.page.goto(f"{server.url}/ui/")
    expect(replay.page.locator("header .who")).to_have_text("human:ada · t/shop")

    page.get_by_role("button", name="Sign out").click()
    expect(page).to_have_url(f"{server.url}/ui/login?signed_out")
    expect(page.locator("main .notice")).to_have_text("You are signed out.")
    assert "feltdb_session" not in {c["name"] for c in page.context.cookies()}
    page.goto(f"{server.url}/ui/")
    expect(page).to_have_url(f"{server.url}/ui/login?next=/ui/")

    # The same cookie, replayed after the sign-out, is refused.
    assert old["value"] in {c["value"] for c in replay.page.context.cookies()}
    replay.page.goto(f"{server.url}/ui/workloads?state=READY")
    expect(replay.page).to_have_url(f"{server.url}/ui/login?next=/ui/workloads%3Fstate%3DREADY")
    expect(replay.page.locator("#token")).to_be_visible()
    posted = replay.page.request.post(f"{server.url}/ui/logout", form={"csrf": csrf or ""})
    assert posted.status == 401
    assert offline.outside == replay.outside == []
    assert offline.console_errors == []


# --- 11. a phone's width -------------------------------------------------------------------


def test_every_page_fits_a_phone(server: Server, seeded: Seeded, confined: Confined) -> None:
    signed_out = confined(server.url)
    signed_out.page.set_viewport_size(PHONE)
    signed_out.page.goto(f"{server.url}/ui/login")
    assert no_horizontal_overflow(signed_out.page), "sign-in"
    assert off_screen(signed_out.page, "main h1, #token, #sign-in button") == []

    offline, page = signed_in_page(confined, server)
    page.set_viewport_size(PHONE)
    pages = {
        "/ui/": "#counts",
        "/ui/workloads": "#workloads",
        f"/ui/workloads/{seeded.dead[0]}": "#attempt-table",
        f"/ui/workloads/{seeded.script}": "#input-json",
        f"/ui/workloads/{seeded.succeeded[0]}": "#result-json",
        "/ui/approvals": "article.approval",
        "/ui/dead-letters": "#dead-letters",
        "/ui/audit": "#audit",
    }
    overflowing = []
    for path, content in pages.items():
        page.goto(f"{server.url}{path}")
        expect(page.locator(content).first).to_be_visible()
        if not no_horizontal_overflow(page):
            overflowing.append((path, off_screen(page, "main *")))
        # Usable: the navigation, the heading and every control are on the screen.
        assert off_screen(page, CONTROLS) == [], path
    assert overflowing == []

    page.goto(f"{server.url}/ui/approvals")
    article = page.locator("article.approval").first
    for control in (
        article.get_by_role("button", name="Approve"),
        article.get_by_label("Reason for rejecting"),
        article.get_by_role("button", name="Reject"),
    ):
        control.scroll_into_view_if_needed()
        expect(control).to_be_in_viewport(ratio=1)  # whole, once scrolled to
    assert offline.outside == []
    assert offline.console_errors == []


# --- 12. by keyboard alone -----------------------------------------------------------------


def test_a_rejection_by_keyboard_alone(server: Server, fresh_app: str, confined: Confined) -> None:
    (workload_id,) = held_in(server, fresh_app, "keyboard")
    offline, page = signed_in_page(confined, server, fresh_app)
    page.goto(f"{server.url}/ui/approvals")
    expect(page.locator("article.approval")).to_have_count(1)

    def focused() -> dict[str, str]:
        found: dict[str, str] = page.evaluate(
            "({id: document.activeElement.id, tag: document.activeElement.tagName,"
            " text: document.activeElement.textContent.trim()})"
        )
        return found

    for _ in range(40):
        page.keyboard.press("Tab")
        if focused()["id"] == "reason-1":
            break
    else:
        pytest.fail("Tab never reached the reason for rejecting")
    page.keyboard.type("not by keyboard either")
    page.keyboard.press("Tab")
    assert focused() == {"id": "", "tag": "BUTTON", "text": "Reject"}
    with page.expect_navigation(url=re.compile(r"outcome=rejected")):
        page.keyboard.press("Enter")
    expect(page.locator("#decided")).to_have_text(re.compile(rf"^{workload_id} was rejected by "))

    after = state_of(server, fresh_app, workload_id)
    assert after.state is WorkloadState.REJECTED
    assert decision_of(after).reason == "not by keyboard either"
    assert decision_of(after).decided_by == APPROVER
    assert offline.outside == []
    assert offline.console_errors == []


# --- operators' actions and the audit --------------------------------------------------------


def test_an_operator_retries_and_cancels_from_the_pages(
    server: Server, fresh_app: str, confined: Confined
) -> None:
    mine = seed(server, fresh_app)
    offline, page = signed_in_page(confined, server, fresh_app)
    page.goto(f"{server.url}/ui/dead-letters")
    rows = page.locator("#dead-letters tbody tr")
    expect(rows).to_have_count(2)
    expect(rows.first).to_contain_text("the mail relay refused the message")
    expect(rows.first).to_contain_text("1 of 1")

    first, second = mine.dead
    page.get_by_label(f"Retry {first}").check()
    page.locator("#dead-reason").fill("the relay is back")
    page.get_by_role("button", name="Retry the chosen").click()
    expect(page.locator("#outcomes")).to_contain_text(f"{first}: re-armed")
    expect(page.locator("#dead-letters tbody tr")).to_have_count(1)
    assert state_of(server, fresh_app, first).state is WorkloadState.READY

    page.goto(f"{server.url}/ui/workloads/{second}")
    page.locator("#retry-reason").fill("once more")
    page.get_by_role("button", name="Retry", exact=True).click()
    expect(page).to_have_url(f"{server.url}/ui/workloads/{second}?done=retried")
    expect(page.locator("main .notice")).to_have_text("Re-armed: it is READY for a worker again.")
    expect(page.locator("#history > li").last.locator("strong")).to_have_text("workload.ready")
    assert state_of(server, fresh_app, second).state is WorkloadState.READY

    page.goto(f"{server.url}/ui/workloads/{mine.ready[0]}")
    page.get_by_role("button", name="Cancel this workload").click()
    expect(page.locator("main .notice")).to_have_text("Cancelled.")
    expect(page.locator("#facts")).to_contain_text("cancelled")
    expect(page.get_by_role("button", name="Cancel this workload")).to_have_count(0)
    assert state_of(server, fresh_app, mine.ready[0]).state is WorkloadState.CANCELLED
    assert offline.outside == []
    assert offline.console_errors == []


def test_the_audit_filters_and_verifies(server: Server, seeded: Seeded, confined: Confined) -> None:
    offline, page = signed_in_page(confined, server)
    page.get_by_role("link", name="Audit", exact=True).click()
    revisions = [int(t) for t in page.locator("#audit tbody td:first-child").all_inner_texts()]
    assert len(revisions) > 1 and revisions == sorted(revisions, reverse=True)

    dead = seeded.dead[0]
    page.locator("#a-workload").fill(dead)
    with page.expect_navigation():
        page.get_by_role("button", name="Filter").click()
    assert query_of(page)["workload"] == [dead]
    rows = page.locator("#audit tbody tr")
    assert set(rows.locator("td:nth-child(4)").all_inner_texts()) == {dead}
    expect(rows.locator("td:nth-child(6)")).to_have_text(
        ["dead letter", "running", "claimed", "ready"]
    )

    page.locator("#a-workload").fill("")
    page.locator("#a-subject").fill("worker:w1")
    with page.expect_navigation():
        page.get_by_role("button", name="Filter").click()
    actors = page.locator("#audit tbody td:nth-child(5)").all_inner_texts()
    assert actors and set(actors) == {"worker:w1"}
    expect(page.locator("#a-subject")).to_have_value("worker:w1")

    page.get_by_role("button", name="Verify the chain").click()
    expect(page.locator("#verification")).to_contain_text("Verified: the chain holds")
    assert offline.outside == []
    assert offline.console_errors == []


# --- 13. screenshots -----------------------------------------------------------------------


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == PNG_SIGNATURE, f"{path} is not a PNG"
    assert data[12:16] == b"IHDR"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def test_screenshots_of_every_page(
    server: Server, seeded: Seeded, confined: Confined, tmp_path: Path
) -> None:
    folder = DOCS_SCREENSHOTS if WRITE_DOCS else tmp_path
    folder.mkdir(parents=True, exist_ok=True)
    started = time.time()
    signed_out = confined(server.url)
    signed_out.page.set_viewport_size(DESKTOP)
    signed_out.page.goto(f"{server.url}/ui/login")
    signed_out.page.screenshot(path=folder / "sign-in.png", full_page=True)

    offline, page = signed_in_page(confined, server)
    page.set_viewport_size(DESKTOP)
    shots = {
        "overview": "/ui/",
        "workloads": "/ui/workloads",
        "workload": f"/ui/workloads/{seeded.dead[0]}",
        "approvals": "/ui/approvals",
        "dead-letters": "/ui/dead-letters",
        "workers": "/ui/workers",
        "audit": "/ui/audit",
    }
    for name, path in shots.items():
        page.goto(f"{server.url}{path}")
        if name == "audit":
            page.get_by_role("button", name="Verify the chain").click()
            expect(page.locator("#verification")).to_be_visible()
        page.screenshot(path=folder / f"{name}.png", full_page=True)

    for name in [*shots, "sign-in"]:
        written = folder / f"{name}.png"
        assert written.stat().st_mtime >= started - 1, f"{written} was not written now"
        width, height = png_size(written)
        assert width == DESKTOP["width"] and height >= DESKTOP["height"], (name, width, height)
    assert offline.outside == signed_out.outside == []
    assert offline.console_errors == signed_out.console_errors == []
