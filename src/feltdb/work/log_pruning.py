"""Pruning the log itself: the entries up to a sealed revision exported, then deleted, their
links kept in the audit chain, so the chain still verifies across the pruned range.

An entry is the only proof of the rows it wrote: a row is checked against the entry its
revision names, and a row the log's last write of it left in place must exist
(:mod:`feltdb.storage.chain_writes`). So before any entry up to revision ``through`` goes,
:func:`prune_log`, in this order:

1. makes the export's file (a name of its own beside the one asked for): a path that
   cannot be written is refused before anything else is done;
2. verifies the whole chain (a log that fails its check is evidence: nothing is pruned);
3. writes again, unchanged (a new version, a new revision), every row whose revision is
   ``through`` or below, each first checked against the hash its writer logged
   (:mod:`feltdb.work.log_carry`): afterwards no row names an entry to be pruned, and each
   row's last logged write is one that stays;
4. verifies the whole chain again, while every entry is still there: a row deleted or set
   back since the first check is found now, not laundered;
5. exports the entries after the last pruned revision up to ``through`` with their links,
   each checked against its link (:mod:`feltdb.work.log_export`), synced, then named as
   asked, never over an existing file;
6. commits the mark (:data:`LOG_COLLECTION`/:data:`PRUNED_KEY`: the revision, the link
   there, the export's name, digest and size), audited as :data:`LOG_PRUNED`, guarded by
   the version read after step 3: a row like any other, so editing it is found by the
   chain's row checks;
7. deletes the entries up to ``through``, oldest first, :data:`DELETE_BATCH` a
   transaction. A pruning stopped here is finished by the next call.

:meth:`~feltdb.work.audit.AuditTrail.verify` reads the mark and walks the links there
without entries. Two prunings at once: each checks, writes again and exports; the first
mark committed stands, and the other is refused ``WORKLOAD_CONFLICT``, its export removed
(every export a mark names is one a pruning that committed wrote).
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from feltdb.errors import ErrorCode, WorkloadError
from feltdb.storage.audit_chain import GENESIS, ChainReport
from feltdb.storage.base import Database, Mutation, Precondition, StorageConflict
from feltdb.work import inputs
from feltdb.work.log_carry import CARRIED, CARRY_BATCH, carry_forward
from feltdb.work.log_export import ExportSummary, reserved, write_export
from feltdb.work.pruning import RECLAIM_PAGES

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
LOG_PRUNED: Final = "audit.log_pruned"
"""The audit kind of the mark's commit."""
EXPORTS_NOTED: Final = 1000
"""Exports the mark names (the newest): a pruning a day is years of them."""
DELETE_BATCH: Final = 5000
"""Log entries deleted per transaction."""


