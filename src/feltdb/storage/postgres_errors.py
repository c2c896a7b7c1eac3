"""PostgreSQL's driver errors translated, in one place: out-of-range integers and values
PostgreSQL cannot store as ``WORKLOAD_INVALID``, everything else as
``WORKLOAD_STORAGE_FAILURE`` naming the store and what it was doing.
"""

from __future__ import annotations

from typing import Final

import psycopg
import psycopg.errors
from psycopg_pool import PoolClosed, PoolTimeout

from feltdb.errors import ErrorCode, WorkloadError
from feltdb.storage.base import storage_failure
from feltdb.storage.dialect import ErrorTranslation
from feltdb.storage.encoding import invalid

__all__ = ["RETRYABLE", "PostgresErrors", "describe"]

RETRYABLE: Final = (
    psycopg.errors.SerializationFailure,
    psycopg.errors.DeadlockDetected,
    psycopg.errors.LockNotAvailable,
)
"""Errors after which PostgreSQL has rolled the transaction back and running it again from
the start may succeed: the retryable errors, listed in one place."""


def describe(error: BaseException) -> str:
    """``error`` in one line, with its class and SQLSTATE when it has one."""
    sqlstate = getattr(error, "sqlstate", None)
    text = str(error).strip() or type(error).__name__
    return f"{text} ({type(error).__name__}, SQLSTATE {sqlstate})" if sqlstate else text


class PostgresErrors(ErrorTranslation):
    """Out-of-range integers and values PostgreSQL cannot store as ``WORKLOAD_INVALID``;
    everything else (a lost connection, a pool timeout, a server error) as
    ``WORKLOAD_STORAGE_FAILURE``, a :data:`RETRYABLE` one with the details
    ``{"retryable": true, "sqlstate": …}``.
    """

    __slots__ = ("target", "timeout")

    def __init__(self, target: str, doing: str, timeout: float) -> None:
        super().__init__(doing)
        self.target = target
        self.timeout = timeout

    def translated(self, error: BaseException) -> WorkloadError | None:
        """See :meth:`ErrorTranslation.translated`."""
        where = f"PostgreSQL store {self.target}: {self.doing}"
        if isinstance(error, psycopg.errors.NumericValueOutOfRange):
            return invalid(f"{where}: an integer is outside the 64-bit range PostgreSQL stores")
        if isinstance(error, psycopg.DataError | UnicodeEncodeError):
            # Raised for values PostgreSQL cannot store (text with a NUL character, a lone
            # surrogate that is not UTF-8): bad input, not a broken store.
            return invalid(f"{where}: a value cannot be stored: {describe(error)}")
        if isinstance(error, PoolClosed):
            return storage_failure(f"database is closed: {self.target}")
        if isinstance(error, PoolTimeout):
            return storage_failure(
                f"{where} failed: no connection to the server within {self.timeout:g} s "
                f"({describe(error)})"
            )
        if isinstance(error, RETRYABLE):
            # Reached in a caller's transaction (the store runs its own again): only the
            # caller can run its transaction again, and the details tell it it may.
            return WorkloadError(
                ErrorCode.WORKLOAD_STORAGE_FAILURE,
                f"{where} failed: {describe(error)}; the transaction may succeed run again",
                {"retryable": True, "sqlstate": error.sqlstate},
            )
        if isinstance(error, psycopg.Error):
            return storage_failure(f"{where} failed: {describe(error)}")
        return None
