"""The security suite: each test is an attack that once worked (issue 9), made against a
real ``feltdb serve`` process on each backend (see :mod:`support.server_fixtures`), or
against the library where the hole was the library's.
"""

from support.server_fixtures import app, backend, http, server

__all__ = ["app", "backend", "http", "server"]
