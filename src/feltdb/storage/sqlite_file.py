"""The file of the SQLite backend: its statements, what it says about itself, its schema,
and a write transaction on one connection.

:func:`open_schema` checks a file before feltdb uses it, creating the schema of a new or
empty one (``sql/sqlite/schema.sql``) and upgrading one an older release wrote
(``sql/sqlite/migrations``); :mod:`feltdb.storage.sqlite` does the rest.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final, LiteralString, TypeVar

from feltdb.storage.base import storage_failure
from feltdb.storage.sql import load_migrations, load_queries, load_schema

__all__ = [
    "APPLICATION_ID",
    "QUERIES",
    "SCHEMA_VERSION",
    "describe",
    "is_busy",
    "open_schema",
    "transaction",
]

SCHEMA_VERSION: Final = 7
"""The schema this release reads and writes, kept in the file's ``PRAGMA user_version``.

1: the first release's. 2: ``rows.definition_id`` and its index ``rows_by_definition``.
3: the audit chain (``transactions.row_hashes`` and ``audit_chain``). 4: its fence (a log
entry without row hashes is refused). 5: ``rows.claim_group`` and its partial index
``rows_ready`` (:mod:`feltdb.storage.partitions`). 6: ``rows.waits_on`` and
``rows.waits_for`` (work set aside: :class:`~feltdb.storage.selecting.SetAside`), ``rows_ready``
without it, and ``rows_waiting``. 7: ``rows.environment`` and its index
``rows_by_environment``. A file of an older schema is upgraded
in place when it is opened (``sql/sqlite/migrations``).
"""

APPLICATION_ID: Final = 0x66656C74
"""``PRAGMA application_id`` of a feltdb store: ``"felt"`` in ASCII."""

QUERIES: Final = load_queries("sqlite")
"""Every statement the SQLite backend runs, by name (``sql/sqlite/queries.sql``)."""

_Result = TypeVar("_Result")


def _split_script(script: LiteralString, name: str = "schema.sql") -> list[LiteralString]:
    # executescript() cannot be used for the schema: on Python 3.11 it COMMITs any open
    # transaction before running, which would release the BEGIN IMMEDIATE that makes
    # creating the schema safe against a second process doing the same. So the script is
    # split into statements, with SQLite's own notion of where a statement ends.
    statements: list[LiteralString] = []
    pending: LiteralString = ""
    for line in script.splitlines(keepends=True):
        pending += line
        if sqlite3.complete_statement(pending):
            statement = pending.strip()
            if statement:
                statements.append(statement)
            pending = ""
    if any(line.strip() and not line.strip().startswith("--") for line in pending.splitlines()):
        raise ValueError(f"{name} ends with an incomplete statement: {pending.strip()!r}")
    return statements


_SCHEMA: Final = _split_script(load_schema("sqlite"))
_UPGRADES: Final = [
    (
        migration.version,
        _split_script(migration.script, f"{migration.version:04d}_{migration.name}"),
    )
    for migration in load_migrations("sqlite", first=2)
]
"""The steps from each older schema to the next: ``(version reached, statements)``."""
if _UPGRADES[-1][0] != SCHEMA_VERSION:  # pragma: no cover - a packaging mistake
    raise ValueError(f"the SQLite migrations end at {_UPGRADES[-1][0]}, not {SCHEMA_VERSION}")


def is_busy(error: sqlite3.Error) -> bool:
    """Whether a failed write may be attempted again from the start.

    Only ``SQLITE_BUSY`` (with any extended code): another connection held the lock for
    longer than the busy timeout. The write was rolled back and is self-contained, so
    running it again is safe. Every other error is reported at once.
    """
    # Errors raised by the driver itself (a closed connection, misuse) carry no code.
    code: int | None = getattr(error, "sqlite_errorcode", None)
    return code is not None and code & 0xFF == sqlite3.SQLITE_BUSY


def describe(error: sqlite3.Error) -> str:
    """The driver's message, with SQLite's name of its error code when it has one."""
    name = getattr(error, "sqlite_errorname", None)
    return f"{error} ({name})" if name else str(error)


def transaction(
    connection: sqlite3.Connection, work: Callable[[sqlite3.Connection], _Result]
) -> _Result:
    """``work``'s answer, run in one ``BEGIN IMMEDIATE`` transaction: committed when it
    returns, rolled back when it raises.
    """
    connection.execute(QUERIES["begin_immediate"])
    try:
        result = work(connection)
        connection.execute(QUERIES["commit"])
    except BaseException:
        # SQLite rolls some failures back by itself (a full disk, an I/O error), so
        # only an open transaction is rolled back. A failing ROLLBACK is not reported
        # over the error that caused it; SQLite discards the transaction anyway when
        # the connection is next used or closed.
        if connection.in_transaction:
            with contextlib.suppress(sqlite3.Error):
                connection.execute(QUERIES["rollback"])
        raise
    return result


@dataclass(frozen=True, slots=True)
class _Header:
    """What a file says about itself before feltdb touches it."""

    application_id: int
    user_version: int
    schema_objects: int

    @property
    def empty(self) -> bool:
        return self.application_id == 0 and self.user_version == 0 and self.schema_objects == 0


def _header(connection: sqlite3.Connection) -> _Header:
    # One statement, so one snapshot: read separately, the three could straddle the
    # commit of another process creating the schema (seen in testing: application_id
    # 0 from before it, nine schema objects from after).
    [(application_id, user_version, schema_objects)] = connection.execute(
        QUERIES["store_header"]
    ).fetchall()
    return _Header(application_id, user_version, schema_objects)


def open_schema(target: str, connection: sqlite3.Connection) -> None:
    """Check that the file is a feltdb store of the schema this release reads, creating
    the schema in a new or empty file and upgrading an older one first.

    Raises:
        WorkloadError: ``WORKLOAD_STORAGE_FAILURE`` for a file that is not a SQLite
            database, one of another application, or one of a newer or unknown schema.
        sqlite3.Error: the file cannot be read (the caller translates it).
    """
    try:
        header = _header(connection)
    except sqlite3.DatabaseError as error:
        if getattr(error, "sqlite_errorcode", None) == sqlite3.SQLITE_NOTADB:
            raise storage_failure(
                f"{target} is not a SQLite database, so not a feltdb store ({describe(error)})"
            ) from error
        raise
    if header.empty:
        # A new file returns the pages retention frees to the file system, a bounded
        # number at a time (:mod:`feltdb.storage.reclaiming`). The mode is fixed when the
        # file's first page is written, which BEGIN IMMEDIATE does in an empty file: so it
        # is set before the transaction (inside it, SQLite ignores it).
        connection.execute(QUERIES["auto_vacuum_incremental"]).fetchall()
        # Two processes may open the same new file at once: both see it empty, one
        # gets the write lock first and creates the schema, and the other, once it
        # has the lock, must see that and not create it again.
        header = transaction(connection, _create_schema)
    if header.application_id != APPLICATION_ID:
        raise storage_failure(
            f"{target} is not a feltdb store: it is a SQLite database of another "
            f"application (application_id {header.application_id:#x}, "
            f"{header.schema_objects} schema objects); feltdb will not open it"
        )
    if header.user_version > SCHEMA_VERSION:
        raise storage_failure(
            f"{target} was written by a newer feltdb (schema {header.user_version}); "
            f"this feltdb reads schema {SCHEMA_VERSION}: upgrade feltdb to open it"
        )
    if 1 <= header.user_version < SCHEMA_VERSION:
        # A file an older release wrote: upgraded in place, in one transaction. Two
        # openers may race here as they may to create the schema; the second finds the
        # file upgraded once it has the lock.
        header = transaction(connection, _upgrade_schema)
    if header.user_version != SCHEMA_VERSION:
        raise storage_failure(
            f"{target} is a feltdb store of schema {header.user_version}, which this "
            f"feltdb (schema {SCHEMA_VERSION}) cannot read"
        )


def _upgrade_schema(connection: sqlite3.Connection) -> _Header:
    header = _header(connection)
    if header.application_id != APPLICATION_ID or not (1 <= header.user_version < SCHEMA_VERSION):
        return header
    for version, statements in _UPGRADES:
        if version > header.user_version:
            for statement in statements:
                connection.execute(statement).fetchall()
    return _header(connection)


def _create_schema(connection: sqlite3.Connection) -> _Header:
    header = _header(connection)
    if not header.empty:
        return header
    for statement in _SCHEMA:
        connection.execute(statement).fetchall()
    return _header(connection)
