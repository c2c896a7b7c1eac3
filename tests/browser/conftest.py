"""The browser tests' Chromium: Debian's package (``/usr/lib/chromium/chromium``, or
``FELTDB_CHROMIUM``), driven by Playwright; never a browser build Playwright downloads.

Without it the browser tests are skipped, but failed on CI, where ``make test`` installs it
(``scripts/ensure-chromium``). Every page a test opens may reach the server under test
only: any other request is aborted and recorded, so a page that needs
the internet (a CDN) fails its test (:func:`confined`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, BrowserContext, sync_playwright
from support.browser import OfflinePage
from support.ci import ON_CI

CHROMIUM = Path(os.environ.get("FELTDB_CHROMIUM") or "/usr/lib/chromium/chromium")
"""Read at import: the test environment is stripped of ``FELTDB_*`` variables."""


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """One headless Chromium for a test module. Not for the session: while it runs,
    Playwright's sync API keeps an asyncio loop running in the main thread, and every later
    test that calls ``asyncio.run`` would fail."""
    if not os.access(CHROMIUM, os.X_OK):
        message = f"no Chromium at {CHROMIUM}: sudo apt-get install chromium (or FELTDB_CHROMIUM)"
        if ON_CI:
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    # As root, Chromium refuses to start with its sandbox.
    args = ["--no-sandbox"] if os.geteuid() == 0 else []
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=str(CHROMIUM), args=args)
        yield launched
        launched.close()


@pytest.fixture
def confined(browser: Browser) -> Iterator[Callable[[str], OfflinePage]]:
    """``confined(origin)``: a new page of its own browser context (no cookies shared)
    that may reach ``origin`` (``http://host:port``) only; closed when the test ends."""
    contexts: list[BrowserContext] = []

    def open_page(origin: str) -> OfflinePage:
        context = browser.new_context()
        contexts.append(context)
        offline = OfflinePage(context.new_page(), origin.rstrip("/"))
        offline.page.route("**/*", offline.route)
        offline.page.on("console", offline.console)
        return offline

    yield open_page
    for context in contexts:
        context.close()
