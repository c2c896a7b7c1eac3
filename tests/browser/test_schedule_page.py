"""The schedules page in Chromium against a real ``feltdb serve``: each schedule with its
next occurrences (in UTC and in its zone's wall time), what it last admitted, and whether
it is paused; photographed (``make screenshots`` writes docs/screenshots/schedules.png).

The module's server and application are the operator views' fixtures.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect
from support.dashboard import APPROVER, client
from support.server import Server
from test_operator_views import app, server, shot, signed_in

from feltdb.auth.capabilities import READ, SCHEDULE, SUBMIT
from feltdb.client import ScheduleSpec

__all__ = ["app", "server"]  # fixtures, used by name

pytestmark = pytest.mark.browser

MANAGER = {"capabilities": {SCHEDULE, SUBMIT, READ}}  # as APPROVER, whom signed_in signs in


def test_the_schedules_page_shows_next_last_and_paused(
    server: Server, app: str, confined: Any, tmp_path: Path
) -> None:
    template = {"definition_id": "nightly-report", "input": {"period": "day"}}
    with client(server, APPROVER, app, capabilities={SCHEDULE, SUBMIT, READ}) as ops:
        ops.create_schedule(
            ScheduleSpec("nightly-report", template, cron="30 2 * * *", timezone="Europe/Berlin")
        )
        ops.create_schedule(
            ScheduleSpec("heartbeat", {**template, "definition_id": "ping"}, interval_s=1,
                         catch_up="all")
        )  # fmt: skip
        ops.create_schedule(ScheduleSpec("quarterly", template, cron="0 6 1 */3 *"))
        ops.pause_schedule("quarterly")
        deadline = time.monotonic() + 30  # the server's maintenance admits heartbeats
        while ops.schedule("heartbeat")["admitted"] == 0:
            assert time.monotonic() < deadline, "the server's scheduler admitted nothing"
            time.sleep(0.2)
        ops.pause_schedule("heartbeat")
        admitted = ops.schedule("heartbeat")

    page = signed_in(confined, server, app, **MANAGER)
    page.get_by_role("link", name="Schedules").click()
    expect(page.locator("h1")).to_have_text("Schedules")

    def row_of(schedule_id: str) -> Any:
        first_cell = page.locator("td:first-child", has_text=schedule_id)
        return page.locator("#schedules tbody tr", has=first_cell)

    nightly = row_of("nightly-report")
    expect(nightly).to_contain_text("cron 30 2 * * * (Europe/Berlin)")
    expect(nightly.locator("li")).to_have_count(3)
    expect(nightly.locator("li").first).to_contain_text("(02:30 Europe/Berlin)")
    expect(nightly).to_contain_text("0 admitted")
    expect(nightly.locator("td").last).to_have_text("No")
    beat = row_of("heartbeat")
    expect(beat).to_contain_text("every 1 s")
    expect(beat).to_contain_text(f"{admitted['admitted']} admitted")
    expect(beat.locator("td").last).to_have_text("Paused")
    link = beat.get_by_role("link")
    expect(link).to_have_attribute("href", f"/ui/workloads/{admitted['last_workload_id']}")
    expect(row_of("quarterly").locator("td").last).to_have_text("Paused")
    shot(page, "schedules", tmp_path)
    link.click()
    expect(page.locator("main")).to_contain_text("schedule:heartbeat")


def test_a_grant_without_schedule_manage_is_not_offered_the_page(
    server: Server, app: str, confined: Any
) -> None:
    page = signed_in(confined, server, app, capabilities={READ})
    expect(page.get_by_role("link", name="Workloads")).to_be_visible()
    expect(page.get_by_role("link", name="Schedules")).to_have_count(0)
    page.goto(f"{server.url}/ui/schedules")
    expect(page.locator("main")).to_contain_text("schedule:manage")
