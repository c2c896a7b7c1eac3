"""The server backend: a PostgreSQL database, through psycopg 3 and a psycopg_pool pool.

The operations are :class:`~feltdb.storage.engine.SQLEngine`'s, over the statements of
``sql/postgres/queries.sql``; this module connects, migrates the schema (see
:mod:`feltdb.storage.postgres_schema`), runs each write in one transaction, and turns driver
errors into :class:`WorkloadError` in one place (:mod:`.postgres_errors`).

Many threads, processes and machines may share one database. Each operation borrows a
connection from the pool for its duration; the connections run in autocommit mode, so a
single-statement read is its own transaction, and every write is an explicit transaction
(``with connection.transaction()``: ``BEGIN`` … ``COMMIT``, or ``ROLLBACK`` on any error).

A guard is its write (see :mod:`feltdb.storage.engine`). Under PostgreSQL's default READ
COMMITTED isolation that is exact: a concurrent writer of the same row makes the statement
wait for it to end and then re-check the row as committed, so two writers can never both
win one version. :meth:`~SQLEngine.commit_selected` selects its rows ``FOR UPDATE SKIP
LOCKED``: concurrent callers get disjoint rows without waiting for each other.

Revisions are not dense here: see the comment block below the imports.
"""

from __future__ import annotations

import random
import select
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, Final, LiteralString, TypeVar
from urllib.parse import urlsplit, urlunsplit

import psycopg
import psycopg.errors
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg.rows import TupleRow
from psycopg_pool import ConnectionPool

from feltdb.storage.base import storage_failure
from feltdb.storage.dialect import Session
from feltdb.storage.encoding import invalid
from feltdb.storage.engine import SQLEngine
from feltdb.storage.joined import JoinedSession
from feltdb.storage.postgres_errors import RETRYABLE, PostgresErrors, describe
from feltdb.storage.postgres_joined import StoreDatabase, joined_session
from feltdb.storage.postgres_schema import MIGRATION_LOCK_KEY, QUERIES, SCHEMA_VERSION, migrate
from feltdb.storage.postgres_wakeups import PostgresWakeups

__all__ = [
    "MIGRATION_LOCK_KEY",
    "SCHEMA_VERSION",
    "WRITE_ATTEMPTS",
    "PostgresDatabase",
]

_Connection = psycopg.Connection[TupleRow]
_Result = TypeVar("_Result")

# --- The revision scheme --------------------------------------------------------------
#
# A commit's revision is the id of the transaction that commits it, pg_current_xact_id()
# (xid8: 64 bits with the epoch, so it never wraps around), times 1024, plus its position:
# its place among the transaction's committed plans (0 for commit and commit_selected;
# commit_many commits up to 1024 plans in one transaction, at 0, 1, 2...; a caller's
# transaction, storage/joined.py, continues after the commits it holds). The log row and
# every row the commit writes carry it. A reader sees only the log entries whose revision
# is below the xmin of its snapshot times 1024, pg_snapshot_xmin(pg_current_snapshot()),
# in the same statement (a statement reads with one snapshot, and pg_current_snapshot()
# returns that snapshot).
#
# Why this is correct: a revision below xmin * 1024 has a transaction id below the xmin, of
# a transaction that has ended (committed, so its log rows are visible, or rolled back, so
# it has none), and every transaction that has not ended, or has no id yet, has (or will
# get) an id at or above that xmin, so revisions at or above xmin * 1024. So a reader that
# has consumed the log up to revision R never later meets a commit numbered R or less: the
# log grows only at its end, as a log must for readers that page through it
# (committed_transactions_after) and remember where they stopped. A batch's entries become
# visible together, in their order. current_revision() is the greatest logged revision
# below xmin * 1024, and a commit's base_revision is the previous commit of its transaction
# or, for the first, current_revision() as the committing statement sees it, which is below
# the committer's own revisions (its id is running, or taken after the snapshot).
#
# Why the position: one transaction id gives one revision, and the plans of one
# commit_many must be distinct commits, in order, to the log's readers as to the audit
# API's cursors (an entry per plan, none skipped by a page that ends mid-batch). Ids of
# other transactions cannot be borrowed (they log at their own), and a subtransaction per
# plan would cost round trips and overflow snapshots' subtransaction caches past 64. The
# price is ten bits of range: revisions stay below 2**53 (JSON-safe) for 2**43 transaction
# ids. Migration 0003 introduced the factor; entries logged before it keep their bare ids,
# all below the later revisions, and it fences off older releases' writers.
#
# Why not a counter: the obvious scheme, a one-row counter incremented by every commit (or
# MAX(commit_revision) + 1, which needs a table lock to be safe), makes every commit wait
# for the previous one to end: all writers serialize on one hot row, which is what a
# server backend is for avoiding. Transaction ids are handed out without any lock a writer
# could wait on.
#
# The price: revisions are strictly increasing but not dense (other transactions, in any
# database of the cluster, consume ids too), and a transaction that holds an id for long,
# anywhere in the cluster (a long write, an idle-in-transaction session, a prepared
# transaction), holds back what log readers see until it ends. It never holds back what
# writers can do; and current_revision() may lag a commit that has just returned while an
# older transaction is still open.
#
# One statement needs no REPEATABLE READ transaction for the xmin and the rows it filters to
# come from one snapshot: pg_current_snapshot() returns the active snapshot
# (GetActiveSnapshot() in PostgreSQL's xid8funcs.c), which during a statement is the one its
# scans read with, under READ COMMITTED too. It saves BEGIN and COMMIT.

