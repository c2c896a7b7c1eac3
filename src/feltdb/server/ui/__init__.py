"""The web dashboard at ``/ui/``: server-rendered pages over the same store, policy and
scopes as the API, for the people who approve work and the operators who chase it.

- :mod:`.viewer`: who is looking (the session cookie verified into a caller) and the
  checks every form post passes;
- :mod:`.signin`: signing in (a pasted token, or a one-time link) and out;
- :mod:`.pages`: the overview, the workloads, a workload, the approval inbox, the dead
  letters and the audit;
- :mod:`.actions`: cancel, retry, decide and verify, as form posts;
- :mod:`.render`, :mod:`.routing`, :mod:`.chart`: templates and headers, refusals as pages,
  the overview's SVG chart.

The pages work without JavaScript; ``static/ui.js`` (the project's own, served from here)
only posts a sign-in link's ticket, refreshes the workloads table and sorts a page's rows.
No CDN, no build step: the dashboard works offline.
"""

from __future__ import annotations

from typing import Final

from fastapi import FastAPI, HTTPException
from fastapi.responses import FileResponse, RedirectResponse

from feltdb.server.ui import actions, pages, schedule_page, signin
from feltdb.server.ui.render import HERE, UI_HEADERS

__all__ = ["add_ui"]

STATIC: Final = {
    "ui.css": "text/css; charset=utf-8",
    "ui.js": "text/javascript; charset=utf-8",
}
"""The files of ``static/`` served under ``/ui/static/``, with their media types."""


def add_ui(app: FastAPI) -> None:
    """Serve the dashboard on ``app`` at ``/ui/`` (``/ui`` and the server's root, ``/``,
    redirect there: a browser pointed at the server lands on the dashboard).
    """

    @app.get("/ui", include_in_schema=False)
    def ui_root() -> RedirectResponse:
        return RedirectResponse("/ui/", status_code=308, headers=UI_HEADERS)

    @app.get("/", include_in_schema=False)
    def server_root() -> RedirectResponse:
        return RedirectResponse("/ui/", status_code=307, headers=UI_HEADERS)

    @app.get("/ui/static/{name}", include_in_schema=False)
    def ui_static(name: str) -> FileResponse:
        media_type = STATIC.get(name)
        if media_type is None:
            raise HTTPException(404, f"no such file of the dashboard: {name!r}")
        headers = {**UI_HEADERS, "Cache-Control": "no-cache"}
        return FileResponse(HERE / "static" / name, media_type=media_type, headers=headers)

    for module in (signin, pages, actions, schedule_page):
        app.include_router(module.router)
