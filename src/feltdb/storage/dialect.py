"""What a backend supplies to :class:`~feltdb.storage.engine.SQLEngine`: the few things in
which databases differ.

A backend connects, keeps its schema, and implements :class:`Dialect`: it runs a read, runs
a write transaction with its own locking and retries, translates its driver's errors into
:class:`~feltdb.errors.WorkloadError` (an :class:`ErrorTranslation` around both), and says
how the log's lists of strings are stored. Everything else is the engine's, once.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import TracebackType
from typing import TYPE_CHECKING, Any, LiteralString, Protocol, TypeVar

from feltdb.errors import WorkloadError

if TYPE_CHECKING:
    from feltdb.storage.joined import JoinedSession

__all__ = ["Cursor", "Dialect", "ErrorTranslation", "Session"]

_Result = TypeVar("_Result")


class Cursor(Protocol):
    """What a statement returns: its rows (those of a ``SELECT`` or a ``RETURNING``) and
    how many rows it changed.
    """

    @property
    def rowcount(self) -> int:
        """How many rows the statement changed."""
        ...

    def fetchall(self) -> list[Any]:
        """Every row the statement returned, as tuples."""
        ...


class Session(Protocol):
    """A connection inside one write transaction (``sqlite3`` and ``psycopg`` alike)."""

    def execute(self, query: LiteralString, params: Mapping[str, Any], /) -> Cursor:
        """Run one statement with named parameters."""
        ...


class Dialect(Protocol):
    """What a backend supplies to :class:`SQLEngine`: everything that differs."""

    queries: Mapping[str, LiteralString]
    """The dialect's named statements (``sql/<dialect>/queries.sql``)."""

    no_limit: int | None
    """The ``LIMIT`` parameter that means no limit."""

    array_writes: bool
    """Whether a batch of single-row plans may be written by arrays, in a few statements
    whatever its size (:mod:`feltdb.storage.array_writes`; its statements are in
    ``queries``): worth it where each statement is a round trip to a server (PostgreSQL),
    not where it is a call into the same process (SQLite).
    """

    def ensure_open(self) -> None:
        """Raise ``WORKLOAD_STORAGE_FAILURE`` once the database is closed."""
        ...

    def read(self, query: LiteralString, params: Mapping[str, Any]) -> list[Any]:
        """The rows of one read statement, run on its own, driver errors translated."""
        ...

    def transact(self, doing: str, work: Callable[[Session], _Result]) -> _Result:
        """``work``'s answer, run in one write transaction that commits when it returns
        and writes nothing when it raises; driver errors translated (naming ``doing``).

        ``work`` may be run again from the start after a failure the backend retries.
        """
        ...

    def errors(self, doing: str) -> ErrorTranslation:
        """The context manager that translates the driver's errors (naming ``doing``)."""
        ...

    def join(self, connection: object) -> JoinedSession:
        """The caller's open transaction on ``connection`` (see
        :mod:`feltdb.storage.joined`), once checked: a connection of this backend's driver
        to this database, inside a transaction.

        Raises:
            WorkloadError: ``WORKLOAD_INVALID`` naming what the connection is not.
        """
        ...

    def stored_list(self, values: list[str]) -> Any:
        """A list of strings as the log's ``operation_ids`` and ``keys`` columns take it."""
        ...

    def loaded_list(self, stored: Any) -> list[str]:
        """A list of strings as those columns read back."""
        ...

    def close(self) -> None:
        """Release every connection; later calls fail. Closing twice is harmless."""
        ...


class ErrorTranslation:
    """A context manager that raises :meth:`translated` in place of a driver error, with
    the driver's as its cause; :class:`WorkloadError` (a conflict too) passes unchanged.

    A class rather than a ``@contextmanager`` generator: one is entered on every read and
    write, and costs a third as much (about 0.3 µs against 0.9 µs, measured on 3.11).
    """

    __slots__ = ("doing",)

    def __init__(self, doing: str) -> None:
        self.doing = doing

    def translated(self, error: BaseException) -> WorkloadError | None:
        """The error to raise for ``error``; ``None`` lets ``error`` itself through."""
        raise NotImplementedError

    def __enter__(self) -> None:
        return None

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if error is None or isinstance(error, WorkloadError):
            return
        translation = self.translated(error)
        if translation is not None:
            raise translation from error
