"""What the audit chain reads and writes of a database: the log entries with the row hashes
they logged, the sealed links, and the rows as stored, with their index columns
(:mod:`feltdb.storage.audit_chain` decides what they prove).

:class:`ChainLog` is the part of the :class:`~feltdb.storage.base.Database` protocol the
chain needs; :class:`ChainQueries` implements it once over a dialect's named statements, for
:class:`~feltdb.storage.engine.SQLEngine`. Lists of revisions and of links are passed to the
statements as one JSON text, which both dialects unpack; so are lists of addresses, each a
``[collection, key]`` pair.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, LiteralString, Protocol

from feltdb.storage.dialect import Dialect, Session

__all__ = ["ChainLink", "ChainLog", "ChainQueries", "LogEntry", "RawRow"]


@dataclass(frozen=True, slots=True)
class LogEntry:
    """One log entry as stored, every field the chain's digest covers."""

    commit_revision: int
    base_revision: int
    transaction_id: str
    committed_at: float
    operation_ids: list[str]
    keys: list[str]
    """``"collection/key"`` of each row written, in mutation order."""
    audit: str | None
    """The audit record's stored text (canonical JSON), or ``None``."""
    row_hashes: list[str] | None
    """Each written row's :func:`~feltdb.storage.audit_chain.row_hash`, in ``keys`` order
    (``""``: deleted); ``None`` for an entry logged before the chain existed.
    """


@dataclass(frozen=True, slots=True)
class ChainLink:
    """One sealed entry of the chain."""

    commit_revision: int
    previous_revision: int
    """The revision of the entry sealed before it (0 for the first)."""
    digest: str
    """SHA-256 (hex) of the entry's content when it was sealed."""
    link: str
    """SHA-256 (hex) of the previous link, the revision and the digest."""


@dataclass(frozen=True, slots=True)
class RawRow:
    """A row as stored: its document's stored text, not decoded."""

    collection: str
    key: str
    version: int
    revision: int
    document: str
    index: tuple[Any, ...] = ()
    """The index columns as stored, in :class:`~feltdb.storage.base.RowIndex`'s field
    order (empty: not read), each as the database holds it.
    """


class ChainLog(Protocol):
    """The reads and the one write of the audit chain."""

    def chain_entries_after(self, revision: int, limit: int) -> list[LogEntry]:
        """Log entries after ``revision``, oldest first, at most ``limit``; on PostgreSQL
        only those below every open transaction's revisions (their set is final).
        """
        ...

    def chain_entries_at(self, revisions: Collection[int]) -> dict[int, LogEntry]:
        """The log entries at these revisions, by revision (a missing one is absent)."""
        ...

    def chain_head(self) -> ChainLink | None:
        """The last sealed link; ``None`` before the first seal."""
        ...

    def chain_links_between(self, after: int, through: int, limit: int) -> list[ChainLink]:
        """Sealed links with ``after < commit_revision <= through``, in revision order, at
        most ``limit``.
        """
        ...

    def seal_chain(self, links: Sequence[ChainLink]) -> None:
        """Store these links in one transaction; a revision already sealed keeps its link."""
        ...

    def rows_after(self, collection: str, key: str, limit: int) -> list[RawRow]:
        """Rows after ``(collection, key)`` in address order, at most ``limit``."""
        ...

    def rows_indexed_after(self, collection: str, key: str, limit: int) -> list[RawRow]:
        """:meth:`rows_after`, each row with its :attr:`RawRow.index`."""
        ...

    def row_revisions_at(self, addresses: Collection[tuple[str, str]]) -> dict[str, int]:
        """The revision of each row that exists at these ``(collection, key)`` addresses, by
        ``"collection/key"`` (an absent row is absent; a revision edited to another type,
        -1).
        """
        ...

    def chain_keys_after(self, revision: int, limit: int) -> list[tuple[int, list[str]]]:
        """The revision and written keys of each log entry after ``revision``, oldest
        first, at most ``limit``: every entry committed, on PostgreSQL those not final yet
        too (unlike :meth:`chain_entries_after`).
        """
        ...

    def delete_log_through(self, through: int, limit: int) -> int:
        """Delete the oldest log entries at or below revision ``through``, at most
        ``limit``, in one transaction; how many were deleted. Their links stay in the
        chain (:mod:`feltdb.work.log_pruning` says when an entry may go).
        """
        ...


