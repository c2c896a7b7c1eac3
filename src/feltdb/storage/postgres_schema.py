"""The schema of the PostgreSQL backend: the numbered migrations of
``sql/postgres/migrations/``, applied in order, each once, however many processes open the
database at the same time. :mod:`feltdb.storage.postgres` does the rest.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import psycopg
from psycopg.rows import TupleRow

from feltdb.storage.base import storage_failure
from feltdb.storage.sql import load_migrations, load_queries

__all__ = ["MIGRATION_LOCK_KEY", "QUERIES", "SCHEMA_VERSION", "migrate"]

QUERIES: Final = load_queries("postgres")
"""Every statement the PostgreSQL backend runs, by name (``sql/postgres/queries.sql``)."""

_MIGRATIONS: Final = load_migrations("postgres")

SCHEMA_VERSION: Final = _MIGRATIONS[-1].version
"""The newest schema this release knows: the number of its last migration."""

MIGRATION_LOCK_KEY: Final = 0x66656C74_6D696772
"""The ``pg_advisory_xact_lock`` key held while migrating: ``"feltmigr"`` in ASCII."""


def migrate(target: str, conninfo: str, kwargs: Mapping[str, Any]) -> None:
    """Apply the migrations the database lacks, each once, whoever else opens it."""
    with psycopg.connect(conninfo, **kwargs) as connection:
        if _schema_version(target, connection) == SCHEMA_VERSION:
            return
        with connection.transaction():
            # Two processes may open one new database at once: the lock makes the
            # second wait, and then find the migrations done. It is released when the
            # transaction ends, also if the process dies holding it.
            connection.execute(QUERIES["migration_lock"], {"key": MIGRATION_LOCK_KEY})
            connection.execute(QUERIES["create_migrations_table"])
            applied = _checked_version(target, connection.execute(QUERIES["schema_version"]))
            for migration in _MIGRATIONS[applied:]:
                # A script of several statements, run by the simple query protocol (it
                # has no parameters); never prepared.
                connection.execute(migration.script, prepare=False)
                connection.execute(QUERIES["record_migration"], {"version": migration.version})


def _schema_version(target: str, connection: psycopg.Connection[TupleRow]) -> int:
    if not connection.execute(QUERIES["migrations_table_exists"]).fetchall()[0][0]:
        return 0
    return _checked_version(target, connection.execute(QUERIES["schema_version"]))


def _checked_version(target: str, cursor: psycopg.Cursor[TupleRow]) -> int:
    version: int = cursor.fetchall()[0][0]
    if version > SCHEMA_VERSION:
        raise storage_failure(
            f"PostgreSQL store {target} was migrated by a newer feltdb (schema {version}); "
            f"this feltdb knows schema {SCHEMA_VERSION} at most: upgrade feltdb to open it"
        )
    return version
