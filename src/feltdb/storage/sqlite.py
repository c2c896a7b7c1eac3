"""The embedded backend: one SQLite file, through the standard library's ``sqlite3``.

The operations are :class:`~feltdb.storage.engine.SQLEngine`'s, over the statements of
``sql/sqlite/queries.sql``; this module connects, keeps the schema (see
:mod:`feltdb.storage.sqlite_file`), runs every write in one ``BEGIN IMMEDIATE``
transaction, and turns driver errors into :class:`WorkloadError`.

Several threads, and several processes, may share one file. Each thread gets its own
connection. SQLite admits one writer at a time; ``BEGIN IMMEDIATE`` takes the write lock
before the first guarded write, so no other writer changes a row between a commit's
statements. Revisions are dense: each commit's is the previous one + 1.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
import weakref
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Final, LiteralString, TypeVar

from feltdb.errors import ErrorCode, WorkloadError
from feltdb.storage.base import storage_failure
from feltdb.storage.canonical import float_free_json
from feltdb.storage.dialect import ErrorTranslation, Session
from feltdb.storage.encoding import invalid
from feltdb.storage.engine import SQLEngine
from feltdb.storage.joined import JoinedSession
from feltdb.storage.sqlite_file import (
    APPLICATION_ID,
    QUERIES,
    SCHEMA_VERSION,
    describe,
    is_busy,
    open_schema,
    transaction,
)

__all__ = ["APPLICATION_ID", "SCHEMA_VERSION", "SQLiteDatabase"]

BUSY_TIMEOUT_MS: Final = 10_000
"""How long one attempt waits for another writer's lock before SQLite gives up."""

WRITE_ATTEMPTS: Final = 3
"""How many times a write is attempted while the store stays locked by other writers."""

_Result = TypeVar("_Result")


class _SQLiteErrors(ErrorTranslation):
    """Driver errors as ``WORKLOAD_STORAGE_FAILURE``; integers too large as invalid input."""

    __slots__ = ("target",)

    def __init__(self, target: str, doing: str) -> None:
        super().__init__(doing)
        self.target = target

    def translated(self, error: BaseException) -> WorkloadError | None:
        """See :meth:`ErrorTranslation.translated`."""
        if isinstance(error, sqlite3.Error):
            return storage_failure(
                f"SQLite store {self.target}: {self.doing} failed: {describe(error)}"
            )
        if isinstance(error, OverflowError):
            # sqlite3 binds integers as signed 64-bit; a larger one is bad input, not a
            # broken store.
            return WorkloadError(
                ErrorCode.WORKLOAD_INVALID,
                f"{self.doing}: an integer is outside the 64-bit range SQLite stores",
            )
        return None


class _Slot:
    """Holds one thread's connection in the thread's locals.

    When the thread ends, its locals are dropped and the finalizer attached to the slot
    closes the connection, so short-lived threads do not leak open files.
    """

    __slots__ = ("__weakref__", "connection")

    def __init__(self, connection: sqlite3.Connection) -> None:
        self.connection = connection


def _release(
    connections: set[sqlite3.Connection], lock: threading.Lock, connection: sqlite3.Connection
) -> None:
    with lock:
        connections.discard(connection)
    connection.close()


