"""A PostgreSQL store joined to the caller's open transaction: the checks of the caller's
connection (:meth:`Dialect.join <feltdb.storage.dialect.Dialect.join>`; see
:mod:`feltdb.storage.joined`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, LiteralString

import psycopg
from psycopg.pq import PipelineStatus, TransactionStatus
from psycopg.rows import tuple_row

from feltdb.storage.encoding import invalid
from feltdb.storage.joined import JoinedSession

__all__ = ["StoreDatabase", "joined_session"]


Identity = tuple[str, str, int, int]
"""What a connection reaches: its database, its server's start, and the tables ``rows``
and ``transactions`` as its ``search_path`` resolves them (their oids)."""


class StoreDatabase:
    """What a store's own connections reach (:data:`Identity`), remembered after the first
    read and read again, once, when a caller's connection reaches something else (a
    server restarted since).
    """

    def __init__(self, read: Callable[[LiteralString, Mapping[str, Any]], list[Any]]) -> None:
        """``read``: the store's own read of one statement on a pooled connection."""
        self._read = read
        self._known: Identity | None = None

    def matches(self, query: LiteralString, found: Identity) -> bool:
        """Whether ``found`` (what ``query`` answered on a caller's connection) is what
        the store's connections reach.
        """
        if self._known != found:
            [row] = self._read(query, {})
            self._known = _identity(row)
        return self._known == found


def _identity(row: Any) -> Identity:
    database, started, rows, transactions = row
    return str(database), str(started), int(rows or 0), int(transactions or 0)


def joined_session(
    connection: object, queries: Mapping[str, LiteralString], store: StoreDatabase
) -> JoinedSession:
    """The caller's transaction on ``connection``, checked: a psycopg connection, not in
    pipeline mode, inside a transaction (one open, or about to open with feltdb's first
    statement on a connection that is not in autocommit mode), reaching the ``store``'s
    tables (checked on every call: the caller may change its ``search_path``).

    Raises:
        WorkloadError: ``WORKLOAD_INVALID`` naming what the connection is not.
    """
    if not isinstance(connection, psycopg.Connection):
        raise invalid(
            "a PostgreSQL store joins a psycopg.Connection (SQLAlchemy's: "
            "session.connection().connection.driver_connection), not "
            f"{type(connection).__module__}.{type(connection).__qualname__}"
        )
    if connection.info.pipeline_status != PipelineStatus.OFF:
        # In pipeline mode a statement's row count is not known when it is sent: a guard
        # could not be told from a write.
        raise invalid("the connection is in pipeline mode: admit outside connection.pipeline()")
    status = connection.info.transaction_status
    if status == TransactionStatus.INERROR:
        raise invalid("the connection's transaction has failed: roll it back first")
    if status == TransactionStatus.IDLE and connection.autocommit:
        raise invalid(
            "the connection has no open transaction: admit inside "
            "`with connection.transaction():`; feltdb never commits for the caller"
        )
    if status not in (TransactionStatus.IDLE, TransactionStatus.INTRANS):
        raise invalid(f"the connection is not ready for a statement ({status.name})")
    # A cursor of psycopg's own class, answering tuples, whatever factories the caller set.
    session = JoinedSession(lambda: psycopg.Cursor(connection, row_factory=tuple_row))
    query = queries["joined_database"]
    [row] = session.execute(query, {}).fetchall()
    found = _identity(row)
    if not store.matches(query, found):
        raise invalid(
            f"the connection reaches database {found[0]!r} (server started {found[1]}) "
            "and tables other than the store's (another database, server or search_path): "
            "admission joins a transaction on the store's own tables"
        )
    return session
