"""A workload as a row: reading one back, and planning the guarded commit of one.

The document of a workload is its JSON; beside it the scheduling index
(:func:`~feltdb.work.scheduling.row_index`) and one audit record
(:func:`~feltdb.work.audit.audit_record`) are written in the same transaction.
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from feltdb.errors import ErrorCode, WorkloadError
from feltdb.fields import MAX_RECORD_BYTES, MAX_SAFE_INTEGER, RECORD_HEADROOM_BYTES
from feltdb.records.codec import stored_workload, stored_workload_text
from feltdb.records.summary import WorkloadSummary
from feltdb.records.workload import DURABLE_WORK_COLLECTION, Workload
from feltdb.storage.base import Mutation, PlannedCommit, Precondition, RowReader, StoredRow
from feltdb.work.audit import audit_record
from feltdb.work.changes import Operation
from feltdb.work.models import CreateWorkload
from feltdb.work.scheduling import AWAITED_STATES, row_index
from feltdb.work.states import WorkloadState

_COUNTERS = ("fencing_token", "attempt_count", "retry_count")
"""What a transition adds one to (a claim, an attempt, a retry)."""

WORKER_GROWTH = frozenset(
    op.value for op in (Operation.CHECKPOINT, Operation.COMPLETE, Operation.FAIL)
)
"""The operations (a worker's reports) held to :data:`~feltdb.fields.MAX_RECORD_BYTES`
exactly: what a worker sends is what grows a record."""

CREATED = "workload.created"
"""The audit kind of an admission."""
MUTATED = "workload.mutated"
"""The audit kind of every later change."""


@dataclass(frozen=True, slots=True)
class LoadedWorkload:
    """A workload as read (or as decided on that read: :meth:`decided`), with what its
    commit must be guarded by and report.
    """

    workload: Workload
    version: int
    """The version it was read at: its commit is guarded by it."""
    state: WorkloadState
    """Its state as read (the observers' ``previous``)."""
    sequence: int
    """Its last event's sequence as read (events after it are the commit's)."""

    @classmethod
    def of(cls, workload: Workload, version: int) -> LoadedWorkload:
        """``workload`` as read at ``version``."""
        last = workload.execution_history[-1].sequence if workload.execution_history else 0
        return cls(workload, version, workload.state, last)

    def decided(self, workload: Workload) -> LoadedWorkload:
        """``workload``, decided on this read, to commit in its place: guarded by the
        version this was read at, reporting the state and events this read had.
        """
        return LoadedWorkload(workload, self.version, self.state, self.sequence)


def workload_of(row: StoredRow) -> Workload:
    """The workload a stored row holds (:func:`~feltdb.records.codec.stored_workload`).

    Raises:
        WorkloadError: ``WORKLOAD_STORAGE_FAILURE`` when the row is not a workload record
            (nor JSON at all).
    """
    if row.text is not None:  # row.document would be decoded from it: not asked for
        return stored_workload(row.key, row.text)
    return stored_workload(row.key, None, row.document)


def planned_commit(
    workload: Workload, action: str, version: int | None, operation: str | None = None
) -> PlannedCommit:
    """The guarded commit of ``workload`` as the document of its id: ``version`` is the version it
    was read at (``None``: it must not exist yet). ``action`` is the audit kind, ``operation``
    the store operation that made the change (``Operation``'s value, e.g. ``"complete"``).
    """
    for counter in _COUNTERS:
        if getattr(workload, counter) > MAX_SAFE_INTEGER:
            # The one number a transition adds to with no bound of its own: refused here,
            # for records are not validated again on assignment.
            raise WorkloadError(
                ErrorCode.WORKLOAD_INVALID,
                f"workload {workload.workload_id}: {counter} would pass {MAX_SAFE_INTEGER}",
                {"fields": [counter]},
            )
    text = stored_text_of(workload)
    # A worker's reports are held to the bound; the authority's own changes have headroom
    # past it, so that a record its worker filled can still be recovered or timed out.
    bound = MAX_RECORD_BYTES
    if operation not in WORKER_GROWTH:
        bound += RECORD_HEADROOM_BYTES
    # Characters never outnumber bytes, and each is at most 4 of them: the text is encoded
    # to be measured only when it might pass the bound.
    if len(text) > bound // 4 and len(text.encode("utf-8")) > bound:
        raise WorkloadError(
            ErrorCode.WORKLOAD_INVALID,
            f"workload {workload.workload_id}: its record would be "
            f"{len(text.encode('utf-8')):,} bytes of JSON, over the limit of "
            f"{MAX_RECORD_BYTES:,} (checkpoint a reference to large state, not the state)",
            {"fields": ["record"], "max_record_bytes": MAX_RECORD_BYTES},
        )
    operation_id = "work_tx_" + secrets.token_hex(12)
    index = row_index(workload)
    return PlannedCommit(
        operation_id,
        [
            Mutation(
                DURABLE_WORK_COLLECTION,
                workload.workload_id,
                None,  # the text alone: no commit reads the document back as a dict
                index,
                text,
                releases=workload.state in AWAITED_STATES,
            )
        ],
        [
            Precondition(
                DURABLE_WORK_COLLECTION,
                workload.workload_id,
                require_absent=version is None,
                expected_version=version,
            )
        ],
        audit_record(workload, text, action, operation_id, operation),
    )


def stored_text_of(workload: Workload) -> str:
    """The text ``workload`` is stored as, made once per commit: its canonical JSON
    (:func:`~feltdb.records.codec.stored_workload_text`), which the audit record's
    ``source_digest`` hashes too.

    Raises:
        WorkloadError: ``WORKLOAD_INVALID`` when the workload holds a value that is not JSON.
    """
    try:
        return stored_workload_text(workload)
    except ValueError as error:
        raise WorkloadError(
            ErrorCode.WORKLOAD_INVALID,
            f"the document at {DURABLE_WORK_COLLECTION}/{workload.workload_id} is not JSON: "
            f"{error}",
        ) from error


def same_application(
    document: dict[str, Any], workload: Workload | CreateWorkload | WorkloadSummary
) -> bool:
    """Whether a stored workload ``document`` is of ``workload``'s tenant and application."""
    return (
        document.get("tenant_id") == workload.tenant_id
        and document.get("application_id") == workload.application_id
    )


def holding(
    plan: PlannedCommit, held: Sequence[Precondition], also: Sequence[Mutation] = ()
) -> PlannedCommit:
    """``plan``, committing only while each row ``held`` guards (rows its decision read:
    its dependencies, and the rows ``also`` writes) is as the guard requires, and writing
    the rows of ``also`` besides (a concurrency slot).
    """
    if not held and not also:
        return plan
    return replace(
        plan,
        mutations=[*plan.mutations, *also],
        preconditions=[*plan.preconditions, *held],
    )


def dependency_row(
    read: RowReader, dependent: Workload | WorkloadSummary, workload_id: str
) -> StoredRow | None:
    """The committed row of ``dependent``'s dependency ``workload_id``; ``None`` when no
    workload of ``dependent``'s tenant and application has that id (another tenant's work
    is never a dependency, so its existence can never be learnt through one).
    """
    row = read(DURABLE_WORK_COLLECTION, workload_id)
    if row is None or not same_application(row.document, dependent):
        return None
    return row