class ChainQueries:
    """:class:`ChainLog` over a dialect's named statements (a base of ``SQLEngine``)."""

    _dialect: Dialect
    _queries: Mapping[str, LiteralString]

    def chain_entries_after(self, revision: int, limit: int) -> list[LogEntry]:
        """See :meth:`ChainLog.chain_entries_after`."""
        params = {"revision": revision, "limit": limit}
        return [self._entry(row) for row in self._read("chain_entries_after", params)]

    def chain_entries_at(self, revisions: Collection[int]) -> dict[int, LogEntry]:
        """See :meth:`ChainLog.chain_entries_at`."""
        if not revisions:
            return {}
        params = {"revisions": json.dumps(sorted(revisions))}
        entries = (self._entry(row) for row in self._read("chain_entries_at", params))
        return {entry.commit_revision: entry for entry in entries}

    def chain_head(self) -> ChainLink | None:
        """See :meth:`ChainLog.chain_head`."""
        found = self._read("chain_head", {})
        return ChainLink(*found[0]) if found else None

    def chain_links_between(self, after: int, through: int, limit: int) -> list[ChainLink]:
        """See :meth:`ChainLog.chain_links_between`."""
        params = {"after": after, "through": through, "limit": limit}
        return [ChainLink(*row) for row in self._read("chain_links_between", params)]

    def seal_chain(self, links: Sequence[ChainLink]) -> None:
        """See :meth:`ChainLog.seal_chain`."""
        self._dialect.ensure_open()
        if not links:
            return
        params = {"links": json.dumps([asdict(link) for link in links])}
        query = self._queries["seal_chain"]

        def seal(session: Session) -> None:
            session.execute(query, params)

        self._dialect.transact("seal the audit chain", seal)

    def rows_after(self, collection: str, key: str, limit: int) -> list[RawRow]:
        """See :meth:`ChainLog.rows_after`."""
        params = {"collection": collection, "key": key, "limit": limit}
        return [_raw_row(*row) for row in self._read("rows_after", params)]

    def rows_indexed_after(self, collection: str, key: str, limit: int) -> list[RawRow]:
        """See :meth:`ChainLog.rows_indexed_after`."""
        params = {"collection": collection, "key": key, "limit": limit}
        fetched = self._read("rows_indexed_after", params)
        return [_raw_row(*row[:5], index=tuple(row[5:])) for row in fetched]

    def row_revisions_at(self, addresses: Collection[tuple[str, str]]) -> dict[str, int]:
        """See :meth:`ChainLog.row_revisions_at`."""
        if not addresses:
            return {}
        params = {"addresses": json.dumps(sorted(addresses))}
        return {
            f"{collection}/{key}": revision if type(revision) is int else -1
            for collection, key, revision in self._read("row_revisions_at", params)
        }

    def chain_keys_after(self, revision: int, limit: int) -> list[tuple[int, list[str]]]:
        """See :meth:`ChainLog.chain_keys_after`."""
        params = {"revision": revision, "limit": limit}
        fetched = self._read("chain_keys_after", params)
        return [(int(done), self._list(keys)) for done, keys in fetched]

    def delete_log_through(self, through: int, limit: int) -> int:
        """See :meth:`ChainLog.delete_log_through`."""
        self._dialect.ensure_open()
        query = self._queries["delete_log_through"]
        params = {"through": through, "limit": limit}

        def delete(session: Session) -> int:
            return len(session.execute(query, params).fetchall())

        return self._dialect.transact("prune the log", delete)

    def _read(self, name: str, params: Mapping[str, Any]) -> list[Any]:
        return self._dialect.read(self._queries[name], params)

    def _entry(self, row: Sequence[Any]) -> LogEntry:
        done, base, transaction_id, at, operations, keys, audit, hashes = row
        # Read as stored: a field edited to another type is kept as it is, and its
        # digest is no longer the sealed one (never an exception here).
        return LogEntry(
            int(done),
            base,
            transaction_id,
            at,
            self._list(operations),
            self._list(keys),
            audit,
            None if hashes is None else self._list(hashes),
        )

    def _list(self, stored: Any) -> list[str]:
        # A list edited behind the authority's back may not read back as one: it is kept
        # as a one-element list of its text, whose digest is no longer the sealed one.
        try:
            loaded = self._dialect.loaded_list(stored)
        except (TypeError, ValueError, RecursionError):
            return [f"unreadable: {stored!r}"]
        if not isinstance(loaded, list) or not all(isinstance(v, str) for v in loaded):
            return [f"unreadable: {stored!r}"]
        return loaded


def _raw_row(
    collection: str,
    key: str,
    version: Any,
    revision: Any,
    document: Any,
    /,
    *,
    index: tuple[Any, ...] = (),
) -> RawRow:
    """A row as read; a column edited to another type (SQLite keeps any) is read as a
    revision that names no entry (-1), or as the text of what it holds, so that the check
    reports it instead of raising. ``index``: its index columns as read (if they were).
    """
    return RawRow(
        collection,
        key,
        version if type(version) is int else -1,
        revision if type(revision) is int else -1,
        document if type(document) is str else repr(document),
        index,
    )
