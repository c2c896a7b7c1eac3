"""Whether a store can commit now: what a server's ``/readyz`` asks.

Reading the log proves a connection, not a commit: a SQLite file whose write lock another
process holds, or a PostgreSQL server that has become read-only, still answers reads. So
the check opens a write transaction (SQLite: ``BEGIN IMMEDIATE``, the write lock itself),
runs an ``UPDATE`` that matches no row (refused by a PostgreSQL database that is read-only,
or a standby), commits it having written nothing, then reads the log's revision.

:class:`Readiness` is the part of the :class:`~feltdb.storage.base.Database` protocol;
:class:`ReadinessQueries` implements it over a dialect's named statements, for
:class:`~feltdb.storage.engine.SQLEngine`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import LiteralString, Protocol

from feltdb.storage.dialect import Dialect

__all__ = ["Readiness", "ReadinessQueries"]


class Readiness(Protocol):
    """What a server's readiness probe asks of a database."""

    def ready(self) -> int:
        """The log's current revision, once a write transaction was opened and committed
        (writing nothing). It may wait as long as a write would (the busy timeout, retried).

        Raises:
            WorkloadError: ``WORKLOAD_STORAGE_FAILURE`` when the store cannot commit.
        """
        ...


class ReadinessQueries:
    """:class:`Readiness` over a dialect's named statements (a base of ``SQLEngine``):
    ``write_probe`` run in a write transaction, then ``current_revision``.
    """

    _dialect: Dialect
    _queries: Mapping[str, LiteralString]

    def ready(self) -> int:
        """See :meth:`Readiness.ready`."""
        self._dialect.ensure_open()
        probe = self._queries["write_probe"]
        self._dialect.transact("readiness check", lambda session: session.execute(probe, {}))
        revision: int = self._dialect.read(self._queries["current_revision"], {})[0][0]
        return revision
