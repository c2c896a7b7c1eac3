"""A writer that does not re-read: a ``Database`` whose workload reads answer from a
snapshot taken when it was made.

It reproduces another writer committing between a read and a commit, the window only the
storage guard closes (the reference's ``without_refresh``): commits go to the real
database, guarded as ever; a commit that loses its guard adopts the committed rows it
named, so the writer does not keep acting on a version that no longer exists.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from feltdb.records.workload import DURABLE_WORK_COLLECTION, Workload
from feltdb.storage import Commit, Database, Mutation, Precondition, StorageConflict, StoredRow
from feltdb.work.rows import planned_commit
from feltdb.work.scheduling import row_index
from feltdb.work.store import WorkloadStore


class PinnedReads:
    """``db`` with its workload rows read from a snapshot (an empty one if ``empty``)."""

    def __init__(self, db: Database, *, empty: bool = False) -> None:
        self.db = db
        self.target = db.target
        self.rows: dict[str, StoredRow] = (
            {} if empty else {row.key: row for row in db.list_rows(DURABLE_WORK_COLLECTION)}
        )

    def __getattr__(self, name: str) -> Any:
        return getattr(self.db, name)  # everything not pinned is the real database's

    def get_row(self, collection: str, key: str) -> StoredRow | None:
        if collection != DURABLE_WORK_COLLECTION:
            return self.db.get_row(collection, key)
        return self.rows.get(key)

    def list_rows(
        self,
        collection: str,
        *,
        tenant_id: str | None = None,
        application_id: str | None = None,
        state: str | None = None,
        limit: int | None = None,
    ) -> list[StoredRow]:
        if collection != DURABLE_WORK_COLLECTION:
            return self.db.list_rows(collection, tenant_id=tenant_id, application_id=application_id)
        wanted = {"tenant_id": tenant_id, "application_id": application_id, "state": state}
        found = [
            row
            for row in self.rows.values()
            if all(
                value is None or row.document.get(name) == value for name, value in wanted.items()
            )
        ]
        found.sort(key=lambda r: (-r.document["priority"], r.document["created_at"], r.key))
        return found[:limit]

    def rows_due(self, collection: str, column: str, now: int, *, limit: int) -> list[StoredRow]:
        due = []
        for row in self.rows.values():
            value = getattr(row_index(Workload.parse(row.document)), column)
            if value is not None and value <= now:
                due.append((value, row.key, row))
        return [row for _, _, row in sorted(due, key=lambda d: d[:2])][:limit]

    def get_rows(self, collection: str, keys: Sequence[str]) -> dict[str, StoredRow]:
        if collection != DURABLE_WORK_COLLECTION:
            return self.db.get_rows(collection, keys)
        return {key: self.rows[key] for key in keys if key in self.rows}

    def rows_with_result_ids(
        self, collection: str, result_ids: Sequence[str]
    ) -> dict[str, list[StoredRow]]:
        found: dict[str, list[StoredRow]] = {}
        for row in sorted(self.rows.values(), key=lambda row: row.key):
            result_id = (row.document.get("result") or {}).get("result_id")
            if result_id in result_ids:
                found.setdefault(result_id, []).append(row)
        return found

    def commit(
        self,
        operation_id: str,
        mutations: Sequence[Mutation],
        preconditions: Sequence[Precondition] = (),
        audit: Any = None,
    ) -> Commit:
        try:
            commit = self.db.commit(operation_id, mutations, preconditions, audit)
        except StorageConflict:
            for precondition in preconditions:
                self._adopt(precondition.key)
            raise
        self._remember(commit)
        return commit

    def commit_many(self, plans: Sequence[Any]) -> list[Commit | StorageConflict]:
        outcomes = self.db.commit_many(plans)
        for plan, outcome in zip(plans, outcomes, strict=True):
            if isinstance(outcome, StorageConflict):
                for precondition in plan.preconditions:
                    self._adopt(precondition.key)
            else:
                self._remember(outcome)
        return outcomes

    def commit_selected(self, *args: Any, **kwargs: Any) -> Commit | None:
        commit: Commit | None = self.db.commit_selected(*args, **kwargs)
        if commit is not None:
            self._remember(commit)
        return commit

    def _adopt(self, key: str) -> None:
        row = self.db.get_row(DURABLE_WORK_COLLECTION, key)
        if row is None:
            self.rows.pop(key, None)
        else:
            self.rows[key] = row

    def _remember(self, commit: Commit) -> None:
        for row in commit.rows:
            if row.collection == DURABLE_WORK_COLLECTION:
                self.rows[row.key] = row


def pinned_store(store: WorkloadStore, *, empty: bool = False) -> WorkloadStore:
    """A second store over ``store``'s database that reads from a snapshot taken now."""
    pinned: Callable[..., Database] = PinnedReads
    return WorkloadStore(pinned(store.db, empty=empty), max_lease_ms=store.max_lease_ms)


def commit_unchecked(store: WorkloadStore, workload: Workload) -> None:
    """Commit ``workload`` as it is, over whatever version is committed now: a fixture
    for records no operation would make (say, a budget an older release overspent).
    """
    row = store.db.get_row(DURABLE_WORK_COLLECTION, workload.workload_id)
    version = row.version if row is not None else None
    plan = planned_commit(workload, "fixture.unchecked", version)
    store.db.commit(plan.operation_id, plan.mutations, plan.preconditions, plan.audit)
