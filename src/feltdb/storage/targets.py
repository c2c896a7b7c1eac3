"""Opening a store: a target (a file path or a URL) becomes a :class:`Database`.

Kept apart from the protocol (:mod:`feltdb.storage.base`) so that what only needs the
records and the protocol (the authority's pure modules, the HTTP client) reaches no
backend and no driver; only what opens a store does.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from feltdb.errors import ErrorCode, WorkloadError
from feltdb.storage.base import Database
from feltdb.storage.sqlite import SQLiteDatabase

_URL = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.\-]*)://(?P<rest>.*)", re.DOTALL)


def sqlite_path(target: str | os.PathLike[str]) -> Path | None:
    """The SQLite file ``target`` names (a file path, ``sqlite:///relative/path`` or
    ``sqlite:////absolute/path``: the path is what follows the third slash); ``None`` for a
    PostgreSQL URL.

    Raises:
        WorkloadError: ``WORKLOAD_INVALID`` for a URL of another scheme or a malformed
            ``sqlite:`` URL.
    """
    if isinstance(target, os.PathLike):
        return Path(target)
    url = _URL.fullmatch(target)
    if url is None:
        return Path(target)
    scheme = url["scheme"].lower()
    if scheme == "sqlite":
        rest = url["rest"]
        # As in SQLAlchemy: sqlite://<host>/<path> with an empty host, so the path is what
        # follows the third slash; a fourth slash makes it absolute.
        if not rest.startswith("/") or len(rest) == 1:
            raise WorkloadError(
                ErrorCode.WORKLOAD_INVALID,
                f"a SQLite URL is sqlite:///relative/path or sqlite:////absolute/path, "
                f"not {target!r}",
            )
        if "?" in rest or "#" in rest:
            raise WorkloadError(
                ErrorCode.WORKLOAD_INVALID,
                f"SQLite URL options are not supported: {target!r}",
            )
        return Path(rest[1:])
    if scheme in ("postgresql", "postgres") or scheme.startswith("postgresql+"):
        return None
    raise WorkloadError(
        ErrorCode.WORKLOAD_INVALID,
        f"unsupported storage URL scheme {url['scheme']!r}: use a file path, sqlite:///path "
        f"or postgresql://",
    )


def open_database(target: str | os.PathLike[str]) -> Database:
    """Open the store at ``target``.

    ``target`` is a file path, or ``sqlite:///relative/path`` or ``sqlite:////absolute/path``
    (see :func:`sqlite_path`): all open a SQLite store, created if new.
    ``postgresql://…`` and ``postgres://…`` (also ``postgresql+psycopg://…``) open a store
    in that PostgreSQL database, migrating its schema first (see
    :class:`~feltdb.storage.postgres.PostgresDatabase`).

    Raises:
        WorkloadError: ``WORKLOAD_INVALID`` for a URL of another scheme or a malformed
            ``sqlite:`` URL; ``WORKLOAD_STORAGE_FAILURE`` for a store that cannot be opened
            (see :class:`~feltdb.storage.sqlite.SQLiteDatabase` and
            :class:`~feltdb.storage.postgres.PostgresDatabase`).
    """
    path = sqlite_path(target)
    if path is not None:
        # A plain path is opened exactly as given (its error messages name it so).
        plain = isinstance(target, os.PathLike) or _URL.fullmatch(target) is None
        return SQLiteDatabase(target if plain else path)
    # Imported here: psycopg costs a fifth of a second to import, which every command of
    # an embedded store would pay for nothing (issue 10, point 12).
    from feltdb.storage.postgres import PostgresDatabase

    text = os.fspath(target)
    scheme = text.split("://", 1)[0].lower()
    # libpq knows postgresql:// and postgres://; a SQLAlchemy-style driver suffix
    # (postgresql+psycopg://) names the driver, which is always psycopg here.
    return PostgresDatabase("postgresql://" + text.split("://", 1)[1] if "+" in scheme else text)
