"""The audit trail: what each commit records of who acted, and reading it back by tenant.

Every commit of a workload logs one audit record (:func:`audit_record`) in the same
transaction as the row, so the log and the work never disagree. :meth:`AuditTrail.after` reads
one tenant's application's entries back, in commit order, at a bounded cost per call.
:meth:`AuditTrail.verify` checks the whole log's audit chain
(:mod:`feltdb.storage.audit_chain`), and says as much of it as one application's reader
may know.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from feltdb.errors import WorkloadError
from feltdb.records.codec import stored_workload
from feltdb.records.workload import DURABLE_WORK_COLLECTION, Workload
from feltdb.storage import audit_chain
from feltdb.storage.audit_chain import ChainReport
from feltdb.storage.base import CommittedTransaction, Database
from feltdb.storage.canonical import sha256_hex
from feltdb.work import inputs, log_pruning
from feltdb.work.log_export import ExportSummary, check_export
from feltdb.work.log_pruning import LogPruneReport, PrunedMark, pruned_mark
from feltdb.work.scheduling import row_index

AUDIT_SCAN = 1000
"""Log entries one :meth:`AuditTrail.after` call reads at most, whatever it finds."""
AUDIT_BATCH = 250
"""Log entries :meth:`AuditTrail.after` reads per query."""
MIGRATION = "workload_migration"
"""The audit kind of a legacy record's import."""


def audit_record(
    workload: Workload, stored: str, action: str, operation_id: str, operation: str | None = None
) -> dict[str, Any]:
    """The audit record of a commit of ``workload`` (stored as the text ``stored``): who
    asked for the work (``subject``, ``KIND:ID``), under which grant, who acted now and by
    which store operation, whose attempt it is (``attempt_worker_id``: the last attempt's
    worker, kept after its claim is released)
    (``operation``: ``"complete"``, ``"fail"``…; records of earlier releases have none), and
    a digest of the committed aggregate, ``source_digest``: the SHA-256 of exactly the
    stored text (its canonical JSON, so also
    :func:`~feltdb.storage.canonical.content_hash` of the document).
    """
    grant = workload.authorization_snapshot.grant
    requester = workload.requested_by
    last = workload.execution_history[-1] if workload.execution_history else None
    migration = action == MIGRATION
    # Subjects are KIND:ID: a human and a service may share an id. The reference's bare-id
    # fields stay as it wrote them (agent_id is an agent's alone; delegator_id beside the
    # kind-qualified delegator). The session id is the requester's word, never verified.
    return {
        "kind": action,
        "subject": str(requester),
        "principal_id": str(requester),
        "agent_id": requester.id if requester.kind.value == "agent" else None,
        "session_id": workload.session_id,
        "session_verified": False if workload.session_id is not None else None,
        "delegator_id": grant.issuer.id,
        "delegator": str(grant.issuer),
        "authorization_decision_id": grant.id,
        "tenant": workload.tenant_id,
        "application": workload.application_id,
        "work_id": workload.workload_id,
        "operation_id": operation_id,
        "attempt_id": workload.attempts[-1].attempt_id if workload.attempts else None,
        "worker_id": workload.current_claim.worker_id
        if workload.current_claim is not None
        else None,
        # Whose attempt this is, kept once the claim is released (a completion, a failure,
        # a recovery): the workers view counts each worker's outcomes from it.
        "attempt_worker_id": workload.attempts[-1].worker_id if workload.attempts else None,
        "result_id": workload.result.result_id if workload.result is not None else None,
        "actor": last.actor if last is not None else None,
        "event_type": last.event_type if last is not None else None,
        "operation": operation,
        "state": workload.state.value,
        "source_kind": "WorkloadStore" if migration else None,
        "source_digest": sha256_hex(stored),
        "migration_outcome": "imported" if migration else None,
    }


ANCHOR = re.compile(r"([1-9][0-9]{0,18}):([0-9a-f]{64})")
"""An anchor as written: ``REVISION:LINK``, a report's ``head_revision`` and ``head_link``."""


def anchor_of(text: Any) -> tuple[int, str]:
    """The ``(revision, link)`` of an anchor written ``REVISION:LINK`` (at most 84
    characters: a revision of at most 19 digits, a link of 64 lowercase hex digits).

    Raises:
        WorkloadError: ``WORKLOAD_INVALID`` for anything else.
    """
    found = ANCHOR.fullmatch(text) if isinstance(text, str) else None
    if found is None:
        raise inputs.invalid(
            "anchor", "must be REVISION:LINK, a report's head_revision and head_link"
        )
    # Only compared with the revisions walked, never sent to the database: any number the
    # pattern admits is safe (a revision past every one walked is simply not reached).
    return int(found[1]), found[2]