class _SQLiteDialect:
    """The :class:`~feltdb.storage.dialect.Dialect` of one SQLite file: a connection per
    thread, ``BEGIN IMMEDIATE`` write transactions retried while other writers hold the
    lock, and the log's lists kept as JSON text.
    """

    queries: Mapping[str, LiteralString] = QUERIES
    no_limit: int | None = -1  # SQLite reads a negative LIMIT as no limit; NULL is an error.
    array_writes: bool = False  # no round trips to save: every batch is written plan by plan

    def __init__(self, target: str, busy_timeout_s: float) -> None:
        self.target = target
        self.busy_timeout_s = busy_timeout_s
        self.connections: set[sqlite3.Connection] = set()
        self._local = threading.local()
        self._lock = threading.Lock()
        self._closed = False

    # --- connections -------------------------------------------------------------------

    def connect(self) -> sqlite3.Connection:
        """A new connection to the file, not yet configured."""
        # isolation_level=None: the driver never opens transactions on its own; every write
        # transaction here is an explicit BEGIN IMMEDIATE. check_same_thread=False only so
        # close() may close the connections of other threads; each connection is otherwise
        # used by the one thread that opened it. timeout is SQLite's busy timeout.
        return sqlite3.connect(
            self.target,
            timeout=self.busy_timeout_s,
            isolation_level=None,
            check_same_thread=False,
            cached_statements=len(QUERIES) + 8,
        )

    def configure(self, connection: sqlite3.Connection) -> None:
        """Set up a connection of a feltdb store: WAL, full sync, foreign keys."""
        self._use_wal(connection)
        connection.execute(QUERIES["synchronous_full"]).fetchall()
        connection.execute(QUERIES["foreign_keys_on"]).fetchall()

    def _use_wal(self, connection: sqlite3.Connection) -> None:
        # WAL is a property of the file: once one opener switched it, the rest only read it.
        # The switch itself needs an exclusive lock and SQLite answers SQLITE_BUSY at once,
        # without its busy handler, when another opener holds any lock (seen when several
        # processes open one new file together), so it is retried within the busy timeout.
        deadline = time.monotonic() + self.busy_timeout_s
        pause = 0.001
        while True:
            try:
                if connection.execute(QUERIES["journal_mode"]).fetchone()[0] != "wal":
                    connection.execute(QUERIES["journal_mode_wal"]).fetchall()
                return
            except sqlite3.OperationalError as error:
                if not is_busy(error) or time.monotonic() >= deadline:
                    raise
                time.sleep(pause)
                pause = min(pause * 2, 0.05)

    def adopt(self, connection: sqlite3.Connection) -> sqlite3.Connection:
        """Make ``connection`` this thread's, closed with the thread or the database."""
        with self._lock:
            if self._closed:
                connection.close()
                raise self._closed_error()
            self.connections.add(connection)
        slot = _Slot(connection)
        weakref.finalize(slot, _release, self.connections, self._lock, connection)
        self._local.slot = slot
        return connection

    def connection(self) -> sqlite3.Connection:
        """This thread's connection, opened and configured on its first use."""
        slot: _Slot | None = getattr(self._local, "slot", None)
        if slot is not None:
            return slot.connection
        connection = self.connect()
        try:
            self.configure(connection)
        except BaseException:
            connection.close()
            raise
        return self.adopt(connection)

    def _closed_error(self) -> WorkloadError:
        return storage_failure(f"database is closed: {self.target}")

    def ensure_open(self) -> None:
        """See :meth:`Dialect.ensure_open`."""
        if self._closed:
            raise self._closed_error()

    def close(self) -> None:
        """Close every connection of every thread, once no other thread is using them."""
        with self._lock:
            self._closed = True
            connections = list(self.connections)
            self.connections.clear()
        for connection in connections:
            connection.close()

    # --- reads and writes --------------------------------------------------------------

    def errors(self, doing: str) -> _SQLiteErrors:
        """The one place where driver errors are translated (see :class:`_SQLiteErrors`)."""
        return _SQLiteErrors(self.target, doing)

    def read(self, query: LiteralString, params: Mapping[str, Any]) -> list[Any]:
        """See :meth:`Dialect.read`: on this thread's connection, outside any transaction."""
        self.ensure_open()
        with self.errors("read"):
            return self.connection().execute(query, params).fetchall()

    def transact(self, doing: str, work: Callable[[Session], _Result]) -> _Result:
        """See :meth:`Dialect.transact`: ``BEGIN IMMEDIATE``, attempted again (at most
        :data:`WRITE_ATTEMPTS` times) while other writers hold the lock past the busy
        timeout.
        """
        self.ensure_open()
        with self.errors(doing):
            connection = self.connection()
            attempt = 1
            while True:
                try:
                    return transaction(connection, work)
                except sqlite3.Error as error:
                    if not is_busy(error):
                        raise
                    if attempt == WRITE_ATTEMPTS:
                        raise storage_failure(
                            f"SQLite store {self.target}: {doing} failed: the store stayed "
                            f"locked by other writers through {WRITE_ATTEMPTS} attempts of "
                            f"{self.busy_timeout_s:g} s ({describe(error)})"
                        ) from error
                    attempt += 1

    def join(self, connection: object) -> JoinedSession:
        """See :meth:`Dialect.join`: a ``sqlite3.Connection`` to this file, in a transaction
        (``BEGIN IMMEDIATE``: its write lock held from the start).
        """
        if not isinstance(connection, sqlite3.Connection):
            raise invalid(
                "a SQLite store joins a sqlite3.Connection (SQLAlchemy's: "
                "session.connection().connection.driver_connection), not "
                f"{type(connection).__module__}.{type(connection).__qualname__}"
            )
        if not connection.in_transaction:
            raise invalid(
                "the connection has no open transaction: run BEGIN IMMEDIATE first, and "
                "commit (or roll back) after; feltdb never does"
            )

        def cursor() -> sqlite3.Cursor:
            opened = connection.cursor()
            opened.row_factory = None  # tuples, whatever the caller's connection makes
            return opened

        session = JoinedSession(cursor)
        with self.errors("join the caller's transaction"):
            [(file,)] = session.execute(QUERIES["joined_file"], {}).fetchall()
            if not file or not os.path.samefile(file, self.target):
                raise invalid(
                    f"the connection is to {file or 'an in-memory database'!r}, not to the "
                    f"store's file {self.target!r}"
                )
        return session

    def stored_list(self, values: list[str]) -> str:
        """See :meth:`Dialect.stored_list`: JSON text (canonical, made by orjson)."""
        return float_free_json(values)

    def loaded_list(self, stored: Any) -> list[str]:
        """See :meth:`Dialect.loaded_list`."""
        values: list[str] = json.loads(stored)
        return values