@dataclass(frozen=True, slots=True)
class PrunedMark:
    """How far the log was pruned: ``through`` (0: never), the link of the last entry
    there (:data:`~feltdb.storage.audit_chain.GENESIS`: none), the mark's row version.
    """

    through: int = 0
    link: str = GENESIS
    version: int | None = None
    exports: tuple[dict[str, Any], ...] = ()
    """The exports the prunings wrote, oldest first (the last :data:`EXPORTS_NOTED`): each
    one's name, revisions, entries, SHA-256 and size."""


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
    reclaimed_bytes: int = 0
    """What the deletions freed and was given back to the file system (SQLite files made
    ``auto_vacuum = INCREMENTAL``; 0 elsewhere)."""

    def to_json(self) -> dict[str, Any]:
        """The report as JSON."""
        export = self.export
        return {
            "through": self.through,
            "carried": self.carried,
            "deleted": self.deleted,
            "reclaimed_bytes": self.reclaimed_bytes,
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
    exports = row.document.get("exports")
    noted = tuple(e for e in exports if isinstance(e, dict)) if isinstance(exports, list) else ()
    return PrunedMark(through, link, row.version, noted)


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
    mark = pruned_mark(db)
    if through is not None and through <= mark.through:
        return _finished(db, mark)
    said = progress or (lambda _: None)
    with reserved(export) as partial:  # a path that cannot be written is refused first
        report = _checked(verify, said, "checked the audit chain")
        through = _sealed(through, report.head_revision)
        if through <= mark.through:
            return _finished(db, mark)
        carried = carry_forward(db, through, actor, now)
        said(f"wrote again {carried:,} rows last written at revision {through} or before")
        # Again, now that no row names an entry to go: a row deleted or set back since the
        # first check is found while every entry is still there to say so.
        _checked(verify, said, "checked it again")
        current = pruned_mark(db)  # its row was written again too: a new version
        if current.through != mark.through:
            raise _overtaken(current.through)
        summary = _exported(db, partial, export, current, through, now)
        said(f"exported {summary.entries:,} transactions to {export}")
        _mark(db, current, summary, export, actor, now)
    deleted, returned = _delete(db, through)
    return LogPruneReport(through, carried, deleted, summary, str(export), returned)


def _finished(db: Database, mark: PrunedMark) -> LogPruneReport:
    """Nothing new to prune: the entries a pruning that stopped left, deleted."""
    deleted, returned = _delete(db, mark.through)
    return LogPruneReport(mark.through, 0, deleted, None, None, returned)


def _checked(
    verify: Callable[[], ChainReport], said: Callable[[str], None], step: str
) -> ChainReport:
    """The chain's check, refused if it fails (nothing is pruned from a log that does)."""
    report = verify()
    said(f"{step}: {report.transactions:,} transactions, {report.rows:,} rows")
    if report.problem is not None:
        raise WorkloadError(
            ErrorCode.WORKLOAD_CONFLICT,
            f"the audit chain fails its check ({report.problem.message}): the log is the "
            "evidence, and none of it was deleted",
        )
    return report


def _sealed(through: int | None, head: int) -> int:
    """``through``, or the chain's ``head`` for ``None``; refused past the head."""
    if through is None:
        through = head
    if not 0 < through <= head:
        raise inputs.invalid(
            "through",
            f"revision {through} is not sealed yet: the chain's head is revision {head}"
            if through
            else "nothing is sealed yet: the log is empty",
        )
    return through


def _overtaken(moved: int) -> WorkloadError:
    return WorkloadError(
        ErrorCode.WORKLOAD_CONFLICT,
        f"another pruning of the log (through revision {moved}) committed first: none of "
        "the log was deleted by this one, and its export was not kept; try again",
    )


def _exported(
    db: Database, partial: Path, export: Path, mark: PrunedMark, through: int, now: int
) -> ExportSummary:
    """The export of the entries after ``mark`` up to ``through``; a pruning that committed
    its mark meanwhile (and deleted entries this one had to export) is a conflict.
    """
    try:
        return write_export(db, partial, export, (mark.through, mark.link), through, now)
    except WorkloadError:
        moved = pruned_mark(db).through
        if moved == mark.through:
            raise
        raise _overtaken(moved) from None


def _mark(
    db: Database, mark: PrunedMark, summary: ExportSummary, export: Path, actor: str, now: int
) -> None:
    """Commit the mark past ``summary``'s entries, guarded by the version ``mark`` was read
    at; refused if another pruning committed its mark first (this one's export removed).
    """
    written = {
        "name": export.name,
        "after_revision": summary.after_revision,
        "through_revision": summary.through_revision,
        "entries": summary.entries,
        "sha256": summary.sha256,
        "bytes": summary.size,
        "at": now,
    }
    document = {
        "through": summary.through_revision,
        "link": summary.through_link,
        "previous_through": mark.through,
        "exports": [*mark.exports, written][-EXPORTS_NOTED:],
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
        export.unlink(missing_ok=True)  # named by no mark: the other pruning's stands
        raise _overtaken(pruned_mark(db).through) from None


def _delete(db: Database, through: int) -> tuple[int, int]:
    """Delete the log entries up to ``through``, :data:`DELETE_BATCH` a transaction, each
    followed by a return of at most :data:`~feltdb.work.pruning.RECLAIM_PAGES` free pages
    to the file system (a SQLite file made ``auto_vacuum = INCREMENTAL``; nothing
    elsewhere), then the rest of what they freed, a bound a transaction: the entries
    deleted, and the bytes returned.
    """
    deleted = returned = 0
    while count := db.delete_log_through(through, DELETE_BATCH):
        deleted += count
        returned += db.reclaim_space(RECLAIM_PAGES).bytes
    while (space := db.reclaim_space(RECLAIM_PAGES)).pages:
        returned += space.bytes
    return deleted, returned