WRITE_ATTEMPTS: Final = 3
"""How many times a write is attempted when PostgreSQL aborts it as retryable."""

POOL_MIN_SIZE: Final = 1
POOL_MAX_SIZE: Final = 10
POOL_TIMEOUT_S: Final = 10.0
"""How long an operation waits for a connection before it fails."""
CONNECT_TIMEOUT_S: Final = 10
"""libpq's ``connect_timeout``, unless the URL sets one."""

_poll: Final = getattr(select, "poll", None)


# --- values ---------------------------------------------------------------------------


def _without_password(conninfo: str) -> str:
    """``conninfo`` (a URL or ``key=value`` pairs) with any password left out."""
    if "://" not in conninfo:
        params = conninfo_to_dict(conninfo)
        params.pop("password", None)
        return make_conninfo("", **params)
    parts = urlsplit(conninfo)
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, _, hosts = netloc.rpartition("@")
        user = userinfo.partition(":")[0]
        netloc = f"{user}@{hosts}" if user else hosts
    query = "&".join(
        pair
        for pair in parts.query.split("&")
        if pair and pair.partition("=")[0].lower() != "password"
    )
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def _readable(connection: _Connection) -> bool:
    """Whether the server has sent anything on ``connection`` (answers at once)."""
    if _poll is None:  # no poll() on this platform: always probe
        return True
    poller = _poll()
    poller.register(connection.fileno(), select.POLLIN)
    return bool(poller.poll(0))


def configure_session(connection: _Connection) -> None:
    """Set up a new pooled connection whatever a role or database sets (see the query's
    description: ``array_nulls`` on, ``extra_float_digits`` 3).
    """
    connection.execute(QUERIES["configure_session"])


# --- the backend ----------------------------------------------------------------------


