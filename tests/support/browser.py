"""Pages confined to the server under test, for the browser tests (``tests/browser``)."""

from __future__ import annotations

from dataclasses import dataclass, field

from playwright.sync_api import ConsoleMessage, Page, Route


@dataclass
class OfflinePage:
    """A page that may reach ``origin`` only, and what it tried beyond it or complained of."""

    page: Page
    origin: str
    outside: list[str] = field(default_factory=list)
    """Requests to anywhere but ``origin``, aborted."""
    console_errors: list[str] = field(default_factory=list)
    """The console's errors (a Content-Security-Policy violation is one)."""

    def route(self, route: Route) -> None:
        url = route.request.url
        if url == self.origin or url.startswith(self.origin + "/"):
            route.continue_()
        else:
            self.outside.append(url)
            route.abort()

    def console(self, message: ConsoleMessage) -> None:
        if message.type == "error":
            self.console_errors.append(message.text)
