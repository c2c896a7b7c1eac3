"""The audit chain: the committed-transaction log made tamper-evident.

What each log entry proves. A commit logs, beside its transaction id, operations, keys and
audit record, the hash of every row it wrote (:func:`row_hash`: the row's address, version
and stored text). So an entry's content (:func:`entry_digest`) covers the rows as written,
not only their names.

The order. The chain is the log in revision order. On SQLite revisions are dense and
commits are serial. On PostgreSQL a revision is its transaction's id times 1024 plus a
position, and transactions commit in another order than their ids; but below the snapshot's
xmin no open transaction remains, so the set of entries there is final and their order
fixed. :func:`seal` only ever seals there, so a sealed link is never followed by an entry
logged later below it, however commits interleave.

Sealing. :func:`seal` appends to ``audit_chain`` one :class:`ChainLink` per entry not yet
sealed: the entry's digest and ``link = SHA-256(previous link, revision, digest)``, starting
from :data:`GENESIS`. It is deterministic, so two sealers at once write the same links (the
second's are dropped). The server seals on every maintenance pass; :func:`verify` seals
first.

What :func:`verify` finds, and names the first of (:class:`ChainProblem`):

- ``altered``: an entry's content (its revisions included) no longer matches its sealed
  digest: it was edited, or moved there from another revision (reordered);
- ``removed``: a sealed entry is missing from the log (alone, or with its link);
- ``inserted``: an entry below the sealed head is not in the chain;
- ``chain_altered``: a link does not follow from the one before it;
- ``anchor_mismatch``: the chain at a revision noted earlier (an anchor) has another link,
  or no longer reaches it: the log was rewritten or cut back up to there;
- ``row_altered``: a row differs from what the entry that wrote it (its revision) logged;
- ``row_unlogged``: a row's revision names no entry, or one that did not write it;
- ``index_altered``: a row's index columns are not what its document implies
  (:mod:`feltdb.storage.chain_index`; only for the collections ``indexes`` names);
- ``row_stale``: a row older than an entry that wrote or deleted it after its own writer:
  put back as an earlier entry logged it (:mod:`feltdb.storage.chain_writes`);
- ``row_missing``: a row the log's last write of it created or updated, and no entry
  deleted since, is absent: deleted behind the authority's back (any collection).

What it cannot find: an entry altered before it was sealed (it is sealed as it is then:
the server seals every second); a log rewritten from some entry onward, every digest and link
recomputed, by someone who can write the database, unless an anchor (the head's revision
and link, noted elsewhere) from after that entry is given; the last entries cut off with
their links, likewise, with the rows they wrote set back as the entries before them left
them; which row a row set aside waits on (:mod:`feltdb.storage.chain_index`). Entries
logged before the chain existed have no row hashes: their rows are counted as not covered,
and a row they wrote that is absent is taken as deleted.

Retention (:mod:`feltdb.work.pruning`) deletes rows, not entries: each prune is a commit
whose entry logs its deletions, so a pruned row is not ``row_missing``. Pruning the log
itself (:mod:`feltdb.work.log_pruning`) deletes the entries up to a sealed revision, after
exporting them and writing again every row they were the last to write; their links stay.
So :func:`verify`, told that revision (``pruned_through``), walks the links there without
entries, each still following from the one before (``removed``, ``chain_altered``,
``anchor_mismatch`` hold there as elsewhere), and a row naming a pruned revision is
``row_unlogged``. What it no longer has there: the entries' content, which the export
keeps (:mod:`feltdb.work.log_export` checks an export against its links).
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from pydantic import BaseModel, ConfigDict

from feltdb.storage.canonical import sha256_hex
from feltdb.storage.chain_index import IndexOf
from feltdb.storage.chain_log import ChainLink, ChainLog, LogEntry
from feltdb.storage.chain_problems import ChainProblem, ProblemKind
from feltdb.storage.chain_rows import check_rows, row_hash
from feltdb.storage.chain_writes import LogWrites

__all__ = [
    "GENESIS",
    "ChainProblem",
    "ChainReport",
    "IndexOf",
    "ProblemKind",
    "entry_digest",
    "next_link",
    "row_hash",
    "seal",
    "verify",
]

GENESIS = sha256_hex("feltdb audit chain 1")
"""The link before the first entry."""

PAGE = 1000
"""Entries read (and sealed) per statement."""


class ChainReport(BaseModel):
    """What :func:`verify` checked, and the first problem (``None``: none)."""

    model_config = ConfigDict(frozen=True)

    ok: bool
    transactions: int
    """Log entries checked."""
    sealed: int
    """Of those, entries sealed in the chain (the others are not final yet)."""
    rows: int
    """Rows checked against the entry that wrote them (and their index columns, where
    :func:`verify` was told what their documents imply)."""
    rows_not_covered: int
    """Rows written by an entry logged without row hashes (before the chain existed)."""
    rows_pending: int = 0
    """Rows written (or deleted) by an entry not final yet (above PostgreSQL's horizon, or
    committed during the verification), not checked: a count that never falls to 0 while
    the store is idle is itself a sign of tampering."""
    head_revision: int
    """The revision of the last entry sealed (0: none); with ``head_link``, an anchor."""
    head_link: str
    problem: ChainProblem | None = None
    pruned_through: int = 0
    """The log was pruned up to this revision (0: never): its entries there were exported,
    then deleted; their links stay."""
    pruned: int = 0
    """Links walked there whose entries are gone (each checked against the link before
    it, not against an entry)."""


def entry_digest(entry: LogEntry) -> str:
    """SHA-256 (hex) of every field of a log entry, its revisions included."""
    fields = [
        entry.commit_revision,
        entry.base_revision,
        entry.transaction_id,
        entry.committed_at,
        entry.operation_ids,
        entry.keys,
        entry.audit,
        entry.row_hashes,
    ]
    text = json.dumps(fields, ensure_ascii=True, separators=(",", ":"), default=repr)
    return sha256_hex(text)


def next_link(previous_link: str, revision: int, digest: str) -> str:
    """The link of the entry at ``revision`` of ``digest``, after ``previous_link``."""
    # sha256_hex is total: a link or digest edited to anything still hashes (and then
    # fails its check), rather than raising.
    text = f"{previous_link}:{revision}:{digest}"
    return sha256_hex(text)


def seal(db: ChainLog, *, limit: int | None = None) -> int:
    """Seal the entries not yet in the chain, oldest first (at most ``limit``, ``None``:
    all that are final); how many were sealed.
    """
    head = db.chain_head()
    revision, link = (0, GENESIS) if head is None else (head.commit_revision, head.link)
    sealed = 0
    while limit is None or sealed < limit:
        page = PAGE if limit is None else min(PAGE, limit - sealed)
        entries = db.chain_entries_after(revision, page)
        if not entries:
            break
        links: list[ChainLink] = []
        for entry in entries:
            digest = entry_digest(entry)
            link = next_link(link, entry.commit_revision, digest)
            links.append(ChainLink(entry.commit_revision, revision, digest, link))
            revision = entry.commit_revision
        db.seal_chain(links)
        sealed += len(links)
    return sealed


def verify(
    db: ChainLog,
    *,
    anchor: tuple[int, str] | None = None,
    indexes: Mapping[str, IndexOf] | None = None,
    pruned_through: int = 0,
) -> ChainReport:
    """Seal what is final, then walk the whole chain, check every row, and every row the
    log wrote against the rows; the first problem found (see the module's docstring), with
    what was checked up to it.

    ``anchor``: a ``(revision, link)`` noted from an earlier report's head: the chain must
    still have that link there. ``indexes``: by collection, what a row's document implies
    of its index columns (:mod:`feltdb.storage.chain_index`); the index columns of the
    rows of other collections are not checked. ``pruned_through``: the revision up to which
    the log was pruned (see the module's docstring). Memory stays bounded however long the
    log (:mod:`feltdb.storage.chain_writes`).
    """
    seal(db)
    writes = LogWrites(db, PAGE)
    walk = _Walk(db, anchor, writes, pruned_through)
    problem = walk.log()
    if problem is None and anchor is not None:
        problem = walk.anchored(*anchor)
    rows = not_covered = pending = 0
    if problem is None:
        rows, not_covered, pending, problem = check_rows(
            db, walk.revision, indexes or {}, pruned_through
        )
    if problem is None:
        gone, problem = writes.finish(walk.revision)
        pending += gone
    return ChainReport(
        ok=problem is None,
        transactions=walk.entries,
        sealed=walk.sealed,
        rows=rows,
        rows_not_covered=not_covered,
        rows_pending=pending,
        head_revision=walk.sealed_revision,
        head_link=walk.sealed_link,
        problem=problem,
        pruned_through=pruned_through,
        pruned=walk.pruned,
    )


class _Walk:
    """The log and the chain read side by side, in revision order, a page at a time."""

    def __init__(
        self, db: ChainLog, anchor: tuple[int, str] | None, writes: LogWrites, pruned_through: int
    ) -> None:
        self.db = db
        self.pruned_through = pruned_through
        self.pruned = 0
        """Links walked whose entries were pruned."""
        self.writes = writes
        """Given each page walked, to compare with the rows it wrote."""
        self.entries = 0
        self.sealed = 0
        self.revision = 0
        """The last entry walked."""
        self.link = GENESIS
        self.sealed_revision = 0
        """The last sealed entry walked, and its link: the head this walk checked."""
        self.sealed_link = GENESIS
        self.anchor_revision = None if anchor is None else anchor[0]
        self.anchor_link: str | None = None
        """The link walked at the anchor's revision (``None``: not reached)."""
        head = db.chain_head()
        self.head = 0 if head is None else head.commit_revision

    def log(self) -> ChainProblem | None:
        """Walk every entry and link; the first problem."""
        ahead: tuple[list[LogEntry], bool] | None = None
        """Entries read but not walked yet (past a page of pruned links), and whether the
        read that found them was a full page."""
        while True:
            if ahead is None:
                entries = self.db.chain_entries_after(self.revision, PAGE)
                ahead = (entries, len(entries) == PAGE)
            entries, more = ahead
            through = entries[-1].commit_revision if more else max(
                self.head, entries[-1].commit_revision if entries else 0
            )  # fmt: skip
            read = self.db.chain_links_between(self.revision, through, PAGE)
            ahead = None
            if len(read) == PAGE and read[-1].commit_revision < through:
                # More links than entries here (the log was pruned): walk up to the last
                # link read; the entries past it wait for the next page, not read again.
                through = read[-1].commit_revision
                later = [entry for entry in entries if entry.commit_revision > through]
                entries = entries[: len(entries) - len(later)]
                ahead = (later, more) if later else None
                more = True
            links = {link.commit_revision: link for link in read}
            by_revision = {entry.commit_revision: entry for entry in entries}
            for revision in sorted({*links, *by_revision}):
                problem = self._step(revision, by_revision.get(revision), links.get(revision))
                if problem is not None:
                    return problem
            self.writes.page(entries)
            if not more:
                return None

    def _step(
        self,
        revision: int,
        entry: LogEntry | None,
        link: ChainLink | None,
    ) -> ChainProblem | None:
        if entry is None and link is not None and revision <= self.pruned_through:
            return self._pruned(link)
        if entry is None:
            assert link is not None
            return ChainProblem(
                kind="removed",
                revision=revision,
                message=f"the transaction sealed at revision {revision} is missing from the log",
            )
        digest = entry_digest(entry)
        if link is None:
            if revision < self.head:
                return _entry_problem(
                    "inserted",
                    entry,
                    f"the transaction at revision {revision} is not in the audit chain "
                    "sealed past it: it was inserted behind the authority's back, or its "
                    "link was removed",
                )
            self.link = next_link(self.link, revision, digest)  # not final yet: unsealed
        else:
            problem = self._sealed(entry, link, digest)
            if problem is not None:
                return problem
            self.link = link.link
            self.sealed += 1
            self.sealed_revision, self.sealed_link = revision, link.link
            if revision == self.anchor_revision:
                self.anchor_link = link.link
        self.entries += 1
        self.revision = revision
        return None

    def _pruned(self, link: ChainLink) -> ChainProblem | None:
        """Walk the link of an entry pruned from the log: it must follow from the one before."""
        revision = link.commit_revision
        if link.previous_revision != self.revision:
            message = (
                f"the link sealed before revision {revision} (at revision "
                f"{link.previous_revision}) is missing from the audit chain"
            )
            return ChainProblem(kind="removed", revision=revision, message=message)
        if link.link != next_link(self.link, revision, link.digest):
            message = (
                f"the audit chain's link at revision {revision} (its entry pruned) does not "
                "follow from the link before it: the chain itself was altered"
            )
            return ChainProblem(kind="chain_altered", revision=revision, message=message)
        self.link = link.link
        self.pruned += 1
        self.sealed_revision, self.sealed_link = revision, link.link
        if revision == self.anchor_revision:
            self.anchor_link = link.link
        self.revision = revision
        return None

    def _sealed(self, entry: LogEntry, link: ChainLink, digest: str) -> ChainProblem | None:
        revision = entry.commit_revision
        if link.previous_revision != self.revision:
            return _entry_problem(
                "removed",
                entry,
                f"the transaction sealed before revision {revision} (at revision "
                f"{link.previous_revision}) is missing from the log, with its link",
            )
        if link.link != next_link(self.link, revision, link.digest):
            return _entry_problem(
                "chain_altered",
                entry,
                f"the audit chain's link at revision {revision} does not follow from the "
                "link before it: the chain itself was altered",
            )
        if digest != link.digest:
            return _entry_problem(
                "altered",
                entry,
                f"the transaction at revision {revision} is not the one sealed there: it "
                "was altered, or moved there from another revision",
            )
        return None

    def anchored(self, revision: int, link: str) -> ChainProblem | None:
        """The problem, if any, with the anchor ``(revision, link)`` after the walk."""
        if self.anchor_link == link:
            return None
        found = self.anchor_link
        message = (
            f"the audit chain at revision {revision} is not the anchor's: the log was "
            "rewritten up to there"
            if found is not None
            else f"the audit chain no longer reaches the anchor's revision {revision}: the "
            "log was cut back, or rewritten"
        )
        return ChainProblem(kind="anchor_mismatch", revision=revision, message=message)


def _entry_problem(kind: ProblemKind, entry: LogEntry, message: str) -> ChainProblem:
    return ChainProblem(
        kind=kind,
        revision=entry.commit_revision,
        transaction_id=str(entry.transaction_id),
        message=message,
    )