class SQLiteDatabase(SQLEngine[_SQLiteDialect]):
    """A feltdb store in one SQLite file; implements :class:`feltdb.storage.base.Database`.

    Opening creates the file and its schema if the file is new or empty, and otherwise
    checks that it is a feltdb store of a schema this release reads (upgrading an older
    one in place). Safe to share between threads (each gets its own connection) and
    between processes.
    """

    target: str
    """The path of the file."""

    wakeups: None = None
    """No wake-ups between processes: a waiter of another process polls."""

    def __init__(
        self, path: str | os.PathLike[str], *, busy_timeout_ms: int = BUSY_TIMEOUT_MS
    ) -> None:
        """Open the store at ``path``, creating it if the file is new or empty.

        Args:
            path: the database file. Its directory must exist.
            busy_timeout_ms: how long one attempt to write waits for another writer.

        Raises:
            WorkloadError: ``WORKLOAD_INVALID`` for an in-memory or URI path;
                ``WORKLOAD_STORAGE_FAILURE`` if the directory does not exist, the file is
                not a SQLite database, is a SQLite database of another application, was
                written by a newer feltdb, or cannot be opened or read.
        """
        target = os.fspath(path)
        if target in ("", ":memory:") or target.startswith("file:"):
            # Every thread has its own connection, and each in-memory connection is a
            # database of its own: threads would silently see different stores.
            raise invalid(f"SQLite store needs a file path, not {target!r}")
        directory = Path(target).parent
        if not directory.is_dir():
            raise storage_failure(
                f"cannot open SQLite store {target}: directory {directory} does not exist"
            )
        dialect = _SQLiteDialect(target, busy_timeout_ms / 1000)
        super().__init__(target, dialect)
        with dialect.errors("open"):
            _create_private(target)
            connection = dialect.connect()
            try:
                open_schema(target, connection)
                dialect.configure(connection)
            except BaseException:
                connection.close()
                raise
        dialect.adopt(connection)


def _create_private(target: str) -> None:
    """Create the store's file readable and writable by its owner alone (``0600``), unless
    it exists: the store holds every workload's input and output, and its grants. SQLite
    gives the ``-wal`` and ``-shm`` files it makes beside it the file's own permissions.
    """
    try:
        descriptor = os.open(target, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    except FileExistsError:
        return
    os.close(descriptor)
