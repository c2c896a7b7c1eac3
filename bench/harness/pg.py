"""Fresh PostgreSQL databases for each scenario (created empty, dropped afterwards)."""

from __future__ import annotations

import itertools
import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import urlsplit, urlunsplit

import psycopg
from psycopg import sql

_numbers = itertools.count(1)
_prefix = f"bench_{uuid.uuid4().hex[:6]}"


def admin_url() -> str | None:
    return os.environ.get("FELTDB_TEST_PG") or None


def with_database(url: str, database: str) -> str:
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path=f"/{database}"))


def _execute(url: str, statement: sql.Composable) -> None:
    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute(statement)


@contextmanager
def fresh_database(admin: str, label: str) -> Iterator[str]:
    """The URL of a new, empty database; dropped when the block ends."""
    name = f"{_prefix}_{next(_numbers)}_{label}"[:63]
    _execute(admin, sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        yield with_database(admin, name)
    finally:
        _execute(
            admin, sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )


def settings(admin: str) -> dict[str, str]:
    """The server's version, the settings that decide durability, and autovacuum's."""
    names = (
        "server_version", "fsync", "synchronous_commit", "wal_sync_method", "full_page_writes",
        "autovacuum", "autovacuum_naptime",
    )  # fmt: skip
    with psycopg.connect(admin) as connection:
        return {n: str(connection.execute(f"SHOW {n}").fetchone()[0]) for n in names}  # type: ignore[index]


def scalar(url: str, query: str) -> int:
    with psycopg.connect(url) as connection:
        return int(connection.execute(query).fetchone()[0])  # type: ignore[index]
