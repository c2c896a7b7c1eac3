"""The logging options that long-running commands share (``serve``, ``worker``).

Typer validates ``--log-level`` against :class:`LogLevel`, so an unknown level is a usage
error (exit 2) before anything starts.
"""

from __future__ import annotations

import enum
from typing import Annotated, Any

import typer


class LogLevel(enum.StrEnum):
    """The least severe level logged."""

    DEBUG = "debug"
    INFO = "info"
    WARNING = "warning"
    ERROR = "error"
    CRITICAL = "critical"


LogLevelOption = Annotated[
    LogLevel,
    typer.Option(case_sensitive=False, help="The least severe level logged."),
]
LogJsonOption = Annotated[
    bool,
    typer.Option(
        "--log-json",
        help="Log one JSON object per line (ts, level, logger, message; a server's access "
        "records add method, path, status, duration_ms) instead of human-readable lines.",
    ),
]


def configure_logging(*, json_lines: bool, level: LogLevel) -> dict[str, Any]:
    """Send every feltdb (and uvicorn) logger to stderr at ``level``; the dictConfig used."""
    import logging.config

    # Imported here: the server package (FastAPI) is slow to import.
    from feltdb.server.logs import logging_config

    config = logging_config(json_lines=json_lines, level=level.value)
    logging.config.dictConfig(config)
    return config
