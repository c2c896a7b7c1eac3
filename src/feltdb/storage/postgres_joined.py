"""A PostgreSQL store joined to the caller's open transaction: the checks of the caller's
connection (:meth:`Dialect.join <feltdb.storage.dialect.Dialect.join>`; see
:mod:`feltdb.storage.joined`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, LiteralString

import psycopg
from psycopg.pq import TransactionStatus
from psycopg.rows import tuple_row

from feltdb.storage.encoding import invalid
from feltdb.storage.joined import JoinedSession

__all__ = ["StoreDatabase", "joined_session"]


class StoreDatabase:
    """Which database a store's connections reach: its name and its server's start (a
    server restarted is read again), remembered after the first read.
    """

    def __init__(self, read: Callable[[LiteralString, Mapping[str, Any]], list[Any]]) -> None:
        """``read``: the store's own read of one statement on a pooled connection."""
        self._read = read
        self._known: tuple[str, str] | None = None

    def matches(self, query: LiteralString, found: tuple[str, str]) -> bool:
        """Whether ``found`` (what ``query`` answered on another connection) is the
        store's database (read again, once, when it is not what was remembered).
        """
        if self._known != found:
            [(database, started)] = self._read(query, {})
            self._known = (str(database), str(started))
        return self._known == found


def joined_session(
    connection: object, queries: Mapping[str, LiteralString], store: StoreDatabase
) -> JoinedSession:
    """The caller's transaction on ``connection``, checked: a psycopg connection inside a
    transaction (one open, or about to open with feltdb's first statement on a connection
    that is not in autocommit mode), to the ``store``'s database.

    Raises:
        WorkloadError: ``WORKLOAD_INVALID`` naming what the connection is not.
    """
    if not isinstance(connection, psycopg.Connection):
        raise invalid(
            f"a PostgreSQL store joins a psycopg.Connection, not {type(connection).__name__}"
        )
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
    session = JoinedSession(lambda: connection.cursor(row_factory=tuple_row))
    query = queries["joined_database"]
    [(database, started)] = session.execute(query, {}).fetchall()
    if not store.matches(query, (str(database), str(started))):
        raise invalid(
            f"the connection is to database {database!r} (server started {started}), not "
            "to the store's: admission joins a transaction on the store's own database"
        )
    return session