def _reading(
    tenant_id: str, application_id: str, limit: int, scan: int
) -> tuple[str, str, int, int]:
    """The checked tenant, application, page size and scan budget of a reading of the log."""
    return (
        inputs.identifier(tenant_id, "tenant_id"),
        inputs.identifier(application_id, "application_id"),
        inputs.integer(limit, "limit", 1),
        inputs.integer(scan, "scan", 1),
    )


def _of(db: Database, revision: int, tenant_id: str, application_id: str | None) -> bool:
    """Whether the log entry at ``revision`` has an audit record of this application."""
    entry = db.chain_entries_at([revision]).get(revision)
    if entry is None or entry.audit is None:
        return False
    try:
        record = json.loads(entry.audit)
    except ValueError:  # an altered entry may hold anything
        return False
    return (
        isinstance(record, dict)
        and record.get("tenant") == tenant_id
        and record.get("application") == application_id
    )


class AuditTrail:
    """The audit of one store (``WorkloadStore.audit``): its log read back by tenant and
    application at a bounded cost per call, and its hash chain sealed and verified.
    """

    def __init__(self, db: Database, clock: Callable[[int | None], int]) -> None:
        self._db = db
        self._clock = clock

    def after(
        self,
        tenant_id: str,
        application_id: str,
        after: int = 0,
        limit: int = 100,
        *,
        scan: int = AUDIT_SCAN,
    ) -> tuple[list[CommittedTransaction], int]:
        """Committed transactions after revision ``after`` whose audit record names this
        tenant and application (``"tenant"``, ``"application"``), oldest first, at most
        ``limit``; and the revision to continue after.

        The log is one sequence for every tenant, so this reads it in order and keeps the
        matching entries; one call reads at most ``scan`` log entries (a bounded cost
        however sparse the tenant's entries are). The revision answered is the last
        returned entry's when the page is full, otherwise the last entry read (or
        ``after`` when none was): passing it back never skips nor repeats an entry.

        Raises:
            WorkloadError: ``WORKLOAD_INVALID``; ``WORKLOAD_STORAGE_FAILURE``.
        """
        tenant_id, application_id, limit, budget = _reading(tenant_id, application_id, limit, scan)
        after = inputs.integer(after, "after", 0)
        found: list[CommittedTransaction] = []
        cursor = after
        while budget > 0:
            batch = self._db.committed_transactions_after(cursor, min(budget, AUDIT_BATCH))
            if not batch:
                break
            budget -= len(batch)
            for transaction in batch:
                cursor = transaction.commit_revision
                audit = transaction.audit or {}
                if audit.get("tenant") == tenant_id and audit.get("application") == application_id:
                    found.append(transaction)
                    if len(found) == limit:
                        return found, cursor
        return found, cursor

    def before(
        self,
        tenant_id: str,
        application_id: str,
        before: int | None = None,
        limit: int = 50,
        *,
        work_id: str | None = None,
        subject: str | None = None,
        scan: int = AUDIT_SCAN,
    ) -> tuple[list[CommittedTransaction], int | None]:
        """This tenant's application's committed transactions before revision ``before``
        (``None``: the newest), newest first, at most ``limit``, keeping only those of
        workload ``work_id`` and of ``subject`` (the requester or the actor) when given; and
        the revision to continue before, ``None`` when the log's start was reached.

        Reads at most ``scan`` log entries however few match, as :meth:`AuditTrail.after` does.

        Raises:
            WorkloadError: ``WORKLOAD_INVALID``; ``WORKLOAD_STORAGE_FAILURE``.
        """
        tenant_id, application_id, limit, budget = _reading(tenant_id, application_id, limit, scan)
        cursor = (
            self._db.current_revision() + 1
            if before is None
            else inputs.integer(before, "before", 1)
        )
        found: list[CommittedTransaction] = []
        while budget > 0:
            batch = self._db.committed_transactions_before(cursor, min(budget, AUDIT_BATCH))
            if not batch:
                return found, None
            budget -= len(batch)
            for transaction in batch:
                cursor = transaction.commit_revision
                record = transaction.audit or {}
                if (
                    record.get("tenant") == tenant_id
                    and record.get("application") == application_id
                    and (work_id is None or record.get("work_id") == work_id)
                    and (subject is None or subject in (record.get("subject"), record.get("actor")))
                ):
                    found.append(transaction)
                    if len(found) == limit:
                        return found, cursor
        return found, cursor if cursor > 1 else None

    def seal(self, limit: int | None = None) -> int:
        """Seal the log entries that are final into the audit chain, oldest first (at most
        ``limit``; ``None``: all); how many were sealed. The server does it on every
        maintenance pass: see :mod:`feltdb.storage.audit_chain`.

        Raises:
            WorkloadError: ``WORKLOAD_STORAGE_FAILURE``.
        """
        return audit_chain.seal(self._db, limit=limit)

    def _verified(self, anchor: tuple[int, str] | None) -> ChainReport:
        """The whole chain verified as far as the log was pruned (the mark read first)."""
        indexes = {DURABLE_WORK_COLLECTION: lambda key, text: row_index(stored_workload(key, text))}
        for _ in range(3):
            mark = self._mark()
            report = audit_chain.verify(
                self._db, anchor=anchor, indexes=indexes, pruned_through=mark.through
            )
            problem = report.problem
            # A pruning that committed its mark and deleted entries during the walk: the
            # entries it deleted are not missing. Walk again, knowing its mark.
            if problem is None or problem.kind != "removed" or self._mark() == mark:
                return report
        return report

    def _mark(self) -> PrunedMark:
        """How far the log was pruned; a mark edited into something else is taken as none,
        and the walk reports the first pruned link as removed (never an exception here).
        """
        try:
            return pruned_mark(self._db)
        except WorkloadError:
            return PrunedMark()

    def prune_log(
        self,
        export: Path,
        through: int | None = None,
        *,
        actor: str,
        now: int | None = None,
        progress: Callable[[str], None] | None = None,
    ) -> LogPruneReport:
        """Prune the log up to revision ``through`` (``None``: the chain's head), exporting
        its entries to the new file ``export`` first (:func:`feltdb.work.log_pruning.prune_log`
        says how, and what stays provable); ``actor`` (``KIND:ID``) is named in its audit
        records; ``progress`` is told each step as it ends.

        Raises:
            WorkloadError: ``WORKLOAD_INVALID``, ``WORKLOAD_CONFLICT``,
                ``WORKLOAD_STORAGE_FAILURE``, as :func:`~feltdb.work.log_pruning.prune_log`.
        """
        actor, at = inputs.actor(actor), self._clock(now)
        verify = partial(self._verified, None)
        return log_pruning.prune_log(
            self._db, verify, export, through, actor=actor, now=at, progress=progress
        )

    def check_export(self, export: Path) -> ExportSummary:
        """Check an export of the log (:func:`feltdb.work.log_export.check_export`) and that
        it is, byte for byte, one this store's pruning wrote (its SHA-256 is in the mark's
        list of exports): the file holds this log's history, whole.

        Raises:
            WorkloadError: ``WORKLOAD_INVALID`` for an export that fails its check, or that
                this store did not write; ``WORKLOAD_STORAGE_FAILURE``.
        """
        summary = check_export(export)
        if summary.sha256 not in {noted.get("sha256") for noted in self._mark().exports}:
            raise inputs.invalid(
                "export",
                f"{export} (SHA-256 {summary.sha256}) is no export this store's pruning "
                "wrote: another store's, or cut or altered with every hash recomputed",
            )
        return summary

    def verify(
        self,
        tenant_id: str | None = None,
        application_id: str | None = None,
        *,
        anchor: tuple[int, str] | None = None,
    ) -> ChainReport:
        """Seal what is final, then verify the audit chain, every row against the
        transaction that wrote it, every workload's index columns against its document
        (:func:`~feltdb.work.scheduling.row_index`), and every row the log wrote against the
        rows (:func:`feltdb.storage.audit_chain.verify`); ``anchor``: an earlier report's
        ``(head_revision, head_link)``, which the chain must still hold.

        The chain is one for every tenant, and so is its verdict. Given a tenant and an
        application, the first problem names its transaction and row, and says what it is,
        only if it is this application's (a row's problem: the row's; a transaction's, or a
        missing row's: its audit record's); otherwise only its kind and revision are told (a
        revision names no work). The counts are the store's, as the log's revisions already
        are.

        Raises:
            WorkloadError: ``WORKLOAD_INVALID``; ``WORKLOAD_STORAGE_FAILURE``.
        """
        if tenant_id is not None or application_id is not None:
            tenant_id = inputs.identifier(tenant_id, "tenant_id")
            application_id = inputs.identifier(application_id, "application_id")
        report = self._verified(anchor)
        problem = report.problem
        if problem is None or tenant_id is None:
            return report
        row = None
        if problem.address is not None:  # a row's problem is the row's application's
            collection, _, key = problem.address.partition("/")
            row = self._db.get_row(collection, key)
        if row is not None:
            document = row.document
            ours = (document.get("tenant_id"), document.get("application_id")) == (
                tenant_id,
                application_id,
            )
        else:  # a transaction's, or a missing row's: the entry at its revision wrote it
            ours = _of(self._db, problem.revision, tenant_id, application_id)
        if ours:
            return report
        hidden = problem.model_copy(
            update={
                "transaction_id": None,
                "address": None,
                "message": f"the audit chain fails its check ({problem.kind.replace('_', ' ')}) "
                f"at revision {problem.revision}, a transaction of another application",
            }
        )
        return report.model_copy(update={"problem": hidden})
