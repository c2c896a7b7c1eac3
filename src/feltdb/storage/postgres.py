"""The server backend: a PostgreSQL database, through psycopg 3 and a psycopg_pool pool.

A thin wrapper, like the SQLite backend it mirrors: the statements are in
``sql/postgres/queries.sql`` and the schema in the numbered files of
``sql/postgres/migrations/``; this module only binds parameters, runs each write in one
transaction, and turns driver errors into :class:`WorkloadError` in one place.

Many threads, processes and machines may share one database. Each operation borrows a
connection from the pool for its duration; the connections run in autocommit mode, so a
single-statement read is its own transaction, and every write is an explicit transaction
(``with connection.transaction()``: ``BEGIN`` … ``COMMIT``, or ``ROLLBACK`` on any error).

Compare-and-set is the write itself: ``require_absent`` is an ``INSERT … ON CONFLICT DO
NOTHING`` and ``expected_version`` an ``UPDATE … WHERE version = …``; a statement that
returns no row is a lost guard. Under PostgreSQL's default READ COMMITTED isolation both are
exact: a concurrent writer of the same row makes the statement wait for it to end and then
re-check the row as committed, so two writers can never both win one version.

Revisions are not dense here: see the comment block above :data:`_Q`.
"""

from __future__ import annotations

import random
import select
import threading
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Final, LiteralString, TypeVar
from urllib.parse import urlsplit, urlunsplit

import psycopg
import psycopg.errors
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg.rows import TupleRow
from psycopg_pool import ConnectionPool, PoolClosed, PoolTimeout

from feltdb.canonical import canonical_json
from feltdb.errors import WorkloadError
from feltdb.storage.base import (
    Commit,
    CommittedTransaction,
    Mutation,
    PlannedCommit,
    Precondition,
    RowIndex,
    RowReader,
    StorageConflict,
    StoredRow,
    storage_failure,
)
from feltdb.storage.encoding import (
    RestoredRow,
    RowsDecodedOnRead,
    committed,
    conflict,
    index_params,
    invalid,
    keyset_page,
    logged_transaction,
    merge_definitions,
    new_transaction_id,
    prepare_writes,
    stored_row,
    to_json,
)
from feltdb.storage.sql import load_migrations, load_queries

__all__ = [
    "MIGRATION_LOCK_KEY",
    "SCHEMA_VERSION",
    "WRITE_ATTEMPTS",
    "PostgresDatabase",
]

_Connection = psycopg.Connection[TupleRow]
_T = TypeVar("_T")

# --- The revision scheme --------------------------------------------------------------
#
# A commit's revision is the id of the transaction that commits it, pg_current_xact_id()
# (xid8: 64 bits with the epoch, so it never wraps around). The log row and every row the
# commit writes carry it. A reader sees only the log entries whose revision is below the
# xmin of its snapshot, pg_snapshot_xmin(pg_current_snapshot()), in the same statement
# (a statement reads with one snapshot, and pg_current_snapshot() returns that snapshot).
#
# Why this is correct: a transaction id below a snapshot's xmin belongs to a transaction
# that has ended (committed, so its log row is visible, or rolled back, so it has none),
# and every transaction that has not ended, or has no id yet, has (or will get) an id at or
# above that xmin. So a reader that has consumed the log up to revision R never later
# meets a commit numbered R or less: the log grows only at its end, as a log must for
# readers that page through it (committed_transactions_after) and remember where they
# stopped. current_revision() is the greatest logged revision below the xmin, and a
# commit's base_revision is current_revision() as the committing statement sees it, which
# is below the committer's own id (its id is running, or taken after the snapshot).
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

_Q: Final = load_queries("postgres")
_MIGRATIONS: Final = load_migrations("postgres")
_DUE_QUERIES: Final[Mapping[str, LiteralString]] = {
    "lease_expires_at": _Q["rows_due_lease_expires_at"],
    "deadline_at": _Q["rows_due_deadline_at"],
}

SCHEMA_VERSION: Final = _MIGRATIONS[-1].version
"""The newest schema this release knows: the number of its last migration."""

MIGRATION_LOCK_KEY: Final = 0x66656C74_6D696772
"""The ``pg_advisory_xact_lock`` key held while migrating: ``"feltmigr"`` in ASCII."""