class _PostgresDialect:
    """The :class:`~feltdb.storage.dialect.Dialect` of one PostgreSQL database: a pool of
    autocommit connections, transactions retried after a retryable abort, and the log's
    lists kept as ``text[]``.
    """

    queries: Mapping[str, LiteralString] = QUERIES
    no_limit: int | None = None  # LIMIT NULL is no limit; a negative LIMIT is refused.
    array_writes: bool = True  # a batch of single-row plans in a few statements

    def __init__(
        self,
        target: str,
        conninfo: str,
        kwargs: dict[str, Any],
        *,
        min_size: int,
        max_size: int,
        timeout: float,
    ) -> None:
        self.target = target
        self.timeout = timeout
        self._lock = threading.Lock()
        self._closed = False
        self._database = StoreDatabase(self.read)  # what a caller's connection must reach
        self._pool: ConnectionPool[_Connection] = ConnectionPool(
            conninfo,
            kwargs=kwargs,
            min_size=min_size,
            max_size=max_size,
            timeout=timeout,
            check=self.check_connection,
            configure=configure_session,
            name=f"feltdb {target}",
            open=True,
        )

    def check_connection(self, connection: _Connection) -> None:
        """The pool's check of a connection it is about to hand out; raises if it is lost.

        A connection the server dropped while it sat in the pool (a restart, an idle
        timeout, ``pg_terminate_backend``) is found here and replaced, instead of failing
        the operation that would get it.

        An idle connection that is still alive has nothing to read: the server sends on its
        own only when it ends a session (an error, then end of file) or for what feltdb
        never asks (``LISTEN``, notices): it is probed only when its socket is readable. A
        probe of every connection
        (``ConnectionPool.check_connection``) costs a round trip on every operation:
        measured on a unix socket, ``get_row`` took 133 µs with it, 76 µs without. A peer
        that vanished without closing the socket is caught by neither check: the
        operation then fails on its own query.

        One lost connection's siblings usually are too, and psycopg_pool waits 1 s, 2 s, 4 s…
        before each next check (22 s for one operation after the pool's connections were
        terminated), so all the idle ones are checked at once and the lost ones replaced.
        """
        try:
            if connection.broken or connection.closed:
                raise psycopg.OperationalError("the connection is closed")
            if _readable(connection):
                ConnectionPool.check_connection(connection)
        except Exception:
            self._pool.check()
            raise

    def join(self, connection: object) -> JoinedSession:
        """See :meth:`Dialect.join` (:func:`.postgres_joined.joined_session`)."""
        return joined_session(connection, QUERIES, self._database)

    def errors(self, doing: str) -> PostgresErrors:
        """The one place where driver errors are translated (see :class:`PostgresErrors`)."""
        return PostgresErrors(self.target, doing, self.timeout)

    def ensure_open(self) -> None:
        """See :meth:`Dialect.ensure_open`."""
        if self._closed:
            raise storage_failure(f"database is closed: {self.target}")

    def read(self, query: LiteralString, params: Mapping[str, Any]) -> list[Any]:
        """See :meth:`Dialect.read`: one statement, so its own transaction, on a pooled
        connection.
        """
        self.ensure_open()
        with self.errors("read"), self._pool.connection() as connection:
            return connection.execute(query, params).fetchall()

    def transact(self, doing: str, work: Callable[[Session], _Result]) -> _Result:
        """See :meth:`Dialect.transact`: attempted again from the start (at most
        :data:`WRITE_ATTEMPTS` times) after a serialization failure, a deadlock or a lock
        timeout.

        If the connection is lost the error is reported and the write not attempted again:
        a ``COMMIT`` that was sent may have been applied, and only a guarded write could be
        safely repeated.

        Statements are sent one at a time. psycopg's pipeline mode (the log row and the
        writes in one round trip) was measured slower on a unix socket: median commit
        833 µs against 670 µs, claim 1596 µs against 1375 µs.
        """
        self.ensure_open()
        with self.errors(doing):
            attempt = 1
            while True:
                try:
                    with self._pool.connection() as connection, connection.transaction():
                        return work(connection)
                except RETRYABLE as error:
                    if attempt == WRITE_ATTEMPTS:
                        raise storage_failure(
                            f"PostgreSQL store {self.target}: {doing} failed "
                            f"{WRITE_ATTEMPTS} times: {describe(error)}"
                        ) from error
                    # Two transactions that deadlocked would likely meet again if both
                    # started over at once.
                    time.sleep(random.uniform(0, 0.005 * attempt))
                    attempt += 1

    def stored_list(self, values: list[str]) -> list[str]:
        """See :meth:`Dialect.stored_list`: a ``text[]`` array."""
        return values

    def loaded_list(self, stored: Any) -> list[str]:
        """See :meth:`Dialect.loaded_list`."""
        values: list[str] = stored
        return values

    def close(self) -> None:
        """Close the pool and every connection in it; closing twice is harmless."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self._pool.close()


class PostgresDatabase(SQLEngine[_PostgresDialect]):
    """A feltdb store in a PostgreSQL database; implements :class:`feltdb.storage.base.Database`.

    Opening migrates the database to the newest schema this release knows (creating the
    tables in an empty database) and opens a pool of connections. Safe to share between
    threads, and any number of processes may open the same database.
    """

    target: str
    """The connection URL without its password."""

    wakeups: PostgresWakeups
    """Hints to and from the database's other processes (:mod:`.postgres_wakeups`)."""

    def __init__(
        self,
        conninfo: str,
        *,
        min_size: int = POOL_MIN_SIZE,
        max_size: int = POOL_MAX_SIZE,
        timeout: float = POOL_TIMEOUT_S,
    ) -> None:
        """Open the store in the database at ``conninfo``, migrating its schema first.

        Args:
            conninfo: a libpq URL (``postgresql://user:password@host:port/dbname?…``) or
                ``key=value`` connection string.
            min_size: connections the pool keeps open.
            max_size: the most connections it opens.
            timeout: how long an operation waits for a free connection before failing.

        Raises:
            WorkloadError: ``WORKLOAD_INVALID`` for a malformed connection string;
                ``WORKLOAD_STORAGE_FAILURE`` if the server cannot be reached, the database
                does not exist, it holds tables feltdb did not create, or it was migrated
                by a newer feltdb.
        """
        try:
            target = _without_password(conninfo)
            given = conninfo_to_dict(conninfo)
        except psycopg.Error as error:
            raise invalid(f"not a PostgreSQL connection string: {error}") from error
        # autocommit: the driver never opens a transaction on its own, so a connection can
        # never be returned to the pool inside one, and a read (one statement) costs one
        # round trip instead of three (BEGIN, the read, COMMIT). Every write opens its
        # transaction explicitly.
        kwargs: dict[str, Any] = {"autocommit": True}
        if "connect_timeout" not in given:
            kwargs["connect_timeout"] = CONNECT_TIMEOUT_S
        if "application_name" not in given:
            kwargs["application_name"] = "feltdb"
        with PostgresErrors(target, "open", timeout):
            migrate(target, conninfo, kwargs)
            dialect = _PostgresDialect(
                target, conninfo, kwargs, min_size=min_size, max_size=max_size, timeout=timeout
            )
        super().__init__(target, dialect)
        self.wakeups = PostgresWakeups(
            target, conninfo, kwargs, self._send_wakeup, QUERIES["listen_wakeup"]
        )

    def _send_wakeup(self, payload: str) -> None:
        """Notify the wake-up channel with ``payload``, in a transaction of its own."""
        without_sync, notify = QUERIES["commit_without_sync"], QUERIES["notify_wakeup"]

        def send(session: Session) -> None:
            session.execute(without_sync, {})
            session.execute(notify, {"payload": payload})

        self._dialect.transact("wake-up hint", send)

    def close(self) -> None:
        """See :meth:`Database.close`; the wake-up hints stop first (they borrow the pool)."""
        try:
            self.wakeups.close()
        finally:
            super().close()
