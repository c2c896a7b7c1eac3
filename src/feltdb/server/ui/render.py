"""Rendering the dashboard's pages: one Jinja2 environment (every value escaped), the
filters its templates use, and the headers every page is answered with.

Nothing inline is ever allowed to run: the pages' Content-Security-Policy
(:data:`UI_CSP`) takes scripts and styles from the server's own files only, so a value that
slipped through unescaped still could not execute. Pages are never cached (they hold what
one grant may see), never framed, and send no ``Referer`` to other sites.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Final

from fastapi import Request
from fastapi.responses import HTMLResponse
from jinja2 import Environment, FileSystemLoader, select_autoescape

from feltdb import __version__
from feltdb.fields import instant_text
from feltdb.records.summary import WorkloadSummary
from feltdb.server.ui.viewer import Viewer
from feltdb.work.explanations import ended_because

HERE: Final = Path(__file__).parent
UI_CSP: Final = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
)
"""No inline script or style, nothing from elsewhere; forms post to this server only."""
UI_HEADERS: Final = {
    "Content-Security-Policy": UI_CSP,
    "Cache-Control": "no-store",
    # Not no-referrer: under it a browser posts a form with `Origin: null`, which the form
    # checks must refuse (an opaque origin is any site's); same-origin keeps the real one.
    "Referrer-Policy": "same-origin",
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
}
"""The headers of every page and file of the dashboard."""


def pretty_json(value: Any) -> str:
    """``value`` as indented JSON, for a ``<pre>`` (escaped by the template)."""
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False)


def input_preview(summary: WorkloadSummary) -> str:
    """A listed workload's input for a ``<pre>``: indented when the summary holds all of
    it, else the start its summary holds, ending ``…``.
    """
    if summary.input_chars <= len(summary.input_preview):
        return pretty_json(json.loads(summary.input_preview))
    return summary.input_preview + "…"


def evidence_value(value: str, name: str) -> str:
    """An event's evidence value as shown: an instant (a name ending ``_at``) in words,
    never as raw seconds; anything else as it is.
    """
    if name.endswith("_at"):
        try:
            return instant(int(value))
        except ValueError:
            return value
    return value


def instant(seconds: float | None) -> str:
    """A unix time as :func:`~feltdb.fields.instant_text` writes it (``—`` for none)."""
    return "—" if seconds is None else instant_text(seconds)


def duration(seconds: float | None) -> str:
    """A span of seconds as ``1h 2m``, ``3m 4s`` or ``5s`` (``—`` for none)."""
    if seconds is None:
        return "—"
    whole = max(0, int(seconds))
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h {minutes}m"
    return f"{minutes}m {secs}s" if minutes else f"{secs}s"


def label(state: Any) -> str:
    """A state as words (``DEAD_LETTER`` → ``dead letter``): never colour alone."""
    text = str(getattr(state, "value", state))
    return text.replace("_", " ").lower()


templates: Final = Environment(
    loader=FileSystemLoader(HERE / "templates"),
    autoescape=select_autoescape(default=True, default_for_string=True),
    trim_blocks=True,
    lstrip_blocks=True,
)
templates.filters.update(
    json=pretty_json,
    input_preview=input_preview,
    instant=instant,
    duration=duration,
    label=label,
    evidence_value=evidence_value,
    ended_because=ended_because,
)


def page(
    request: Request,
    template: str,
    viewer: Viewer | None,
    *,
    status_code: int = 200,
    **context: Any,
) -> HTMLResponse:
    """``template`` rendered for ``viewer`` (``None``: signed out) with ``context``."""
    body = templates.get_template(template).render(
        request=request, viewer=viewer, version=__version__, path=request.url.path, **context
    )
    return HTMLResponse(body, status_code=status_code, headers=UI_HEADERS)