WRITE_ATTEMPTS: Final = 3
"""How many times a write is attempted when PostgreSQL aborts it as retryable."""

POOL_MIN_SIZE: Final = 1
POOL_MAX_SIZE: Final = 10
POOL_TIMEOUT_S: Final = 10.0
"""How long an operation waits for a connection before it fails."""
CONNECT_TIMEOUT_S: Final = 10
"""libpq's ``connect_timeout``, unless the URL sets one."""

_RETRYABLE: Final = (
    psycopg.errors.SerializationFailure,
    psycopg.errors.DeadlockDetected,
    psycopg.errors.LockNotAvailable,
)
"""Errors after which PostgreSQL has rolled the transaction back and running it again from
the start may succeed: the retryable errors, listed in one place."""

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


def _describe(error: BaseException) -> str:
    sqlstate = getattr(error, "sqlstate", None)
    text = str(error).strip() or type(error).__name__
    return f"{text} ({type(error).__name__}, SQLSTATE {sqlstate})" if sqlstate else text


# --- commits --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Prepared:
    """A validated, serialized commit, and the order in which to apply it.

    Each guarded row is applied in one of two ways. *Merged*: a row with one guard and one
    write is guarded by the write itself (``insert_row_if_absent``,
    ``update_row_if_version``, ``delete_row_if_version``), one statement. *Locked*: any
    other guarded row (a guard on a row the commit does not write, several guards on one
    row, ``require_absent`` on a deletion) is locked first (``FOR UPDATE``/``FOR SHARE``, or
    a placeholder row for a key that does not exist), checked, then written at an exact
    version. The work layer only ever uses the merged kind.
    """

    transaction_id: str
    mutations: list[Mutation]
    preconditions: list[Precondition]
    """Only the preconditions with a guard, in their given order."""
    writes: list[dict[str, Any]]
    """Parameters of each mutation, in mutation order (``document`` ``None``: delete)."""
    merged: dict[tuple[str, str], int]
    """Row → index in ``writes`` of its write, for rows guarded by their write."""
    locked: list[tuple[str, str]]
    """Rows to lock before any guard is checked, in order of their first guard."""
    log: dict[str, Any]

    def committed(self, revision: int, versions: list[int | None]) -> Commit:
        return committed(self.transaction_id, self.mutations, revision, versions)


def _prepare(
    operation_id: str,
    mutations: Sequence[Mutation],
    preconditions: Sequence[Precondition],
    audit: Mapping[str, Any] | None,
) -> _Prepared:
    """Validate and serialize a commit, and plan its guards, before any connection is used."""
    writes, written = prepare_writes(operation_id, mutations, audit)
    guarded = [p for p in preconditions if p.require_absent or p.expected_version is not None]
    guards: dict[tuple[str, str], list[Precondition]] = {}
    for precondition in guarded:
        guards.setdefault((precondition.collection, precondition.key), []).append(precondition)
    merged: dict[tuple[str, str], int] = {}
    locked: list[tuple[str, str]] = []
    for address, row_guards in guards.items():
        found = written.get(address)
        only = row_guards[0]
        if (
            found is not None
            and len(row_guards) == 1
            and only.require_absent != (only.expected_version is not None)
            and not (only.require_absent and writes[found]["document"] is None)
        ):
            merged[address] = found
        else:
            locked.append(address)
    transaction_id = new_transaction_id(operation_id)
    log = {
        "transaction_id": transaction_id,
        "operation_ids": [operation_id],
        "keys": [f"{m.collection}/{m.key}" for m in mutations],
        "audit": None if audit is None else to_json(audit, "the audit record"),
    }
    return _Prepared(transaction_id, list(mutations), guarded, writes, merged, locked, log)


def _log(connection: _Connection, log: Mapping[str, Any]) -> int:
    revision: int = connection.execute(_Q["insert_transaction"], log).fetchall()[0][0]
    return revision


