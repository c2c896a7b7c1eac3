"""Pruning the log itself: the entries up to a sealed revision exported, then deleted, their
links kept in the audit chain, so the chain still verifies across the pruned range.

An entry is the only proof of the rows it wrote: a row is checked against the entry its
revision names, and a row the log's last write of it left in place must exist
(:mod:`feltdb.storage.chain_writes`). So before any entry up to revision ``through`` goes,
:func:`prune_log`, in this order:

1. verifies the whole chain (a log that fails its check is evidence: nothing is pruned);
2. writes again, unchanged (a new version, a new revision), every row whose revision is
   ``through`` or below, in guarded commits of :data:`CARRY_BATCH` rows, audited as
   :data:`CARRIED`: afterwards no row names an entry to be pruned, and each row's last
   logged write is one that stays;
3. exports the entries after the last pruned revision up to ``through`` with their links
   (:mod:`feltdb.work.log_export`), synced, never over an existing file;
4. commits the mark (:data:`LOG_COLLECTION`/:data:`PRUNED_KEY`: the revision, the link
   there, the export's name, digest and size), audited as :data:`LOG_PRUNED`: a row like
   any other, so editing it, or deleting it, is found by the chain's row checks;
5. deletes the entries up to ``through``, oldest first, :data:`DELETE_BATCH` a
   transaction. A pruning stopped here is finished by the next call (any ``through``).

:meth:`~feltdb.work.audit.AuditTrail.verify` reads the mark and walks the links there
without entries. Two prunings at once: each verifies, writes again and exports; one mark
commits first, and the other's, guarded by the version it read, is refused with
``WORKLOAD_CONFLICT`` unless the mark already covers its ``through`` (its export is then
a second copy).
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Final

from feltdb.errors import ErrorCode, WorkloadError
from feltdb.storage.audit_chain import GENESIS, ChainReport
from feltdb.storage.base import Database, Mutation, Precondition, RowIndex, StorageConflict
from feltdb.storage.chain_log import RawRow
from feltdb.storage.index_columns import INDEX_NAMES
from feltdb.work import inputs
from feltdb.work.log_export import ExportSummary, write_export

__all__ = [
    "CARRIED",
    "CARRY_BATCH",
    "DELETE_BATCH",
    "LOG_COLLECTION",
    "LOG_PRUNED",
    "PRUNED_KEY",
    "LogPruneReport",
    "PrunedMark",
    "prune_log",
    "pruned_mark",
]

LOG_COLLECTION: Final = "system_audit_log"
PRUNED_KEY: Final = "pruned"
CARRIED: Final = "audit.carried_forward"
"""The audit kind of a commit that writes rows again before the entries that wrote them go."""
LOG_PRUNED: Final = "audit.log_pruned"
"""The audit kind of the mark's commit."""
CARRY_BATCH: Final = 500
"""Rows written again per commit (one write transaction of that many rows: milliseconds)."""
DELETE_BATCH: Final = 5000
"""Log entries deleted per transaction."""
SCAN: Final = 1000
"""Rows read per statement looking for those to write again."""
ATTEMPTS: Final = 3
"""Times a batch of rows is read and written again when another writer changed one first."""


@dataclass(frozen=True, slots=True)
class PrunedMark:
    """How far the log was pruned: ``through`` (0: never), the link of the last entry
    there (:data:`~feltdb.storage.audit_chain.GENESIS`: none), the mark's row version.
    """

    through: int = 0
    link: str = GENESIS
    version: int | None = None


