"""A database joined to the caller's open transaction (:meth:`Database.joined
<feltdb.storage.base.Database.joined>`): the store's statements run on a connection the
application holds, inside the transaction the application opened, so what feltdb writes
(the rows and their log entry, the entry's place in the audit chain included) commits or
rolls back with the application's own rows. feltdb never commits nor rolls back that
transaction.

Each write runs inside a ``SAVEPOINT``: one that fails (a lost guard, a refusal while
writing, a driver error) is rolled back to it, alone, and the caller's transaction stays
usable for what it does next. Nothing is retried: a serialization failure or a deadlock
is the caller's transaction's, and only the caller can run it again.

On PostgreSQL a commit's revision is its transaction's id times 1024 plus its position
among the transaction's commits; a caller's transaction may already hold commits of earlier
admissions, so the positions of each write continue from theirs (read in the transaction
itself), and a transaction holds at most :data:`MAX_JOINED_COMMITS`. The wake-up hint is
a ``NOTIFY`` inside each write's savepoint: PostgreSQL delivers it (once a transaction) when
the caller commits, and drops it when the caller rolls back. SQLite has no hints between
processes; a waiter finds the work when it looks again. The store's commit observers are
not told: the commits are not durable until the caller's.

What stays the caller's: a read that fails (a lost connection, a statement timeout) runs
outside any savepoint and fails the caller's transaction, as any failed statement of its
own would; a quota's rows, read and written by an admission charged to it, stay locked
until the caller's transaction ends; each write's savepoint is a subtransaction, so a
transaction of many single admissions (past 64 on PostgreSQL) is better made one
``admit_many``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from typing import Any, Final, LiteralString, TypeVar

from feltdb.storage.dialect import Cursor, Dialect, ErrorTranslation, Session
from feltdb.storage.encoding import invalid

__all__ = ["MAX_JOINED_COMMITS", "JoinedDialect", "JoinedSession"]

MAX_JOINED_COMMITS: Final = 1024
"""The most feltdb commits one caller's transaction may hold on PostgreSQL (a revision
has 1024 positions per transaction id; SQLite's revisions are dense, and bound nothing)."""

_Result = TypeVar("_Result")


class JoinedSession:
    """The caller's connection as a :class:`~feltdb.storage.dialect.Session`: each
    statement on a cursor of its own that answers tuples (whatever row factory the caller
    set), positions moved past the transaction's earlier commits.
    """

    __slots__ = ("_cursor", "offset")

    def __init__(self, cursor: Callable[[], Any]) -> None:
        """``cursor()``: a new cursor of the caller's connection answering plain tuples."""
        self._cursor = cursor
        self.offset = 0
        """The position of this write's first commit in the caller's transaction."""

    def execute(self, query: LiteralString, params: Mapping[str, Any], /) -> Cursor:
        """See :meth:`Session.execute <feltdb.storage.dialect.Session.execute>`."""
        position = params.get("position")
        if position is not None:
            position += self.offset
            if position >= MAX_JOINED_COMMITS:
                raise invalid(
                    f"one transaction holds at most {MAX_JOINED_COMMITS} feltdb commits "
                    "(admissions, each item of a batch counting one): commit it and "
                    "admit the rest in another"
                )
            params = {**params, "position": position}
        cursor = self._cursor()
        cursor.execute(query, params)
        answered: Cursor = cursor
        return answered


class JoinedDialect:
    """The :class:`~feltdb.storage.dialect.Dialect` of the caller's transaction: the
    store's own statements and error translation (``base``'s), run on ``session``.
    """

    array_writes: bool = False  # a batch's positions are moved statement by statement

    def __init__(self, base: Dialect, session: JoinedSession, notify: LiteralString | None) -> None:
        """``notify``: the statement of the wake-up hint, on a backend that has them."""
        self._base = base
        self._session = session
        self._notify = notify
        self.queries: Mapping[str, LiteralString] = base.queries
        self.no_limit: int | None = base.no_limit

    def ensure_open(self) -> None:
        """See :meth:`Dialect.ensure_open`: the store's database is not closed."""
        self._base.ensure_open()

    def read(self, query: LiteralString, params: Mapping[str, Any]) -> list[Any]:
        """See :meth:`Dialect.read`: in the caller's transaction, so its own uncommitted
        rows are seen.
        """
        self._base.ensure_open()
        with self._base.errors("read"):
            return self._session.execute(query, params).fetchall()

    def transact(self, doing: str, work: Callable[[Session], _Result]) -> _Result:
        """See :meth:`Dialect.transact`: ``work``, and the wake-up hint, inside a
        savepoint of the caller's transaction, released when it returns, rolled back to
        when it raises; never committed here, never attempted again.
        """
        self._base.ensure_open()
        session, queries = self._session, self.queries
        with self._base.errors(doing):
            [(session.offset,)] = session.execute(queries["joined_position"], {}).fetchall()
            session.execute(queries["joined_savepoint"], {})
            try:
                result = work(session)
                if self._notify is not None:
                    # Not any database object's token: every listener (this process's
                    # store too) hears it, once the caller commits.
                    session.execute(self._notify, {"payload": "joined"})
            except BaseException:
                # A failed rollback (a lost connection) is not reported over its cause:
                # the caller's transaction cannot commit then anyway.
                with contextlib.suppress(Exception):
                    session.execute(queries["joined_rollback"], {})
                    session.execute(queries["joined_release"], {})
                raise
            session.execute(queries["joined_release"], {})
            return result

    def errors(self, doing: str) -> ErrorTranslation:
        """See :meth:`Dialect.errors`: the store's backend's."""
        return self._base.errors(doing)

    def join(self, connection: object) -> JoinedSession:
        """See :meth:`Dialect.join`: the store's backend's."""
        return self._base.join(connection)

    def stored_list(self, values: list[str]) -> Any:
        """See :meth:`Dialect.stored_list`."""
        return self._base.stored_list(values)

    def loaded_list(self, stored: Any) -> list[str]:
        """See :meth:`Dialect.loaded_list`."""
        return self._base.loaded_list(stored)

    def close(self) -> None:
        """Nothing: the connection is the caller's."""
