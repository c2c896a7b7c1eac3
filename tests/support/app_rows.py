"""An application's own rows beside feltdb's: its connection to the store's database (a
``sqlite3`` one to the file, a ``psycopg`` one to the PostgreSQL database), its
transactions, and an ``orders`` table, for the tests of admission in the caller's
transaction.
"""

from __future__ import annotations

import sqlite3
from typing import Any

import psycopg

from feltdb import WorkloadStore

Connection = sqlite3.Connection | psycopg.Connection[Any]


def connect(target: str, **options: Any) -> Connection:
    """The application's own connection to the store at ``target``, no transaction open
    (psycopg's opens with its first statement; SQLite's with :func:`begin`).
    """
    if target.startswith("postgresql"):
        return psycopg.connect(target, **options)
    return sqlite3.connect(target, isolation_level=None, **options)


def begin(connection: Connection) -> None:
    if isinstance(connection, sqlite3.Connection):
        connection.execute("BEGIN IMMEDIATE")


def commit(connection: Connection) -> None:
    if isinstance(connection, sqlite3.Connection):
        connection.execute("COMMIT")
    else:
        connection.commit()


def rollback(connection: Connection) -> None:
    if isinstance(connection, sqlite3.Connection):
        connection.execute("ROLLBACK")
    else:
        connection.rollback()


def create_orders(target: str) -> None:
    """Make the application's ``orders`` table in the store's database (made first, if
    new: feltdb opens only a file it created).
    """
    WorkloadStore.open(target).close()
    with connect(target) as connection:
        begin(connection)
        connection.execute("CREATE TABLE orders (id TEXT PRIMARY KEY)")
        commit(connection)


def insert_order(connection: Connection, order_id: str) -> None:
    marker = "?" if isinstance(connection, sqlite3.Connection) else "%s"
    connection.execute(f"INSERT INTO orders (id) VALUES ({marker})", (order_id,))  # type: ignore[arg-type]


def orders(target: str) -> set[str]:
    """The ids of the committed orders."""
    connection = connect(target)
    try:
        return {row[0] for row in connection.execute("SELECT id FROM orders").fetchall()}
    finally:
        connection.close()
