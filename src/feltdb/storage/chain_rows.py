"""The audit chain's check of the rows: each row against the log entry its revision names
(:mod:`feltdb.storage.audit_chain` walks the log; this reads the rows).

A row is ``covered`` when the entry at its revision logged its hash (:func:`row_hash`) and
the hash matches; ``not covered`` when that entry was logged before the chain existed (no
row hashes); ``pending`` when that entry is not final yet. Otherwise it is a problem:
``row_unlogged`` (the entry did not write it, or is gone), ``row_altered`` (it is not what
the entry wrote), or ``index_altered`` (:mod:`feltdb.storage.chain_index`).
"""

from __future__ import annotations

from collections.abc import Mapping

from feltdb.storage.canonical import sha256_hex
from feltdb.storage.chain_index import IndexOf, index_problem
from feltdb.storage.chain_log import ChainLog, LogEntry, RawRow
from feltdb.storage.chain_problems import ChainProblem

__all__ = ["PAGE", "check_rows", "row_hash"]

PAGE = 1000
"""Rows read per statement."""


def row_hash(address: str, version: int, document: str) -> str:
    """SHA-256 (hex) of a row as written: ``"collection/key"``, version, stored text.

    The address is length-prefixed, so no two rows' fields run together alike.
    """
    text = f"{len(address)}:{address}:{version}:{document}"
    return sha256_hex(text)


def check_rows(
    db: ChainLog, walked: int, indexes: Mapping[str, IndexOf], pruned_through: int
) -> tuple[int, int, int, ChainProblem | None]:
    """Check every row against the entry at its revision, and its index columns against its
    document where ``indexes`` says what it implies, a page at a time: the rows checked,
    those not covered (their writer logged no row hashes), those pending (their writer is
    above ``walked``, the last entry walked, and not final yet), and the first problem. A
    row's writer is trusted only if the walk verified it: one at a revision the walk did not
    reach must be a live transaction's, or the row is unlogged.
    """
    checked = not_covered = pending = 0
    collection = key = ""
    while rows := db.rows_indexed_after(collection, key, PAGE):
        writers = db.chain_entries_at({row.revision for row in rows if 0 < row.revision})
        for row in rows:
            checked += 1
            entry = writers.get(row.revision) if 0 < row.revision else None
            covered, problem = _check_row(row, entry, walked, pruned_through)
            index_of = indexes.get(row.collection)
            if problem is None and index_of is not None:
                problem = index_problem(row, index_of)
            if problem is not None:
                return checked, not_covered, pending, problem
            not_covered += covered == "not covered"
            pending += covered == "pending"
        collection, key = rows[-1].collection, rows[-1].key
    return checked, not_covered, pending, None


def _check_row(
    row: RawRow, entry: LogEntry | None, walked: int, pruned_through: int
) -> tuple[str, ChainProblem | None]:
    """Whether ``row`` is ``"covered"`` by its writer ``entry`` (the entry at its revision),
    ``"not covered"`` (logged without row hashes) or ``"pending"`` (above ``walked``, not
    final yet); and the problem, if it is not what that entry wrote.
    """
    address = f"{row.collection}/{row.key}"
    if entry is not None and row.revision > walked and address in entry.keys:
        return "pending", None  # logged by a transaction the walk could not see end
    if entry is None or address not in entry.keys:
        # Pruning wrote again every row the pruned entries were the last to write.
        pruned = entry is None and 0 < row.revision <= pruned_through
        return "unlogged", ChainProblem(
            kind="row_unlogged",
            revision=row.revision,
            transaction_id=None if entry is None else str(entry.transaction_id),
            address=address,
            message=f"row {address} names revision {row.revision}, whose transaction "
            + (
                "was pruned from the log after every row it wrote was written again"
                if pruned
                else "did not write it"
            ),
        )
    if entry.row_hashes is None:
        return "not covered", None
    place = entry.keys.index(address)
    written = entry.row_hashes[place] if place < len(entry.row_hashes) else None
    if written != row_hash(address, row.version, row.document):
        return "altered", ChainProblem(
            kind="row_altered",
            revision=row.revision,
            transaction_id=str(entry.transaction_id),
            address=address,
            message=f"row {address} (version {row.version}) is not what the "
            f"transaction at revision {row.revision} wrote",
        )
    return "covered", None
