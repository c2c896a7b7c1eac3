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
        },
    }
