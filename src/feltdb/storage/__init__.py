"""Where feltdb keeps its state: the storage protocol and its records.

The protocol and its records are internal to feltdb (see :mod:`feltdb.storage.base`);
:func:`feltdb.storage.targets.open_database` opens a backend. This package imports no
backend, so reading its records costs no driver.
"""

from __future__ import annotations

from feltdb.storage.base import (
    Commit,
    CommittedTransaction,
    Database,
    Mutation,
    PlannedCommit,
    Precondition,
    RowIndex,
    StorageConflict,
    StoredRow,
)
from feltdb.storage.wakeups import Wakeups

__all__ = [
    "Commit",
    "CommittedTransaction",
    "Database",
    "Mutation",
    "PlannedCommit",
    "Precondition",
    "RowIndex",
    "StorageConflict",
    "StoredRow",
    "Wakeups",
]
