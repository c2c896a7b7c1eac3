"""The server tests share one real ``feltdb serve`` per backend: see
:mod:`support.server_fixtures`.
"""

from support.server_fixtures import app, backend, http, server

__all__ = ["app", "backend", "http", "server"]
