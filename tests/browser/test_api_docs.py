"""``/docs`` renders the whole API in a real browser with no network but the server's:
Swagger UI's files are the server's own (no CDN), and the page's Content-Security-Policy
holds (nothing inline; a violation would be a console error).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from support.browser import OfflinePage
from support.server import Server, serve

pytestmark = pytest.mark.browser

METHODS = {"get", "post", "put", "patch", "delete"}


@pytest.fixture(scope="module")
def docs_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    yield from serve(tmp_path_factory.mktemp("docs-server"))


def test_the_api_docs_render_every_operation_offline(
    docs_server: Server, confined: Callable[[str], OfflinePage]
) -> None:
    schema = httpx.get(f"{docs_server.url}/openapi.json", timeout=10).json()
    operations = [
        f"{method.upper()} {path}"
        for path, item in schema["paths"].items()
        for method in item
        if method in METHODS
    ]
    docs = confined(docs_server.url)
    answer = docs.page.goto(f"{docs_server.url}/docs")
    assert answer is not None and answer.status == 200
    policy = answer.headers["content-security-policy"]
    assert "script-src 'self';" in policy and "style-src 'self';" in policy
    assert "unsafe" not in policy
    docs.page.wait_for_selector(".opblock", timeout=20_000)
    shown = [
        f"{block.locator('.opblock-summary-method').inner_text()} "
        f"{block.locator('.opblock-summary-path').inner_text().replace(chr(8203), '')}"
        for block in docs.page.locator(".opblock").all()
    ]
    assert sorted(shown) == sorted(operations)
    assert docs.page.locator(".info .title").inner_text().startswith("feltdb")
    assert docs.outside == []  # nothing was asked of the internet
    assert docs.console_errors == []


def test_only_the_named_assets_are_served(docs_server: Server, tmp_path: Path) -> None:
    with httpx.Client(base_url=docs_server.url, timeout=10) as http:
        assert http.get("/docs/assets/swagger-ui-bundle.js").status_code == 200
        # The package's demo page (which loads a schema from the internet), its other
        # files, and anything that is not a plain name are not served.
        for name in ("index.html", "swagger-initializer.js", "..%2F..%2F__init__.py", "x"):
            answer = http.get(f"/docs/assets/{name}")
            assert answer.status_code == 404, name
            assert answer.json()["error"]["code"] == "NOT_FOUND"
        assert http.get("/redoc").status_code == 404  # FastAPI's, from a CDN: not served