def _lock(
    connection: _Connection, address: tuple[str, str], *, share: bool
) -> tuple[int | None, bool]:
    """Lock a row until the transaction ends; ``(version, reserved)``.

    An absent key cannot be locked, so it is held by inserting a placeholder row, which
    makes any other writer of that key wait for this transaction. ``reserved`` says that
    this transaction now holds such a placeholder (version ``None``), which it must
    overwrite or delete before it commits.
    """
    params = {"collection": address[0], "key": address[1]}
    query = _Q["share_row_version"] if share else _Q["lock_row_version"]
    while True:
        found = connection.execute(query, params).fetchall()
        if found:
            return found[0][0], False
        # No row: reserve the key. If another transaction inserted it meanwhile, the insert
        # waited for it to end and did nothing; lock the row it left (or try again if it is
        # gone once more).
        if connection.execute(_Q["reserve_key"], params).fetchall():
            return None, True


def _apply(connection: _Connection, prepared: _Prepared) -> tuple[int, list[int | None]]:
    """Inside the write transaction: log, lock, check the guards, and write the rows."""
    revision = _log(connection, prepared.log)
    locks: dict[tuple[str, str], tuple[int | None, bool]] = {}
    written: set[tuple[str, str]] = {(w["collection"], w["key"]) for w in prepared.writes}
    for address in prepared.locked:
        locks[address] = _lock(connection, address, share=address not in written)
    versions: list[int | None] = [None] * len(prepared.writes)
    done: set[int] = set()
    # The guards in their given order, so the conflict reported is the first failing
    # precondition, as the SQLite backend reports it.
    for precondition in prepared.preconditions:
        address = (precondition.collection, precondition.key)
        position = prepared.merged.get(address)
        if position is None:
            lost = conflict(precondition, locks[address][0])
            if lost is not None:
                raise lost
            continue
        params = prepared.writes[position]
        if params["document"] is None:
            query = _Q["delete_row_if_version"]
        elif precondition.require_absent:
            query = _Q["insert_row_if_absent"]
        else:
            query = _Q["update_row_if_version"]
        found = connection.execute(
            query, {**params, "expected_version": precondition.expected_version}
        ).fetchall()
        if not found:
            raise _lost(connection, precondition)
        versions[position] = None if params["document"] is None else found[0][0]
        done.add(position)
    for position, params in enumerate(prepared.writes):
        if position in done:
            continue
        address = (params["collection"], params["key"])
        lock = locks.get(address)
        if params["document"] is None:
            connection.execute(_Q["delete_row"], params)
        elif lock is None:
            versions[position] = connection.execute(_Q["upsert_row"], params).fetchall()[0][0]
        else:
            version = 1 if lock[0] is None else lock[0] + 1
            connection.execute(_Q["write_row_at_version"], {**params, "version": version})
            versions[position] = version
    for address, (_, reserved) in locks.items():
        if reserved and address not in written:
            connection.execute(_Q["delete_row"], {"collection": address[0], "key": address[1]})
    return revision, versions


def _lost(connection: _Connection, precondition: Precondition) -> StorageConflict:
    """The conflict of a guard its write lost, with the version that beat it."""
    found = connection.execute(
        _Q["row_version"], {"collection": precondition.collection, "key": precondition.key}
    ).fetchall()
    version: int | None = found[0][0] if found else None
    lost = conflict(precondition, version)
    if lost is not None:
        return lost
    # The row changed back between the write and this read (a third writer): still lost.
    return StorageConflict(
        f"{precondition.collection}/{precondition.key}: the row changed during the commit",
        {
            "collection": precondition.collection,
            "key": precondition.key,
            "expected_version": precondition.expected_version,
            "found_version": version,
        },
    )


# --- errors ---------------------------------------------------------------------------


class _TranslateErrors:
    """See :meth:`PostgresDatabase._translate_errors`."""

    __slots__ = ("doing", "target", "timeout")

    def __init__(self, target: str, doing: str, timeout: float) -> None:
        self.target = target
        self.doing = doing
        self.timeout = timeout

    def __enter__(self) -> None:
        return None

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if error is None or isinstance(error, WorkloadError):
            return
        where = f"PostgreSQL store {self.target}: {self.doing}"
        if isinstance(error, psycopg.errors.NumericValueOutOfRange):
            raise invalid(
                f"{where}: an integer is outside the 64-bit range PostgreSQL stores"
            ) from error
        if isinstance(error, psycopg.DataError) or isinstance(error, UnicodeEncodeError):
            # Raised for values PostgreSQL cannot store (text with a NUL character, a lone
            # surrogate that is not UTF-8): bad input, not a broken store.
            raise invalid(f"{where}: a value cannot be stored: {_describe(error)}") from error
        if isinstance(error, PoolClosed):
            raise storage_failure(f"database is closed: {self.target}") from error
        if isinstance(error, PoolTimeout):
            raise storage_failure(
                f"{where} failed: no connection to the server within {self.timeout:g} s "
                f"({_describe(error)})"
            ) from error
        if isinstance(error, psycopg.Error):
            raise storage_failure(f"{where} failed: {_describe(error)}") from error


