"""``/docs``: Swagger UI over the server's own ``/openapi.json``, from files it serves
itself, so the page works offline.

FastAPI's own ``/docs`` and ``/redoc`` load their scripts and styles from a CDN, and render
nothing on a machine that cannot reach it. Here the page is static HTML naming three local
files: Swagger UI's stylesheet and bundle (from the ``swagger-ui-bundle-v2`` package, Swagger
UI 5: the first major version that reads OpenAPI 3.1, which FastAPI writes) and an
initializer of ours. Nothing inline, so the page's Content-Security-Policy allows scripts
and styles from the server alone.

Only the files :data:`ASSETS` names are served, by name: nothing else of the package (its
demo page loads a petstore schema from the internet), and no path is ever joined from the
request.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

from fastapi import FastAPI, HTTPException
from fastapi.responses import FileResponse, HTMLResponse, Response
from swagger_ui_bundle import swagger_ui_path

__all__ = ["ASSETS", "DOCS_CSP", "add_docs"]

SWAGGER_UI: Final = Path(str(swagger_ui_path))
"""The directory of Swagger UI's distribution files."""

ASSETS: Final = {
    "swagger-ui.css": "text/css; charset=utf-8",
    "swagger-ui-bundle.js": "text/javascript; charset=utf-8",
    "favicon-32x32.png": "image/png",
}
"""The files of :data:`SWAGGER_UI` served under ``/docs/assets/``, with their media types."""

DOCS_CSP: Final = (
    "default-src 'none'; script-src 'self'; style-src 'self'; "
    "img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; "
    "frame-ancestors 'none'"
)
"""The page's Content-Security-Policy: scripts, styles, data and images from the server
only, nothing inline (Swagger UI styles what it renders through the DOM, which a policy
does not restrict; the browser test sees no violation)."""

_PAGE: Final = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>feltdb API</title>
<link rel="stylesheet" href="/docs/assets/swagger-ui.css">
<link rel="icon" type="image/png" href="/docs/assets/favicon-32x32.png">
</head>
<body>
<div id="swagger-ui"></div>
<script src="/docs/assets/swagger-ui-bundle.js"></script>
<script src="/docs/init.js"></script>
</body>
</html>
"""

_INIT: Final = """window.addEventListener("DOMContentLoaded", function () {
  window.ui = SwaggerUIBundle({
    url: "/openapi.json",
    dom_id: "#swagger-ui",
    deepLinking: true,
    presets: [SwaggerUIBundle.presets.apis],
    layout: "BaseLayout",
  });
});
"""

_CACHED: Final = "public, max-age=3600"
"""The assets change only with the installed package; an hour spares a reload the bytes."""


def add_docs(app: FastAPI) -> None:
    """Serve ``/docs``, ``/docs/init.js`` and ``/docs/assets/{name}`` on ``app`` (which
    must have been built with ``docs_url=None`` and ``redoc_url=None``). No token: the
    page is the schema's, which ``/openapi.json`` serves to anyone.
    """

    @app.get("/docs", include_in_schema=False)
    def docs() -> HTMLResponse:
        return HTMLResponse(_PAGE, headers={"Content-Security-Policy": DOCS_CSP})

    @app.get("/docs/init.js", include_in_schema=False)
    def docs_init() -> Response:
        return Response(_INIT, media_type="text/javascript; charset=utf-8")

    @app.get("/docs/assets/{name}", include_in_schema=False)
    def docs_asset(name: str) -> FileResponse:
        media_type = ASSETS.get(name)
        if media_type is None:
            raise HTTPException(404, f"no such file of the API docs: {name!r}")
        return FileResponse(
            SWAGGER_UI / name, media_type=media_type, headers={"Cache-Control": _CACHED}
        )
