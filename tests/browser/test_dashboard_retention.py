"""The overview's retention box in a real browser, over a ``feltdb serve --retain`` whose
maintenance loop is held an hour away: what its next pass will remove of the viewer's
application, counted and dated, while the work is still there to count.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import msgspec
import pytest
from playwright.sync_api import Page, expect
from support.dashboard import APPROVER
from support.factories import SIGNER, make_request
from support.finished import finish_one
from support.server import Server, serve

from feltdb import ResourceScope, ResourceScopeKind, WorkloadStore
from feltdb.fields import instant_text
from feltdb.work.retention import DAY

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    # The loop's first pass runs at start, the next an hour later: work made after the
    # start waits to be pruned, for the overview to tell.
    home = tmp_path_factory.mktemp("retention-dashboard")
    yield from serve(home, None, "--retain", "SUCCEEDED=7d", "--maintenance-interval", "3600")


def finished(server: Server, application: str, keys: list[str], at: int) -> list[str]:
    """Work of ``application`` (tenant ``t``) run to success at ``at``, in the server's
    store behind its back."""
    everything = ResourceScope(
        kind=ResourceScopeKind.WORKLOAD, uri=f"flow://{application}/workloads/*"
    )
    grant = msgspec.structs.replace(
        make_request().authorization_snapshot.grant,
        **{"application_id": application, "resources": (everything,)},
    )
    fields = {"application_id": application, "authorization_snapshot": SIGNER.sign(grant)}
    with WorkloadStore.open(server.target) as store:
        return [finish_one(store, key, at, **fields) for key in keys]


def overview(confined: Any, server: Server, application: str) -> Page:
    page: Page = confined(server.url).page
    page.goto(f"{server.url}/ui/login")
    page.locator("#token").fill(server.token(application, subject=APPROVER))
    page.get_by_role("button", name="Sign in").click()
    expect(page).to_have_url(f"{server.url}/ui/")
    return page


def test_the_overview_says_what_retention_will_remove_next(server: Server, confined: Any) -> None:
    application = f"kept-{uuid.uuid4().hex[:8]}"
    now = int(time.time())
    oldest = now - 9 * DAY
    finished(server, application, ["a"], oldest)
    finished(server, application, ["b"], now - 8 * DAY)
    finished(server, application, ["young"], now - DAY)
    finished(server, f"other-{uuid.uuid4().hex[:8]}", ["theirs"], oldest)  # not this viewer's

    page = overview(confined, server, application)
    said = page.locator("#retention-next")
    expect(said).to_have_text(
        f"Retention will remove next: 2 finished workloads (the oldest finished "
        f"{instant_text(oldest)})."
    )
    help_text = page.locator("section[aria-labelledby=retention] p.help")
    expect(help_text).to_contain_text("SUCCEEDED 7d")
    expect(help_text).to_contain_text("DEAD_LETTER 90d")


def test_nothing_due_is_said_as_such(server: Server, confined: Any) -> None:
    application = f"young-{uuid.uuid4().hex[:8]}"
    finished(server, application, ["young"], int(time.time()))
    page = overview(confined, server, application)
    expect(page.locator("#retention-next")).to_have_text(
        "Retention will remove nothing yet: no finished work is past its age."
    )
