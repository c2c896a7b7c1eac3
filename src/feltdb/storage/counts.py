"""What a database counts over its index columns, never reading a document (how much
work there is in each state, per definition, and since when: the server's gauges, the
dashboard's overview), and what its log's newest entries did (the overview's last hour).

And how much of a tenant's work is in some states, counted up to a bound: what an
admission quota recounts when its stored count reaches its cap (:mod:`feltdb.work.quotas`).
A tenant's work spans its applications, and the index ``rows_by_state`` (``collection,
tenant_id, application_id, state, …``) holds each (application, state) as one range: the
count walks the tenant's applications (one seek each: a recursive query finds the next
application after the last one found) and counts the ranges of the states asked for,
stopping at its bound. It costs a seek per application and an index entry per row counted,
never a row of another state. A grant's work is told from its tenant's other work only by
the grant its document names (no index column holds it): that count alone reads documents,
those of the tenant's rows in the states asked for.

:class:`IndexCounts` is the part of the :class:`~feltdb.storage.base.Database` protocol
that aggregates; :class:`~feltdb.storage.engine.SQLEngine` implements it with one
``GROUP BY`` per call (:class:`IndexCountQueries` the application's and the bounded counts).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, LiteralString, NamedTuple, Protocol

from feltdb.storage.dialect import Dialect

__all__ = ["Activity", "IndexCountQueries", "IndexCounts", "count_params", "count_statement"]


class Activity(NamedTuple):
    """A log entry's when and what: its audit record's ``operation``, ``work_id``,
    ``state`` and ``attempt_worker_id`` (each ``None`` where the record has none).
    """

    committed_at: float
    operation: str | None
    work_id: str | None
    state: str | None
    worker: str | None = None


class IndexCounts(Protocol):
    """Counts over the index columns of a collection's rows."""

    def count_by_state(self, collection: str) -> dict[str, int]:
        """How many rows of ``collection`` are in each index ``state`` (rows without one
        are not counted; a state with no rows is absent), in one query that reads the
        ``state`` index column, never the documents.
        """
        ...

    def oldest_by_definition(self, collection: str, state: str) -> dict[str, tuple[int, int]]:
        """Per index ``definition_id``, how many rows of ``collection`` are in ``state``
        and the oldest ``created_at`` among them, oldest first; from the index columns,
        never the documents.
        """
        ...

    def recent_operations(
        self, tenant_id: str, application_id: str, since: float, scan: int
    ) -> tuple[list[Activity], float | None]:
        """Of the newest ``scan`` log entries, those whose audit record names this tenant
        and application and that were committed at or after ``since`` (in no set order); and
        when the oldest of the ``scan`` entries was committed (``None``: the log holds
        fewer). Read from the log's key backwards, the records' fields extracted by the
        database.
        """
        ...

    def count_in_application(
        self, collection: str, tenant_id: str, application_id: str
    ) -> dict[tuple[str, str], tuple[int, int]]:
        """Per index ``(state, definition_id)``, how many rows of ``collection`` one
        tenant's application has and the oldest ``created_at`` among them; from the index
        columns, never the documents (rows without a state or definition are not counted).
        """
        ...

    def count_in_states(
        self,
        collection: str,
        tenant_id: str,
        states: Sequence[str],
        limit: int,
        *,
        grant_id: str | None = None,
        application_id: str | None = None,
    ) -> int:
        """How many rows of ``collection`` of ``tenant_id`` (in any of its applications, or
        in ``application_id`` when given) have an index ``state`` among ``states``, counting
        at most ``limit`` (``limit`` answered: that many or more). With ``grant_id``, only
        the rows whose document's ``authorization_snapshot.grant.id`` is ``grant_id``
        (their documents are read; on PostgreSQL a document it cannot read as JSON text,
        one holding an escaped NUL, is counted: the count may be too high, never too low).
        """
        ...


class IndexCountQueries:
    """:meth:`IndexCounts.count_in_application` and :meth:`IndexCounts.count_in_states`
    over a dialect's named statements (a base of ``SQLEngine``).
    """

    _dialect: Dialect
    _queries: Mapping[str, LiteralString]

    def count_in_application(
        self, collection: str, tenant_id: str, application_id: str
    ) -> dict[tuple[str, str], tuple[int, int]]:
        """See :meth:`IndexCounts.count_in_application` (one ``GROUP BY`` over one index
        range of the application).
        """
        params = {
            "collection": collection,
            "tenant_id": tenant_id,
            "application_id": application_id,
        }
        fetched = self._dialect.read(self._queries["count_in_application"], params)
        return {
            (str(state), str(definition)): (int(count), int(oldest))
            for state, definition, count, oldest in fetched
        }

    def count_in_states(
        self,
        collection: str,
        tenant_id: str,
        states: Sequence[str],
        limit: int,
        *,
        grant_id: str | None = None,
        application_id: str | None = None,
    ) -> int:
        """See :meth:`IndexCounts.count_in_states` (one statement:
        ``count_in_states_of_tenant``, or ``count_in_states_of_grant``).
        """
        if limit <= 0 or not states:
            return 0
        params = count_params(
            self._dialect, collection, tenant_id, states, limit, grant_id, application_id
        )
        found = self._dialect.read(self._queries[count_statement(grant_id)], params)
        return int(found[0][0]) if found else 0


def count_statement(grant_id: str | None) -> str:
    """The statement of :meth:`IndexCounts.count_in_states`, for a grant or not."""
    return "count_in_states_of_tenant" if grant_id is None else "count_in_states_of_grant"


def count_params(
    dialect: Dialect,
    collection: str,
    tenant_id: str,
    states: Sequence[str],
    limit: int,
    grant_id: str | None,
    application_id: str | None,
) -> dict[str, Any]:
    """The parameters of :func:`count_statement`'s statement."""
    return {
        "collection": collection,
        "tenant_id": tenant_id,
        "states": dialect.stored_list(sorted(set(states))),
        "limit": limit,
        "grant_id": grant_id,
        "application_id": application_id,
    }
