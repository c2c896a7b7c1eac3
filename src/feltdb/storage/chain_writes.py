"""The audit chain's check of the log's writes against the rows: a row the log last wrote
must still be there, and no older than that write.

Each row is checked against the entry its revision names (``row_altered``,
``row_unlogged``), which says nothing of a row that is gone, nor of one set back whole to
an earlier state some entry logged. So the log is read the other way too: as the walk goes,
each page of entries is compared with the rows it wrote (:meth:`LogWrites.page`, one
primary key seek per row written):

- ``row_stale``: a row older than an entry that wrote (or deleted) it after its own writer:
  put back as an earlier entry logged it, or brought back after its deletion;
- ``row_missing``: a row the log's last write of it (by revision) created or updated, and no
  later entry deleted, is absent: it was deleted behind the authority's back (a workload
  lost, a revocation undone). Every collection is covered.

The last write of a row is taken in revision order. On SQLite commits are serial, so that
is their order. On PostgreSQL a revision is a transaction's id, and a transaction that
took its id first may write a row after one that took its id later; but it then also
stamped its ``committed_at`` later (inside the transaction, after the write), so a row
whose own writer committed after the later-numbered entry is not stale. A deletion is not
told apart so: a row deleted by a transaction numbered below the write it undid would be
reported missing, but every deletion feltdb makes is guarded by a version read before its
transaction took its id, so it cannot follow a write numbered above it (unless the row
was deleted and made again in between at the version it read: no key feltdb deletes is
ever made again).

Memory: what is kept between pages is only the rows found absent whose last write seen so
far is not a deletion (those a later entry may yet have deleted), which is bounded by the
rows deleted in the log's remainder, not by the log's length; the first stale row; and
nothing else. A row deleted by an entry the walk did not reach (committed since, or on
PostgreSQL not final yet) is counted pending (:meth:`LogWrites.finish`), not missing.
"""

from __future__ import annotations

from collections.abc import Sequence

from feltdb.storage.chain_log import ChainLog, LogEntry
from feltdb.storage.chain_problems import ChainProblem

__all__ = ["LogWrites"]

Write = tuple[LogEntry, str, str | None]
"""An entry, an address it wrote, and the row hash it logged for it (``""``: deleted,
``None``: not known, the entry having no row hashes)."""


class LogWrites:
    """The log's writes compared with the rows, a page of walked entries at a time."""

    def __init__(self, db: ChainLog, page: int) -> None:
        self._db = db
        self._page = page
        self._absent: dict[str, int] = {}
        """Rows found absent, by address, with the revision of the last write seen of each
        that was not a deletion."""
        self.problem: ChainProblem | None = None
        """The first row found stale (in revision order)."""

    def page(self, entries: Sequence[LogEntry]) -> None:
        """Compare the rows ``entries`` (walked, in revision order) wrote with the rows as
        stored now; keep the first stale one, and the absent ones still to be accounted for.
        Once a row is found stale, nothing more is compared: that is the problem to report.
        """
        if self.problem is not None:
            return
        writes = [write for entry in entries for write in _writes(entry)]
        addresses = {_split(address) for _, address, _ in writes}
        found = self._db.row_revisions_at(addresses)
        suspects: list[tuple[Write, int]] = []
        for write in writes:
            entry, address, written = write
            revision = found.get(address)
            if revision is None:
                if written:
                    self._absent[address] = entry.commit_revision
                else:  # deleted there, or not known to be written
                    self._absent.pop(address, None)
                continue
            self._absent.pop(address, None)
            if revision < entry.commit_revision:
                suspects.append((write, revision))
        if suspects:
            self.problem = self._stale(suspects)

    def _stale(self, suspects: list[tuple[Write, int]]) -> ChainProblem | None:
        """The first of ``suspects`` (a write, and the older revision of its row) whose row's
        own writer did not commit after that write (see the module: PostgreSQL's order).
        """
        writers = self._db.chain_entries_at({revision for _, revision in suspects})
        for (entry, address, written), revision in suspects:
            writer = writers.get(revision)
            if writer is not None and _later(writer.committed_at, entry.committed_at):
                continue
            done = "deleted" if written == "" else "wrote"
            return ChainProblem(
                kind="row_stale",
                revision=entry.commit_revision,
                transaction_id=str(entry.transaction_id),
                address=address,
                message=f"row {address} is as revision {revision} left it, but the "
                f"transaction at revision {entry.commit_revision} {done} it after: it was "
                "put back behind the authority's back",
            )
        return None

    def finish(self, walked: int) -> tuple[int, ChainProblem | None]:
        """After the walk (``walked``: the last entry walked): how many absent rows an entry
        after it wrote or deleted (pending, not final), and the problem: the first stale row,
        else the absent row of the lowest last write, missing.
        """
        if self.problem is not None:
            return 0, self.problem
        pending = 0
        after = walked
        while self._absent and (logged := self._db.chain_keys_after(after, self._page)):
            for revision, keys in logged:
                pending += sum(self._absent.pop(key, None) is not None for key in keys)
                after = revision
        if not self._absent:
            return pending, None
        address, revision = min(self._absent.items(), key=lambda item: (item[1], item[0]))
        writer = self._db.chain_entries_at([revision]).get(revision)
        return pending, ChainProblem(
            kind="row_missing",
            revision=revision,
            transaction_id=None if writer is None else str(writer.transaction_id),
            address=address,
            message=f"row {address} is missing: the transaction at revision {revision} "
            "wrote it, and no transaction deleted it since: it was deleted behind the "
            "authority's back",
        )


def _writes(entry: LogEntry) -> list[Write]:
    """Each address ``entry`` wrote (a row's, ``"collection/key"``), with its row hash."""
    hashes = entry.row_hashes
    return [
        (entry, address, None if hashes is None or place >= len(hashes) else hashes[place])
        for place, address in enumerate(entry.keys)
        if "/" in address
    ]


def _later(at: object, than: object) -> bool:
    """Whether the instant ``at`` is after ``than`` (an entry not verified yet may hold
    anything there: then it is not).
    """
    kinds = (int, float)
    return isinstance(at, kinds) and isinstance(than, kinds) and at > than


def _split(address: str) -> tuple[str, str]:
    # Collections are identifiers, never holding "/"; a key may.
    collection, _, key = address.partition("/")
    return collection, key