@dataclass(frozen=True, slots=True)
class LogPruneReport:
    """What :func:`prune_log` did."""

    through: int
    """The log is pruned up to this revision."""
    carried: int
    """Rows written again first."""
    deleted: int
    """Log entries deleted."""
    export: ExportSummary | None
    """The export written; ``None`` when the log was already pruned that far."""
    export_path: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The report as JSON."""
        export = self.export
        return {
            "through": self.through,
            "carried": self.carried,
            "deleted": self.deleted,
            "export": None
            if export is None
            else {
                "path": self.export_path,
                "entries": export.entries,
                "through_link": export.through_link,
                "sha256": export.sha256,
                "bytes": export.size,
            },
        }


def pruned_mark(db: Database) -> PrunedMark:
    """The mark :func:`prune_log` commits (:class:`PrunedMark`: never pruned if none).

    Raises:
        WorkloadError: ``WORKLOAD_STORAGE_FAILURE`` for a mark that is not one (altered).
    """
    row = db.get_row(LOG_COLLECTION, PRUNED_KEY)
    if row is None:
        return PrunedMark()
    through, link = row.document.get("through"), row.document.get("link")
    if type(through) is not int or not isinstance(link, str):
        raise WorkloadError(
            ErrorCode.WORKLOAD_STORAGE_FAILURE,
            f"the log's pruned mark ({LOG_COLLECTION}/{PRUNED_KEY}) is not one: it was altered",
        )
    return PrunedMark(through, link, row.version)


def prune_log(
    db: Database,
    verify: Callable[[], ChainReport],
    export: Path,
    through: int | None,
    *,
    actor: str,
    now: int,
    progress: Callable[[str], None] | None = None,
) -> LogPruneReport:
    """Prune the log up to revision ``through`` (``None``: the chain's head, once sealed)
    as the module says, exporting to ``export``
    (``verify``: the whole chain's check, with the mark read); what was done. ``progress``
    is told each step as it ends (a line of text).

    Raises:
        WorkloadError: ``WORKLOAD_INVALID`` for a ``through`` not sealed yet, an
            ``export`` that exists; ``WORKLOAD_CONFLICT`` if the chain fails its check
            (nothing is pruned), rows kept changing, or another pruning committed a mark
            short of ``through`` first; ``WORKLOAD_STORAGE_FAILURE``.
    """
    if through is not None:
        through = inputs.integer(through, "through", 1)
    if export.exists():  # refused before anything is written
        raise inputs.invalid("export", f"{export} exists: an export is never overwritten")
    said = progress or (lambda _: None)
    report = verify()
    said(f"checked the audit chain: {report.transactions:,} transactions, {report.rows:,} rows")
    if report.problem is not None:
        raise WorkloadError(
            ErrorCode.WORKLOAD_CONFLICT,
            f"the audit chain fails its check ({report.problem.message}): the log is the "
            "evidence, and nothing was pruned",
        )
    if through is None:
        through = report.head_revision
    if not 0 < through <= report.head_revision:
        raise inputs.invalid(
            "through",
            f"revision {through} is not sealed yet: the chain's head is revision "
            f"{report.head_revision}"
            if through
            else "nothing is sealed yet: the log is empty",
        )
    mark = pruned_mark(db)
    if through <= mark.through:  # nothing new: finish a pruning that stopped, if one did
        return LogPruneReport(mark.through, 0, _delete(db, mark.through), None)
    carried = _carry_forward(db, through, actor, now)
    said(f"wrote again {carried:,} rows last written at revision {through} or before")
    # The mark's row may have been written again with the rest: guard on its new version.
    mark = replace(mark, version=pruned_mark(db).version)
    summary = _exported(db, export, mark, through, now)
    said(f"exported {summary.entries:,} transactions to {export}")
    _mark(db, mark, summary, export, actor, now)
    return LogPruneReport(through, carried, _delete(db, through), summary, str(export))


def _carry_forward(db: Database, through: int, actor: str, now: int) -> int:
    """Write again every row at revision ``through`` or below, in address order, at most
    :data:`CARRY_BATCH` a guarded commit; how many were written. A batch another writer
    changed a row of first is read again: that row is past ``through`` now.
    """
    carried = conflicts = 0
    collection = key = ""
    while page := db.rows_indexed_after(collection, key, SCAN):
        batch = [row for row in page if row.revision <= through][:CARRY_BATCH]
        if not batch:
            collection, key = page[-1].collection, page[-1].key
            continue
        try:
            _commit_again(db, batch, through, actor, now)
        except StorageConflict:
            conflicts += 1
            if conflicts == ATTEMPTS:
                raise WorkloadError(
                    ErrorCode.WORKLOAD_CONFLICT,
                    f"rows kept changing while they were written again ({ATTEMPTS} "
                    "attempts): nothing of the log was pruned; try again",
                ) from None
            continue
        carried, conflicts = carried + len(batch), 0
        collection, key = batch[-1].collection, batch[-1].key
    return carried


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


def _exported(
    db: Database, export: Path, mark: PrunedMark, through: int, now: int
) -> ExportSummary:
    """The export of the entries after ``mark`` up to ``through``; a pruning that committed
    its mark meanwhile (and deleted entries this one had to export) is a conflict.
    """
    try:
        return write_export(db, export, (mark.through, mark.link), through, now)
    except WorkloadError:
        moved = pruned_mark(db).through
        if moved == mark.through:
            raise
        raise WorkloadError(
            ErrorCode.WORKLOAD_CONFLICT,
            f"another pruning of the log (through revision {moved}) deleted entries while "
            "this one exported them: nothing was deleted by this one; its export holds them",
        ) from None


def _mark(
    db: Database, mark: PrunedMark, summary: ExportSummary, export: Path, actor: str, now: int
) -> None:
    """Commit the mark past ``summary``'s entries, guarded by the version ``mark`` was read
    at; a mark another pruning committed first that covers as far is kept.
    """
    document = {
        "through": summary.through_revision,
        "link": summary.through_link,
        "previous_through": mark.through,
        "export": {
            "name": export.name,
            "entries": summary.entries,
            "sha256": summary.sha256,
            "bytes": summary.size,
        },
        "pruned_at": now,
    }
    guard = (
        Precondition(LOG_COLLECTION, PRUNED_KEY, require_absent=True)
        if mark.version is None
        else Precondition(LOG_COLLECTION, PRUNED_KEY, expected_version=mark.version)
    )
    audit = {"kind": LOG_PRUNED, "actor": actor, **document}
    try:
        db.commit(
            "log_prune_tx_" + secrets.token_hex(12),
            [Mutation(LOG_COLLECTION, PRUNED_KEY, document)],
            [guard],
            audit,
        )
    except StorageConflict:
        if pruned_mark(db).through < summary.through_revision:
            raise WorkloadError(
                ErrorCode.WORKLOAD_CONFLICT,
                "another pruning of the log committed first, short of revision "
                f"{summary.through_revision}: nothing was deleted; try again",
            ) from None


def _delete(db: Database, through: int) -> int:
    """Delete the log entries up to ``through``, :data:`DELETE_BATCH` a transaction."""
    deleted = 0
    while count := db.delete_log_through(through, DELETE_BATCH):
        deleted += count
    return deleted