# --- the backend ----------------------------------------------------------------------


class PostgresDatabase:
    """A feltdb store in a PostgreSQL database; implements :class:`feltdb.storage.base.Database`.

    Opening migrates the database to the newest schema this release knows (creating the
    tables in an empty database) and opens a pool of connections. Safe to share between
    threads, and any number of processes may open the same database.
    """

    target: str
    """The connection URL without its password."""

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
            self.target = _without_password(conninfo)
            given = conninfo_to_dict(conninfo)
        except psycopg.Error as error:
            raise invalid(f"not a PostgreSQL connection string: {error}") from error
        self._lock = threading.Lock()
        self._closed = False
        self._timeout = timeout
        # autocommit: the driver never opens a transaction on its own, so a connection can
        # never be returned to the pool inside one, and a read (one statement) costs one
        # round trip instead of three (BEGIN, the read, COMMIT). Every write opens its
        # transaction explicitly.
        self._kwargs: dict[str, Any] = {"autocommit": True}
        if "connect_timeout" not in given:
            self._kwargs["connect_timeout"] = CONNECT_TIMEOUT_S
        if "application_name" not in given:
            self._kwargs["application_name"] = "feltdb"
        with self._translate_errors("open"):
            self._migrate(conninfo)
            self._pool: ConnectionPool[_Connection] = ConnectionPool(
                conninfo,
                kwargs=self._kwargs,
                min_size=min_size,
                max_size=max_size,
                timeout=timeout,
                check=self._check_connection,
                name=f"feltdb {self.target}",
                open=True,
            )

    def _check_connection(self, connection: _Connection) -> None:
        """The pool's check of a connection it is about to hand out; raises if it is lost.

        A connection the server dropped while it sat in the pool (a restart, an idle
        timeout, ``pg_terminate_backend``) is found here and replaced, instead of failing
        the operation that would get it.

        An idle connection that is still alive has nothing to read: the server sends on
        its own only when it ends a session (an error, then end of file) or for what
        feltdb never asks for (``LISTEN``, asynchronous notices). So the connection is
        probed with a query only when its socket is readable. A probe of every connection
        (``ConnectionPool.check_connection``) costs a round trip on every operation:
        measured on a unix socket, ``get_row`` took 133 µs with it, 76 µs without. A peer
        that vanished without closing the socket is caught by neither check: the
        operation then fails on its own query.

        When one connection is lost its siblings usually are too, and psycopg_pool waits
        1 s, then 2 s, 4 s… before each next check (measured: 22 s for one operation after
        the pool's connections were terminated), so all the idle ones are checked at once
        and the lost ones replaced.
        """
        try:
            if connection.broken or connection.closed:
                raise psycopg.OperationalError("the connection is closed")
            if _readable(connection):
                ConnectionPool.check_connection(connection)
        except Exception:
            self._pool.check()
            raise

    # --- schema ------------------------------------------------------------------------

    def _migrate(self, conninfo: str) -> None:
        with psycopg.connect(conninfo, **self._kwargs) as connection:
            if self._schema_version(connection) == SCHEMA_VERSION:
                return
            with connection.transaction():
                # Two processes may open one new database at once: the lock makes the
                # second wait, and then find the migrations done. It is released when the
                # transaction ends, also if the process dies holding it.
                connection.execute(_Q["migration_lock"], {"key": MIGRATION_LOCK_KEY})
                connection.execute(_Q["create_migrations_table"])
                applied = self._check_version(connection.execute(_Q["schema_version"]))
                for migration in _MIGRATIONS[applied:]:
                    # A script of several statements, run by the simple query protocol
                    # (it has no parameters); never prepared.
                    connection.execute(migration.script, prepare=False)
                    connection.execute(_Q["record_migration"], {"version": migration.version})

    def _schema_version(self, connection: _Connection) -> int:
        if not connection.execute(_Q["migrations_table_exists"]).fetchall()[0][0]:
            return 0
        return self._check_version(connection.execute(_Q["schema_version"]))

    def _check_version(self, cursor: psycopg.Cursor[TupleRow]) -> int:
        version: int = cursor.fetchall()[0][0]
        if version > SCHEMA_VERSION:
            raise storage_failure(
                f"PostgreSQL store {self.target} was migrated by a newer feltdb (schema "
                f"{version}); this feltdb knows schema {SCHEMA_VERSION} at most: upgrade "
                f"feltdb to open it"
            )
        return version

    # --- errors and transactions -------------------------------------------------------

    def _translate_errors(self, doing: str) -> _TranslateErrors:
        """Turn every driver error into a :class:`WorkloadError`, the driver's as cause.

        The one place where driver errors are translated: out-of-range integers and values
        PostgreSQL cannot store are ``WORKLOAD_INVALID``; everything else (a lost
        connection, a pool timeout, a server error) is ``WORKLOAD_STORAGE_FAILURE``.
        :class:`WorkloadError`, including :class:`StorageConflict`, passes through.
        """
        return _TranslateErrors(self.target, doing, self._timeout)

    def _ensure_open(self) -> None:
        if self._closed:
            raise storage_failure(f"database is closed: {self.target}")

    def _one_statement(self, doing: str, work: Callable[[_Connection], _T]) -> _T:
        """Run ``work``, one statement (so its own transaction), on a pooled connection."""
        self._ensure_open()
        with self._translate_errors(doing), self._pool.connection() as connection:
            return work(connection)

    def _write(self, doing: str, work: Callable[[_Connection], _T]) -> _T:
        """Run ``work`` in one transaction, again from the start after a retryable error.

        If the connection is lost the error is reported and the write not attempted again:
        a ``COMMIT`` that was sent may have been applied, and only a guarded write could be
        safely repeated.

        Statements are sent one at a time. psycopg's pipeline mode (the log row and the
        writes in one round trip) was measured slower on a unix socket: median commit
        833 µs against 670 µs, claim 1596 µs against 1375 µs.
        """
        self._ensure_open()
        with self._translate_errors(doing):
            attempt = 1
            while True:
                try:
                    with self._pool.connection() as connection, connection.transaction():
                        return work(connection)
                except _RETRYABLE as error:
                    if attempt == WRITE_ATTEMPTS:
                        raise storage_failure(
                            f"PostgreSQL store {self.target}: {doing} failed "
                            f"{WRITE_ATTEMPTS} times: {_describe(error)}"
                        ) from error
                    # Two transactions that deadlocked would likely meet again if both
                    # started over at once.
                    time.sleep(random.uniform(0, 0.005 * attempt))
                    attempt += 1

    def _select(self, query: LiteralString, params: Mapping[str, Any]) -> list[StoredRow]:
        fetched = self._one_statement("read", lambda c: c.execute(query, params).fetchall())
        return [stored_row(*row) for row in fetched]

    def close(self) -> None:
        """Close every connection. Later calls raise ``WORKLOAD_STORAGE_FAILURE``.

        Closing twice is harmless.
        """
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self._pool.close()

    # --- reads -------------------------------------------------------------------------

    def get_row(self, collection: str, key: str) -> StoredRow | None:
        """The committed row at ``(collection, key)``, or ``None``.

        Raises:
            WorkloadError: ``WORKLOAD_STORAGE_FAILURE`` if the store cannot be read.
        """
        rows = self._select(_Q["get_row"], {"collection": collection, "key": key})
        return rows[0] if rows else None

    def list_rows(
        self,
        collection: str,
        *,
        tenant_id: str | None = None,
        application_id: str | None = None,
        state: str | None = None,
        limit: int | None = None,
    ) -> list[StoredRow]:
        """Rows of a collection matching every given filter (``None``: any), in order.

        The order is priority descending, then ``created_at``, then key (``NULL`` first
        ascending and last descending, as in SQLite). With ``tenant_id`` and
        ``application_id`` (and optionally ``state``) the rows come from an index in
        order; other filter combinations read the collection and sort it.

        Raises:
            WorkloadError: ``WORKLOAD_STORAGE_FAILURE`` if the store cannot be read.
        """
        params = {
            "collection": collection,
            "tenant_id": tenant_id,
            "application_id": application_id,
            "state": state,
            # SQLite reads a negative LIMIT as none; PostgreSQL would refuse it.
            "limit": None if limit is None or limit < 0 else limit,
        }
        if tenant_id is not None and application_id is not None:
            query = _Q["list_rows_by_application"] if state is None else _Q["list_rows_by_state"]
        else:
            query = _Q["list_rows"]
        return self._select(query, params)

    def page_rows(
        self,
        collection: str,
        tenant_id: str,
        application_id: str,
        state: str | None,
        after: tuple[int, int, str] | None,
        *,
        limit: int,
    ) -> list[StoredRow]:
        """One page of :meth:`list_rows` after a cursor, by two keyset seeks over the index.

        ``after`` is the ``(priority, created_at, key)`` of the previous page's last row
        (``None``: the first page); see :func:`~feltdb.storage.encoding.keyset_page`.

        Raises:
            WorkloadError: ``WORKLOAD_STORAGE_FAILURE`` if the store cannot be read.
        """
        if limit <= 0:
            return []
        if after is None:
            return self.list_rows(
                collection,
                tenant_id=tenant_id,
                application_id=application_id,
                state=state,
                limit=limit,
            )
        return keyset_page(
            self._select, _Q, collection, tenant_id, application_id, state, after, limit
        )

    def claimable_rows(
        self,
        collection: str,
        tenant_id: str,
        application_id: str,
        state: str,
        now: int,
        *,
        limit: int,
        offset: int = 0,
    ) -> list[StoredRow]:
        """Rows in ``state`` whose ``eligible_at`` is ``None`` or ``<= now``, in index order.

        The order is priority descending, then ``created_at``, then key; the rows are read
        from an index, never a scan.

        Raises:
            WorkloadError: ``WORKLOAD_STORAGE_FAILURE`` if the store cannot be read.
        """
        return self._select(
            _Q["claimable_rows"],
            _claimable_params(collection, tenant_id, application_id, state, now, limit, offset),
        )

    def rows_due(self, collection: str, column: str, now: int, *, limit: int) -> list[StoredRow]:
        """Rows whose ``column`` is ``<= now``, earliest first, then by key.

        ``column`` is ``"lease_expires_at"`` or ``"deadline_at"``; the rows are read from a
        partial index of that column.

        Raises:
            WorkloadError: ``WORKLOAD_INVALID`` for another column;
                ``WORKLOAD_STORAGE_FAILURE`` if the store cannot be read.
        """
        query = _DUE_QUERIES.get(column)
        if query is None:
            raise invalid(f"rows_due column must be one of {sorted(_DUE_QUERIES)}, not {column!r}")
        return self._select(query, {"collection": collection, "now": now, "limit": _limit(limit)})

    def rows_with_result_id(self, collection: str, result_id: str) -> list[StoredRow]:
        """Rows whose index ``result_id`` equals ``result_id``, by key.

        Raises:
            WorkloadError: ``WORKLOAD_STORAGE_FAILURE`` if the store cannot be read.
        """
        return self._select(
            _Q["rows_with_result_id"], {"collection": collection, "result_id": result_id}
        )

    def count_by_state(self, collection: str) -> dict[str, int]:
        """How many rows of ``collection`` are in each index ``state`` (states with no
        rows, and rows without a state, are absent), by one ``GROUP BY`` over the
        ``state`` column of ``rows_by_state`` (an index-only scan where the planner
        prefers one; over most of a small table a sequential scan is cheaper).

        Raises:
            WorkloadError: ``WORKLOAD_STORAGE_FAILURE`` if the store cannot be read.
        """
        fetched = self._one_statement(
            "read",
            lambda c: c.execute(_Q["count_by_state"], {"collection": collection}).fetchall(),
        )
        return {str(state): int(count) for state, count in fetched}

    def oldest_by_definition(self, collection: str, state: str) -> dict[str, tuple[int, int]]:
        """See :meth:`Database.oldest_by_definition` (one ``GROUP BY`` over the index).

        Raises:
            WorkloadError: ``WORKLOAD_STORAGE_FAILURE`` if the store cannot be read.
        """
        params = {"collection": collection, "state": state}
        fetched = self._one_statement(
            "read", lambda c: c.execute(_Q["oldest_by_definition"], params).fetchall()
        )
        return {str(d): (int(count), int(oldest)) for d, count, oldest in fetched}

    def current_revision(self) -> int:
        """The greatest logged revision every reader can see, 0 before any.

        Revisions are transaction ids (see the module), so they grow with every commit but
        not by one. While an older transaction is still open anywhere in the cluster, a
        commit that has just returned may not be counted yet.

        Raises:
            WorkloadError: ``WORKLOAD_STORAGE_FAILURE`` if the store cannot be read.
        """
        fetched = self._one_statement(
            "read", lambda c: c.execute(_Q["current_revision"]).fetchall()
        )
        revision: int = fetched[0][0]
        return revision

    def committed_transactions_after(
        self, revision: int, limit: int | None = None
    ) -> list[CommittedTransaction]:
        """Logged transactions with ``commit_revision > revision``, oldest first.

        At most ``limit`` of them (``None``: all); only those below the xmin of the read's
        snapshot, so that no transaction can later appear before the last one returned
        (see the module). The filter and the read share one snapshot: they are one
        statement.

        Raises:
            WorkloadError: ``WORKLOAD_STORAGE_FAILURE`` if the store cannot be read.
        """
        params = {"revision": revision, "limit": None if limit is None or limit < 0 else limit}
        # One statement needs no REPEATABLE READ transaction for the xmin and the rows to
        # come from one snapshot: pg_current_snapshot() returns the active snapshot
        # (GetActiveSnapshot() in PostgreSQL's xid8funcs.c), which during a statement is the
        # one its scans read with, under READ COMMITTED too. It saves BEGIN and COMMIT.
        fetched = self._one_statement(
            "read", lambda c: c.execute(_Q["transactions_after"], params).fetchall()
        )
        return [logged_transaction(*row) for row in fetched]

    # --- writes ------------------------------------------------------------------------

    def commit(
        self,
        operation_id: str,
        mutations: Sequence[Mutation],
        preconditions: Sequence[Precondition] = (),
        audit: Mapping[str, Any] | None = None,
    ) -> Commit:
        """Apply ``mutations`` atomically, in one transaction, if every precondition holds.

        Each written row's version is its previous version + 1, or 1 for a new row; a
        ``None`` document deletes the row. One transaction is logged at this transaction's
        revision, with ``operation_id``, the written keys and ``audit``.

        Raises:
            StorageConflict: a precondition failed; nothing was written.
            WorkloadError: ``WORKLOAD_INVALID`` for a document or audit that is not JSON,
                a key written twice in one commit, or a value PostgreSQL cannot store (an
                integer outside 64 bits); ``WORKLOAD_STORAGE_FAILURE`` for any database
                failure. Nothing was written.
        """
        self._ensure_open()
        prepared = _prepare(operation_id, mutations, preconditions, audit)
        revision, versions = self._write("commit", lambda c: _apply(c, prepared))
        return prepared.committed(revision, versions)

    def commit_selected(
        self,
        collection: str,
        tenant_id: str,
        application_id: str,
        state: str,
        now: int,
        decide: Callable[[Sequence[StoredRow], RowReader], PlannedCommit | None],
        *,
        limit: int,
        offset: int = 0,
        definitions: Collection[str] | None = None,
    ) -> Commit | None:
        """Select claimable rows and commit ``decide``'s plan for them, in one transaction.

        The rows are selected ``FOR UPDATE SKIP LOCKED``: each is locked until the
        transaction ends, and rows another transaction holds are skipped, so concurrent
        callers get disjoint rows without waiting for each other. ``decide`` may read
        further rows through its reader, inside the same transaction; when it answers
        ``None``, nothing is written.

        With ``definitions``, only rows of those definition ids are selected, each
        definition by its own range of ``rows_by_definition`` (read, and locked, to
        ``offset + limit`` rows), merged in index order; an empty collection selects
        nothing.

        Raises:
            StorageConflict: a precondition of the plan failed; nothing was written.
            WorkloadError: whatever ``decide`` raises (nothing was written);
                ``WORKLOAD_STORAGE_FAILURE``.
        """
        self._ensure_open()
        params = _claimable_params(collection, tenant_id, application_id, state, now, limit, offset)

        def select(connection: _Connection) -> Sequence[tuple[str, str, int, int, str]]:
            if definitions is None:
                fetched: list[Any] = connection.execute(
                    _Q["claimable_rows_locked"], params
                ).fetchall()
                return fetched

            def fetch(definition: str, depth: int) -> list[tuple[Any, ...]]:
                found: list[Any] = connection.execute(
                    _Q["claimable_rows_by_definition_locked"],
                    {**params, "definition": definition, "limit": _limit(depth)},
                ).fetchall()
                return found

            return merge_definitions(fetch, definitions, offset, limit)

        def work(connection: _Connection) -> tuple[_Prepared, int, list[int | None]] | None:
            rows = RowsDecodedOnRead(select(connection))

            def read(row_collection: str, key: str) -> StoredRow | None:
                found = connection.execute(
                    _Q["get_row"], {"collection": row_collection, "key": key}
                ).fetchall()
                return stored_row(*found[0]) if found else None

            plan = decide(rows, read)
            if plan is None:
                # Nothing was written, so the transaction commits with nothing in it rather
                # than rolling back: psycopg drops every prepared statement of a connection
                # on a rollback, and "nothing to claim" is the common answer of an idle
                # queue. Ending the transaction releases the row locks either way.
                return None
            prepared = _prepare(plan.operation_id, plan.mutations, plan.preconditions, plan.audit)
            revision, versions = _apply(connection, prepared)
            return prepared, revision, versions

        outcome = self._write("commit", work)
        if outcome is None:
            return None
        prepared, revision, versions = outcome
        return prepared.committed(revision, versions)

    def restore_row(
        self,
        collection: str,
        key: str,
        document: Mapping[str, Any],
        index: RowIndex | None = None,
    ) -> Commit:
        """Write ``document`` as given, with no guard, logged as operation ``restore:<key>``.

        The row's version is the document's ``"__version"`` or, without one, 1; its index
        is ``index`` or, without one, empty.

        Raises:
            WorkloadError: ``WORKLOAD_INVALID`` for a document that is not a JSON object or
                a ``"__version"`` that is not a positive integer;
                ``WORKLOAD_STORAGE_FAILURE`` for any database failure.
        """
        self._ensure_open()
        restore = RestoredRow.plan(collection, key, document, index)
        version, text, params = restore.version, restore.text, restore.params
        operation_id, transaction_id = restore.operation_id, restore.transaction_id
        log = {
            "transaction_id": transaction_id,
            "operation_ids": [operation_id],
            "keys": [f"{collection}/{key}"],
            "audit": canonical_json({"kind": "restore"}),
        }

        def work(connection: _Connection) -> Commit:
            revision = _log(connection, log)
            connection.execute(_Q["write_row_at_version"], params)
            row = stored_row(collection, key, version, revision, text)
            return Commit(revision, transaction_id, [row])

        return self._write("restore", work)

    def update_index(self, collection: str, key: str, index: RowIndex) -> bool:
        """Replace the index fields of a row, and nothing else.

        Its document, its version and the store's revision stay as they are; nothing is
        logged. One statement, so its own transaction.

        Returns:
            Whether the row exists (``False``: nothing was changed).

        Raises:
            WorkloadError: ``WORKLOAD_STORAGE_FAILURE`` for any database failure.
        """
        params = index_params(index)
        params.update(collection=collection, key=key)
        return self._one_statement(
            "update index", lambda c: c.execute(_Q["update_index"], params).rowcount > 0
        )


def _limit(limit: int) -> int | None:
    # SQLite reads a negative LIMIT as no limit; PostgreSQL would refuse it.
    return None if limit < 0 else limit


def _claimable_params(
    collection: str,
    tenant_id: str,
    application_id: str,
    state: str,
    now: int,
    limit: int,
    offset: int,
) -> dict[str, Any]:
    return {
        "collection": collection,
        "tenant_id": tenant_id,
        "application_id": application_id,
        "state": state,
        "now": now,
        "limit": _limit(limit),
        # SQLite reads a negative OFFSET as none; PostgreSQL would refuse it.
        "offset": max(offset, 0),
    }
