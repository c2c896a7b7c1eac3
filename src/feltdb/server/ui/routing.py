"""How the dashboard answers what it refuses: as pages, never as the API's JSON.

Every dashboard route is a :class:`PageRoute`: a refusal raised anywhere in it (the store's
``WorkloadError``, a missing session, a forged form) is answered by a page that says what
happened, with the status the API would answer (:func:`~feltdb.server.errors.status_for`).
A page needing a session redirects to the sign-in page (and back afterwards); a form
post without one is refused ``401``, since a post is never replayed after a redirect.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Coroutine
from typing import Any
from urllib.parse import quote

from fastapi import Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import RedirectResponse, Response
from fastapi.routing import APIRoute
from starlette.exceptions import HTTPException

from feltdb.errors import WorkloadError
from feltdb.server.errors import as_told_to_clients, status_for, store_target
from feltdb.server.logs import loggable_path
from feltdb.server.ui.render import UI_HEADERS, page
from feltdb.server.ui.viewer import FormRefused, SignInRequired, Viewer, viewer_of

log = logging.getLogger("feltdb.server")

TITLES = {
    400: "That request is not valid",
    401: "Sign in first",
    403: "Not allowed",
    404: "Not found",
    409: "Not done",
    413: "Too large",
    422: "That request is not valid",
    500: "Something went wrong",
    503: "The store is unavailable",
}


class PageRoute(APIRoute):
    """A route whose refusals are answered as pages (see the module)."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        """The route's handler, answering its refusals as pages."""
        handle = super().get_route_handler()

        async def answer(request: Request) -> Response:
            try:
                return await handle(request)
            except SignInRequired as missing:
                if request.method == "GET":
                    # Its query is quoted whole (`?`, `&`, `=` too), so none of it is lost.
                    target = quote(request.url.path + _query(request), safe="/")
                    return RedirectResponse(
                        f"/ui/login?next={target}", status_code=303, headers=UI_HEADERS
                    )
                return refusal(request, None, 401, missing.reason or "Sign in, then try again.")
            except FormRefused as refused:
                return refusal(request, await _viewer(request), 403, str(refused))
            except WorkloadError as refused:
                error = as_told_to_clients(refused, store_target(request))
                viewer = await _viewer(request)
                return refusal(request, viewer, status_for(error), f"{error.message}.")
            except HTTPException:
                raise  # the app's own answers (a body over the limit: 413)
            except Exception:
                # Never a traceback to the browser: the log has it, the page says so.
                log.exception("dashboard: %s failed", loggable_path(request.scope))
                return refusal(
                    request, None, 500, "Something went wrong on the server; it is logged."
                )

        return answer


def _query(request: Request) -> str:
    return f"?{request.url.query}" if request.url.query else ""


async def _viewer(request: Request) -> Viewer | None:
    """The request's session if it has one (for the refusal page's navigation)."""
    try:
        return await run_in_threadpool(viewer_of, request)
    except (SignInRequired, WorkloadError):
        return None


def refusal(request: Request, viewer: Viewer | None, status_code: int, message: str) -> Response:
    """The page that says why a request was refused."""
    return page(
        request,
        "refused.html",
        viewer,
        status_code=status_code,
        title=TITLES.get(status_code, "Refused"),
        message=message,
    )
