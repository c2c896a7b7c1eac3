"""The storage protocol, implemented once over SQL for every backend.

:class:`SQLEngine` implements :class:`~feltdb.storage.base.Database` by running the named
statements of a dialect's ``queries.sql``: every dialect names the same statements, binds
the same parameters and selects rows as ``(collection, key, version, revision, document)``.
What differs between backends is their :class:`~feltdb.storage.dialect.Dialect`: how a read
runs, how a write transaction runs (its locking and its retries), how driver errors are
translated (inside both), how the log's lists of strings are stored, and whether batches
may be written by arrays (PostgreSQL's ``array_writes``, whose statements only it names).

Compare-and-set is the write itself, on every backend: ``require_absent`` is an ``INSERT …
ON CONFLICT DO NOTHING`` (``insert_row_if_absent``) and ``expected_version`` an ``UPDATE``
or ``DELETE … WHERE version = :expected_version`` (``update_row_if_version``,
``delete_row_if_version``); a statement that changes no row has lost its guard. So each
precondition guards one row its commit writes (see :func:`~feltdb.storage.encoding.guards`).
:mod:`feltdb.storage.writes` writes a commit, alone or as one plan of a batch, and
:mod:`feltdb.storage.array_writes` a batch of single-row plans by arrays, to the same effect.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final, Generic, TypeVar

from feltdb.limits import MAX_PLANS_PER_BATCH
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
)
from feltdb.storage.chain_log import ChainQueries
from feltdb.storage.counts import Activity, IndexCountQueries
from feltdb.storage.definition_pages import DefinitionPageQueries
from feltdb.storage.dialect import Dialect, Session
from feltdb.storage.encoding import (
    RowsDecodedOnRead,
    invalid,
    keyset_page,
    logged_transaction,
    stored_row,
)
from feltdb.storage.held_commits import HeldQueries
from feltdb.storage.index_columns import index_params
from feltdb.storage.joined import JoinedDialect
from feltdb.storage.partitions import ClaimPartitions, accepted_groups
from feltdb.storage.readiness import ReadinessQueries
from feltdb.storage.retention_reads import RetentionQueries
from feltdb.storage.selecting import SetAside
from feltdb.storage.selection import Selection
from feltdb.storage.statistics import StatisticsQueries
from feltdb.storage.wakeups import Wakeups
from feltdb.storage.writes import prepare, prepare_batch, write_batch, write_plan, write_set_aside

__all__ = ["SQLEngine"]

_DUE_QUERIES: Final = {
    "lease_expires_at": "rows_due_lease_expires_at",
    "deadline_at": "rows_due_deadline_at",
}
"""The named statement that serves each column :meth:`SQLEngine.rows_due` accepts."""


_Dialect = TypeVar("_Dialect", bound=Dialect)


class SQLEngine(
    ChainQueries,
    DefinitionPageQueries,
    HeldQueries,
    IndexCountQueries,
    ReadinessQueries,
    RetentionQueries,
    StatisticsQueries,
    Generic[_Dialect],
):
    """Implements :class:`~feltdb.storage.base.Database` over a :class:`Dialect`."""

    target: str
    """Where the database lives, as its backend names it in messages."""

    wakeups: Wakeups | None = None
    """Hints between the processes sharing the database, if the backend has them."""
    joined_to: SQLEngine[Any] | None = None
    """The store's own database, when this one is joined to a caller's transaction."""

    def __init__(self, target: str, dialect: _Dialect) -> None:
        self.target = target
        self._dialect = dialect
        self._queries = dialect.queries

    def joined(self, connection: object) -> SQLEngine[JoinedDialect]:
        """See :meth:`Database.joined`: this database's statements, on ``connection``,
        in the caller's transaction (:mod:`feltdb.storage.joined`).
        """
        self._dialect.ensure_open()
        session = self._dialect.join(connection)
        notify = self._queries["notify_wakeup"] if self.wakeups is not None else None
        joined = SQLEngine(self.target, JoinedDialect(self._dialect, session, notify))
        joined.joined_to = self
        return joined

    def _limit(self, limit: int | None) -> int | None:
        # A negative LIMIT is no limit: SQLite reads it so, PostgreSQL would refuse it.
        return self._dialect.no_limit if limit is None or limit < 0 else limit

    def _select(self, name: str, params: Mapping[str, Any]) -> list[StoredRow]:
        return [stored_row(*row) for row in self._dialect.read(self._queries[name], params)]

    def get_row(self, collection: str, key: str) -> StoredRow | None:
        """See :meth:`Database.get_row`; one seek of the primary key."""
        rows = self._select("get_row", {"collection": collection, "key": key})
        return rows[0] if rows else None

    def get_rows(self, collection: str, keys: Sequence[str]) -> dict[str, StoredRow]:
        """See :meth:`Database.get_rows`; one primary key seek a key."""
        if not keys:
            return {}
        params = {"collection": collection, "keys": self._listed(keys)}
        return {row.key: row for row in self._select("get_rows", params)}

    def list_rows(
        self,
        collection: str,
        *,
        tenant_id: str | None = None,
        application_id: str | None = None,
        state: str | None = None,
        limit: int | None = None,
    ) -> list[StoredRow]:
        """See :meth:`Database.list_rows`. With ``tenant_id`` and ``application_id`` (and
        optionally ``state``) the rows come from an index in order; other filters read the
        collection and sort it.
        """
        if tenant_id is not None and application_id is not None:
            name = "list_rows_by_application" if state is None else "list_rows_by_state"
        else:
            name = "list_rows"
        params = {
            "collection": collection,
            "tenant_id": tenant_id,
            "application_id": application_id,
            "state": state,
            "limit": self._limit(limit),
        }
        return self._select(name, params)

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
        """See :meth:`Database.page_rows` and :func:`~feltdb.storage.encoding.keyset_page`."""
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
        return keyset_page(self._select, collection, tenant_id, application_id, state, after, limit)

    def rows_due(self, collection: str, column: str, now: int, *, limit: int) -> list[StoredRow]:
        """See :meth:`Database.rows_due`; by key among rows due at the same instant, read
        from a partial index of ``column``.

        Raises:
            WorkloadError: ``WORKLOAD_INVALID`` for another column.
        """
        name = _DUE_QUERIES.get(column)
        if name is None:
            raise invalid(f"rows_due column must be one of {sorted(_DUE_QUERIES)}, not {column!r}")
        return self._select(
            name, {"collection": collection, "now": now, "limit": self._limit(limit)}
        )

    def rows_with_result_ids(
        self, collection: str, result_ids: Sequence[str]
    ) -> dict[str, list[StoredRow]]:
        """See :meth:`Database.rows_with_result_ids`; one seek of the index a result id."""
        found: dict[str, list[StoredRow]] = {}
        if not result_ids:
            return found
        params = {"collection": collection, "result_ids": self._listed(sorted(set(result_ids)))}
        # Ordered here, not by SQL: an ORDER BY over several seeks of the index would sort.
        fetched = self._dialect.read(self._queries["rows_with_result_ids"], params)
        for result_id, *row in sorted(fetched, key=lambda row: (row[0], row[2])):
            found.setdefault(str(result_id), []).append(stored_row(*row))
        return found

    def _listed(self, values: Sequence[str]) -> Any:
        """``values`` as the dialect binds a list of keys (at most a batch's)."""
        if len(values) > MAX_PLANS_PER_BATCH:
            raise invalid(f"at most {MAX_PLANS_PER_BATCH} keys are read at once, not {len(values)}")
        return self._dialect.stored_list(list(values))

    def count_by_state(self, collection: str) -> dict[str, int]:
        """See :meth:`Database.count_by_state` (one ``GROUP BY`` over the state index)."""
        fetched = self._dialect.read(self._queries["count_by_state"], {"collection": collection})
        return {str(state): int(count) for state, count in fetched}

    def oldest_by_definition(self, collection: str, state: str) -> dict[str, tuple[int, int]]:
        """See :meth:`Database.oldest_by_definition` (one ``GROUP BY`` over the index)."""
        params = {"collection": collection, "state": state}
        fetched = self._dialect.read(self._queries["oldest_by_definition"], params)
        return {str(d): (int(count), int(oldest)) for d, count, oldest in fetched}

    def recent_operations(
        self, tenant_id: str, application_id: str, since: float, scan: int
    ) -> tuple[list[Activity], float | None]:
        """See :meth:`Database.recent_operations` (two reads: the entries, and the time
        at the scan's depth).
        """
        if scan <= 0:
            return [], None
        params = {
            "tenant_id": tenant_id, "application_id": application_id, "since": since,
            "scan": scan,
        }  # fmt: skip
        found = self._dialect.read(self._queries["recent_operations"], params)
        floor = self._dialect.read(self._queries["log_time_at_depth"], {"depth": scan - 1})
        entries = [
            Activity(float(at), op, work, state, worker) for at, op, work, state, worker in found
        ]
        return entries, float(floor[0][0]) if floor else None

    def current_revision(self) -> int:
        """See :meth:`Database.current_revision`."""
        revision: int = self._dialect.read(self._queries["current_revision"], {})[0][0]
        return revision

    def committed_transactions_after(
        self, revision: int, limit: int | None = None
    ) -> list[CommittedTransaction]:
        """See :meth:`Database.committed_transactions_after` (``limit`` ``None``: all)."""
        params = {"revision": revision, "limit": self._limit(limit)}
        return self._logged("transactions_after", params)

    def committed_transactions_before(
        self, revision: int, limit: int
    ) -> list[CommittedTransaction]:
        """See :meth:`Database.committed_transactions_before`."""
        if limit <= 0:
            return []
        return self._logged("transactions_before", {"revision": revision, "limit": limit})

    def _logged(self, query: str, params: dict[str, Any]) -> list[CommittedTransaction]:
        """The log entries the named ``query`` selects, in its order."""
        fetched = self._dialect.read(self._queries[query], params)
        loaded = self._dialect.loaded_list
        return [
            logged_transaction(done, base, tx, at, loaded(ops), loaded(keys), audit)
            for done, base, tx, at, ops, keys, audit in fetched
        ]

    # --- writes ------------------------------------------------------------------------

    def commit(
        self,
        operation_id: str,
        mutations: Sequence[Mutation],
        preconditions: Sequence[Precondition] = (),
        audit: Mapping[str, Any] | None = None,
    ) -> Commit:
        """See :meth:`Database.commit`. Each written row's version is its previous version
        + 1, or 1 for a new row; the commit is logged with ``operation_id``, the written
        keys and ``audit``. Validated and serialized before any lock is taken.
        """
        self._dialect.ensure_open()
        plan = PlannedCommit(operation_id, mutations, preconditions, audit)
        prepared = prepare(self._dialect, plan)
        return self._dialect.transact(
            "commit", lambda session: write_plan(session, self._queries, prepared)
        )

    def commit_many(self, plans: Sequence[PlannedCommit]) -> list[Commit | StorageConflict]:
        """See :meth:`Database.commit_many`: every plan validated and serialized before any
        lock is taken, then written in one transaction by
        :func:`~feltdb.storage.writes.write_batch` (a ``SAVEPOINT`` only around a plan of
        two guards or more; by arrays where the dialect has ``array_writes``).
        """
        self._dialect.ensure_open()
        if not plans:
            return []
        batch = prepare_batch(self._dialect, plans)
        arrays = self._dialect.array_writes
        return self._dialect.transact(
            "commit", lambda session: write_batch(session, self._queries, batch, arrays=arrays)
        )

    def update_index(self, collection: str, key: str, index: RowIndex) -> bool:
        """See :meth:`Database.update_index`: one ``UPDATE`` of the index columns; nothing
        is logged.
        """
        self._dialect.ensure_open()
        params = {**index_params(index), "collection": collection, "key": key}
        query = self._queries["update_index"]
        return self._dialect.transact(
            "update index", lambda session: session.execute(query, params).rowcount > 0
        )

    def commit_selected(
        self,
        collection: str,
        tenant_id: str,
        application_id: str,
        state: str,
        now: int,
        choose: Callable[[Sequence[StoredRow], RowReader], PlannedCommit | None],
        *,
        limit: int,
        offset: int = 0,
        partitions: ClaimPartitions | None = None,
    ) -> Commit | None:
        """See :meth:`Database.commit_selected`: :meth:`commit_selected_many` of the one
        plan ``choose`` answers.
        """

        def choose_one(rows: Sequence[StoredRow], read: RowReader) -> list[PlannedCommit]:
            plan = choose(rows, read)
            return [] if plan is None else [plan]

        outcomes = self.commit_selected_many(
            collection, tenant_id, application_id, state, now, choose_one,
            limit=limit, offset=offset, partitions=partitions,
        )  # fmt: skip
        if not outcomes:
            return None
        [outcome] = outcomes
        if isinstance(outcome, StorageConflict):
            raise outcome
        return outcome

    def commit_selected_many(
        self,
        collection: str,
        tenant_id: str,
        application_id: str,
        state: str,
        now: int,
        choose: Callable[[Sequence[StoredRow], RowReader], Sequence[PlannedCommit | SetAside]],
        *,
        limit: int,
        offset: int = 0,
        partitions: ClaimPartitions | None = None,
    ) -> list[Commit | StorageConflict]:
        """See :meth:`Database.commit_selected_many`; ``claimable_rows`` (``partitions``:
        ``claimable_rows_in_group`` of each group :func:`~feltdb.storage.partitions.accepted_groups`
        accepts) select and lock the rows; the plans are written as :meth:`commit_many` does.
        """
        self._dialect.ensure_open()
        self.statistics_before_selecting()
        params = {
            "collection": collection,
            "tenant_id": tenant_id,
            "application_id": application_id,
            "state": state,
            "now": now,
            "limit": self._limit(limit),
            "offset": max(offset, 0),  # a negative OFFSET is none, as SQLite reads it
        }

        groups = None if partitions is None else self._walk(params, partitions)
        if groups == []:
            return []  # nothing it may take: no transaction at all, so no write lock

        def work(session: Session) -> list[Commit | StorageConflict]:
            def read(row_collection: str, key: str) -> StoredRow | None:
                found = session.execute(
                    self._queries["get_row"], {"collection": row_collection, "key": key}
                ).fetchall()
                return stored_row(*found[0]) if found else None

            select = Selection(session, self._queries, self._limit, params)
            selected = select.rows(groups, offset, limit, partitions)
            plans = write_set_aside(
                session, self._queries, choose(RowsDecodedOnRead(selected), read)
            )
            if not plans:
                # No plan to write: the transaction commits (which ends it and its row
                # locks, and keeps any row set aside) rather than rolling back, for
                # psycopg drops every prepared statement of a connection on a rollback,
                # and an idle queue answers this.
                return []
            batch = prepare_batch(self._dialect, plans)
            return write_batch(session, self._queries, batch, arrays=self._dialect.array_writes)

        return self._dialect.transact("commit", work)

    def close(self) -> None:
        """See :meth:`Database.close`."""
        self._dialect.close()

    def _walk(
        self, params: Mapping[str, Any], partitions: ClaimPartitions
    ) -> list[tuple[str, str]] | None:
        # The groups are walked before the write transaction, by reads of their own: on a
        # backend with one writer, ready work nobody here may take never holds its lock.
        # None: too many groups to walk; the selection is by state instead.
        collection = params["collection"]
        return accepted_groups(
            lambda name, named: self._dialect.read(self._queries[name], named),
            lambda key: self.get_row(collection, key),
            params,
            partitions,
        )
