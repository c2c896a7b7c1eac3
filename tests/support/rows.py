"""Factories for storage-level tests: scheduling indexes, rows, and their keys."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from feltdb.storage import Database, Mutation, RowIndex, StoredRow


def work_index(
    state: str = "ready",
    priority: int = 0,
    created_at: int = 0,
    eligible_at: int | None = None,
    *,
    tenant_id: str = "t1",
    application_id: str = "app1",
) -> RowIndex:
    """The index of a row of tenant ``t1``, application ``app1`` (unless told otherwise)."""
    return RowIndex(
        tenant_id=tenant_id,
        application_id=application_id,
        state=state,
        priority=priority,
        created_at=created_at,
        eligible_at=eligible_at,
    )


def put(db: Database, key: str, index: RowIndex | None = None, **document: Any) -> None:
    """Write ``work/key`` unguarded (the document is ``{"k": key}`` unless given)."""
    db.commit(f"put:{key}", [Mutation("work", key, document or {"k": key}, index or RowIndex())])


def ready(db: Database, key: str, priority: int) -> None:
    """A claimable row ``key`` of ``priority`` (its document is ``{"n": key}``)."""
    put(db, key, work_index(priority=priority), n=key)


def keys(rows: Iterable[StoredRow]) -> list[str]:
    return [row.key for row in rows]


_UNVERSION = {
    # An older release kept no "__version" in the document: what it wrote reads as
    # version 1. Written below the protocol, which never writes such a row.
    "sqlite": "UPDATE rows SET version = 1, document = :document "
    "WHERE collection = :collection AND key = :key",
    "postgres": "UPDATE rows SET version = 1, document = %(document)s "
    "WHERE collection = %(collection)s AND key = %(key)s",
}


def write_pre_versioned_row(
    db: Database, collection: str, key: str, document: dict[str, Any]
) -> None:
    """Overwrite the existing row ``collection/key`` as an older release wrote it: the
    document (any ``"__version"`` dropped) at version 1, unguarded and unlogged.
    """
    import json

    from feltdb.storage.sqlite import SQLiteDatabase

    unversioned = {name: value for name, value in document.items() if name != "__version"}
    query = _UNVERSION["sqlite" if isinstance(db, SQLiteDatabase) else "postgres"]
    params = {"collection": collection, "key": key, "document": json.dumps(unversioned)}
    dialect = db._dialect  # type: ignore[attr-defined]  # a fixture below the protocol
    dialect.transact("fixture", lambda session: session.execute(query, params))


def _index_rows(target: str, query: str, params: list[Any]) -> list[tuple[Any, ...]]:
    """Rows of ``query`` (``{0}``: the placeholder) run below the protocol on ``target``."""
    if target.startswith("postgresql"):
        import psycopg

        with psycopg.connect(target) as connection:
            return list(connection.execute(query.format("%s"), params).fetchall())
    import sqlite3

    connection = sqlite3.connect(target)
    try:
        return list(connection.execute(query.format("?"), params).fetchall())
    finally:
        connection.close()


def waiting_on(target: str, collection: str, key: str) -> tuple[str | None, str | None]:
    """What the row ``collection/key`` of the store at ``target`` is set aside waiting on
    and for (``(None, None)``: it is not set aside)."""
    query = "SELECT waits_on, waits_for FROM rows WHERE collection = {0} AND key = {0}"
    [row] = _index_rows(target, query, [collection, key])
    return row[0], row[1]


def set_aside_keys(target: str, collection: str) -> set[str]:
    """The keys of the rows of ``collection`` set aside, each waiting on another row."""
    query = "SELECT key FROM rows WHERE collection = {0} AND waits_on IS NOT NULL"
    return {row[0] for row in _index_rows(target, query, [collection])}
