"""Rows written again before the log entries that wrote them are pruned
(:mod:`feltdb.work.log_pruning`, step 2): afterwards no row names an entry to be pruned,
and each row's last logged write is one that stays.

Each row is written as it is stored (its text, its index columns), at a new version and
revision, :data:`CARRY_BATCH` rows a commit guarded by the versions read. Each is first
checked against the row hash its writer logged: a row changed behind the authority's back
since the chain's check is refused, never written again as if the authority had written it.
"""

from __future__ import annotations

import secrets
from dataclasses import replace
from typing import Final

from feltdb.errors import ErrorCode, WorkloadError
from feltdb.storage.audit_chain import row_hash
from feltdb.storage.base import Database, Mutation, Precondition, RowIndex, StorageConflict
from feltdb.storage.chain_log import RawRow
from feltdb.storage.index_columns import INDEX_NAMES

__all__ = ["CARRIED", "CARRY_BATCH", "carry_forward"]

CARRIED: Final = "audit.carried_forward"
"""The audit kind of a commit that writes rows again before the entries that wrote them go."""
CARRY_BATCH: Final = 500
"""Rows written again per commit (one write transaction of that many rows: milliseconds)."""
SCAN: Final = 1000
"""Rows read per statement looking for those to write again."""
ATTEMPTS: Final = 3
"""Times a batch of rows is read and written again when another writer changed one first."""


def carry_forward(db: Database, through: int, actor: str, now: int) -> int:
    """Write again every row at revision ``through`` or below, in address order, at most
    :data:`CARRY_BATCH` a guarded commit; how many were written. A batch another writer
    changed a row of first is read again: that row is past ``through`` now.

    Raises:
        WorkloadError: ``WORKLOAD_CONFLICT`` for a row that is not what its writer logged,
            or rows that kept changing; ``WORKLOAD_STORAGE_FAILURE``.
    """
    carried = conflicts = 0
    collection = key = ""
    while page := db.rows_indexed_after(collection, key, SCAN):
        batch = [row for row in page if row.revision <= through][:CARRY_BATCH]
        if not batch:
            collection, key = page[-1].collection, page[-1].key
            continue
        _as_logged(db, batch)
        try:
            _commit_again(db, batch, through, actor, now)
        except StorageConflict:
            conflicts += 1
            if conflicts == ATTEMPTS:
                raise WorkloadError(
                    ErrorCode.WORKLOAD_CONFLICT,
                    f"rows kept changing while they were written again ({ATTEMPTS} "
                    "attempts): none of the log was deleted; try again",
                ) from None
            continue
        carried, conflicts = carried + len(batch), 0
        collection, key = batch[-1].collection, batch[-1].key
    return carried


def _as_logged(db: Database, rows: list[RawRow]) -> None:
    """Refuse a row that is not what the entry at its revision logged writing."""
    writers = db.chain_entries_at({row.revision for row in rows})
    for row in rows:
        address = f"{row.collection}/{row.key}"
        entry = writers.get(row.revision)
        place = entry.keys.index(address) if entry is not None and address in entry.keys else None
        if entry is None or place is None:
            written: str | None = ""
        elif entry.row_hashes is None:
            continue  # logged before the chain existed: never covered, and not checked
        else:
            written = entry.row_hashes[place] if place < len(entry.row_hashes) else ""
        if written != row_hash(address, row.version, row.document):
            raise WorkloadError(
                ErrorCode.WORKLOAD_CONFLICT,
                f"row {address} is not what the transaction at revision {row.revision} "
                "wrote: it was changed behind the authority's back since the chain's check, "
                "and none of the log was deleted (feltdb audit verify names it)",
            )


def _commit_again(db: Database, rows: list[RawRow], through: int, actor: str, now: int) -> None:
    """Write ``rows`` again in one commit, each guarded by the version read."""
    guards = [Precondition(row.collection, row.key, expected_version=row.version) for row in rows]
    audit = {"kind": CARRIED, "actor": actor, "through": through, "at": now, "rows": len(rows)}
    db.commit("carry_tx_" + secrets.token_hex(12), [_again(row) for row in rows], guards, audit)


def _again(row: RawRow) -> Mutation:
    """The row written again as stored: its text, and its index but for a set-aside mark
    (every write clears it; a claim sets aside again what still waits).
    """
    index = RowIndex(**dict(zip(INDEX_NAMES, row.index, strict=True)))
    return Mutation(
        row.collection, row.key, None, replace(index, waits_on=None, waits_for=None), row.document
    )
