"""The server's logging: human-readable by default, one JSON object per line on request.

:func:`logging_config` is the ``logging.config.dictConfig`` that ``feltdb serve`` hands to
uvicorn. Both formats carry the same records: uvicorn's own (``uvicorn.error``: startup,
shutdown), feltdb's (``feltdb.*``), and the access log ``feltdb.access``, one record per
request written by :class:`~feltdb.server.metrics.RequestMetrics` (uvicorn's own access log
is turned off so each request is logged once). Logs go to stderr.

A JSON line has ``ts`` (UTC, ISO 8601 with milliseconds), ``level``, ``logger`` and
``message``; an access record adds ``method``, ``path``, ``status`` and ``duration_ms``;
a record with an exception adds ``exc_info`` (the formatted traceback).
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import time
from collections.abc import Mapping
from typing import Any

ACCESS_FIELDS = ("method", "path", "status", "duration_ms")
"""Attributes of an access-log record that a JSON line carries as fields."""


class JsonFormatter(logging.Formatter):
    """Formats a record as one line of JSON."""

    def format(self, record: logging.LogRecord) -> str:  # noqa: D102
        line: dict[str, Any] = {
            "ts": dt.datetime.fromtimestamp(record.created, dt.UTC).isoformat(
                timespec="milliseconds"
            ),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for name in ACCESS_FIELDS:
            if name in record.__dict__:
                line[name] = record.__dict__[name]
        if record.exc_info:
            line["exc_info"] = self.formatException(record.exc_info)
        if record.stack_info:
            line["stack_info"] = self.formatStack(record.stack_info)
        return json.dumps(line, default=str, ensure_ascii=False)


ACCEPT_FAILURE = "socket.accept() out of system resource"
"""What asyncio logs each time it cannot accept a connection (no file descriptor left): as
often as it retries, about every second for every listening socket."""

ACCEPT_FAILURE_EVERY_S = 10.0
"""How often, at most, the log says the server cannot accept connections."""


class AcceptFailuresOnce(logging.Filter):
    """Lets asyncio's "cannot accept" record through once per
    :data:`ACCEPT_FAILURE_EVERY_S` (saying how many were held back), and every other record
    as it is.
    """

    def __init__(self) -> None:
        super().__init__()
        self._said_at = float("-inf")
        self._held_back = 0

    def filter(self, record: logging.LogRecord) -> bool:  # noqa: D102
        if not record.getMessage().startswith(ACCEPT_FAILURE):
            return True
        now = time.monotonic()
        if now - self._said_at < ACCEPT_FAILURE_EVERY_S:
            self._held_back += 1
            return False
        self._said_at = now
        if self._held_back:
            record.msg = f"{record.getMessage()} ({self._held_back} more since it was last said)"
            record.args = None
        self._held_back = 0
        record.exc_info = None  # the same traceback every time: the message says it all
        return True


MAX_LOGGED_PATH_CHARS = 2048
"""The most of a request's path an access-log record keeps (the rest is cut, marked ``…``)."""

_UNPRINTABLE = {code: f"\\x{code:02x}" for code in (*range(0x20), 0x7F)}


def loggable_path(scope: Mapping[str, Any]) -> str:
    """The request's path as the client sent it, percent-escapes left as they were (so a
    ``%0a`` stays three characters and can never start a forged log line), any control
    character escaped, at most :data:`MAX_LOGGED_PATH_CHARS` characters.
    """
    raw = scope.get("raw_path")
    path = raw.decode("latin-1") if isinstance(raw, bytes) else str(scope.get("path", ""))
    path = path.translate(_UNPRINTABLE)
    if len(path) > MAX_LOGGED_PATH_CHARS:
        path = path[:MAX_LOGGED_PATH_CHARS] + "…"
    return path


def logging_config(*, json_lines: bool, level: str = "INFO") -> dict[str, Any]:
    """The dictConfig of ``feltdb serve``: JSON lines when ``json_lines``, else uvicorn's
    human-readable format; every logger at ``level``, to stderr.
    """
    level = level.upper()
    formatter: dict[str, Any] = (
        {"()": JsonFormatter}
        if json_lines
        else {
            "()": "uvicorn.logging.DefaultFormatter",
            "fmt": "%(levelprefix)s %(message)s",
            "use_colors": None,
        }
    )
    handler = {"class": "logging.StreamHandler", "formatter": "main", "stream": "ext://sys.stderr"}
    quiet = {"handlers": ["main"], "level": level, "propagate": False}
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"main": formatter},
        "handlers": {"main": handler},
        "loggers": {
            "uvicorn": quiet,
            "uvicorn.error": {"level": level},
            "uvicorn.access": {"handlers": [], "level": "WARNING", "propagate": False},
            "feltdb": quiet,
            "asyncio": {**quiet, "filters": ["accept_failures"]},
        },
        "filters": {"accept_failures": {"()": AcceptFailuresOnce}},
    }
