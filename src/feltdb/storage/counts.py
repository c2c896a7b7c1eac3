"""What a database counts over its index columns, never reading a document (how much
work there is in each state, per definition, and since when: the server's gauges, the
dashboard's overview), and what its log's newest entries did (the overview's last hour).

:class:`IndexCounts` is the part of the :class:`~feltdb.storage.base.Database` protocol
that aggregates; :class:`~feltdb.storage.engine.SQLEngine` implements it with one
``GROUP BY`` per call.
"""

from __future__ import annotations

from typing import NamedTuple, Protocol

__all__ = ["Activity", "IndexCounts"]


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
