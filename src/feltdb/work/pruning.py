"""The prune pass: finished work past its retention age deleted, in bounded, audited,
guarded commits (the policy is :mod:`feltdb.work.retention`'s).

A pass reads at most ``limit`` (:data:`PRUNE_BATCH` by default, :data:`MAX_PRUNE_BATCH`
at most) due workloads, oldest first per finished state, then deletes them in one write
transaction: one commit per tenant's application (:meth:`Database.commit_many`), each
deletion guarded by the version read, each commit logged with an audit record of kind
``workload.pruned`` that names what it pruned (``pruned``: each workload's id, version,
revision, state and ``updated_at``). So:

- two servers pruning at once delete each workload once: the second's guard fails, and
  its pass reads the rows again and deletes only those still as it read them;
- a workload changed between the read and the delete (a dead letter an operator re-armed)
  is left: its version moved;
- the audit chain still verifies: each row's last logged write is the prune's deletion, so
  ``row_missing`` is reported only for a row deleted behind the authority's back
  (:mod:`feltdb.storage.chain_writes`). The log entries that wrote the pruned rows stay.

After its deletions a pass (not a dry run) returns at most :data:`RECLAIM_PAGES` of the
store's free pages to the file system (:meth:`Database.reclaim_space`: on a SQLite file
made ``auto_vacuum = INCREMENTAL``; nothing on PostgreSQL, where autovacuum keeps up), so a
file shrinks a bounded step a pass instead of in one long hold of the write lock.

A workload's row is all there is of it (its idempotency key is its id, its result id and
its definition and environment are index columns of that row), so deleting the row forgets
it entirely: an admission with the same idempotency key after it was pruned is a new
workload. A workload that depends on a pruned one reads its dependency as absent, as one
never admitted: it is never claimable again (set aside waiting on it). Give work with
dependants a retention longer than its dependants wait.

The candidates are read from the index (:mod:`feltdb.storage.retention_reads`) by
``created_at``, which is never after ``updated_at``: at most :data:`SCAN_PER_STATE` index
entries per state per pass, so a pass over a store whose old work finished late (created
long ago, finished recently) may find fewer than are due; the next pass goes on from the
start again, and such work is due once its own age passes.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from feltdb.auth.scope import Scope
from feltdb.limits import MAX_PLANS_PER_BATCH
from feltdb.records.workload import DURABLE_WORK_COLLECTION
from feltdb.storage.base import (
    VERSION_FIELD,
    Database,
    Mutation,
    PlannedCommit,
    Precondition,
    StorageConflict,
    StoredRow,
    storage_failure,
)
from feltdb.storage.canonical import canonical_json
from feltdb.work import inputs
from feltdb.work.retention import FINISHED_STATES, RetentionPolicy
from feltdb.work.states import WorkloadState

__all__ = [
    "MAX_PRUNE_BATCH",
    "PRUNED",
    "PRUNE_BATCH",
    "RECLAIM_PAGES",
    "Due",
    "PruneReport",
    "Retention",
    "delete_due",
    "due",
    "prune",
]

PRUNE_BATCH: Final = 500
"""Workloads one pass deletes at most, by default: one write transaction of that many
row deletions holds the write lock for milliseconds, not seconds."""
MAX_PRUNE_BATCH: Final = 5000
"""The largest ``limit`` a pass accepts."""
SCAN_PER_STATE: Final = 20_000
"""Index entries one pass reads per finished state at most, looking for due work."""
RECLAIM_PAGES: Final = 2560
"""Free pages one pass returns to the file system at most (10 MB of 4 KB pages): in a store
of a million finished workloads one such transaction held the write lock 38 to 43 ms
(bench/README.md), beside 21 ms for a pass's deletions; a pass of 500 frees about 540
pages, so the file keeps up with pruning."""
ATTEMPTS: Final = 3
"""Times a pass commits again the deletions of an application whose guard failed."""
PRUNED: Final = "workload.pruned"
"""The audit kind of a prune's commit."""


@dataclass(frozen=True, slots=True)
class Due:
    """A finished workload past its retention age, as read."""

    workload_id: str
    tenant_id: str
    application_id: str
    definition_id: str
    state: str
    updated_at: int
    version: int
    revision: int
    text: str
    """Its stored document (canonical JSON): what the archive keeps."""

    def named(self) -> dict[str, Any]:
        """What the audit record and the report say of it."""
        return {
            "work_id": self.workload_id,
            "state": self.state,
            "definition_id": self.definition_id,
            "updated_at": self.updated_at,
            "version": self.version,
            "revision": self.revision,
        }


@dataclass(frozen=True, slots=True)
class PruneReport:
    """What a pass pruned (or, ``dry_run``, would prune), and whether more may be due."""

    pruned: list[dict[str, Any]]
    """:meth:`Due.named` of each workload deleted (or due, on a dry run), oldest first per state."""
    changed: int
    """Due workloads left because they changed, or were pruned by another writer, after
    they were read."""
    dry_run: bool
    more: bool
    """The pass stopped at its ``limit``: another pass may find more due."""
    reclaimed_pages: int = 0
    """Pages of the store's file returned to the file system after the deletions."""
    reclaimed_bytes: int = 0
    """Their size in bytes."""
    free_pages_left: int = 0
    """Free pages the file could still return (0 where it returns none)."""

    @property
    def again(self) -> bool:
        """Whether another pass at once would do more: more may be due, or at least
        :data:`RECLAIM_PAGES` free pages are left to return.
        """
        return self.more or self.free_pages_left >= RECLAIM_PAGES

    @classmethod
    def of_json(cls, answer: Mapping[str, Any]) -> PruneReport:
        """The report :meth:`to_json` wrote (what the HTTP client reads back)."""
        pruned = [dict(item) for item in answer["pruned"]]
        space = [int(answer.get(name, 0)) for name in _SPACE]
        return cls(
            pruned, int(answer["changed"]), bool(answer["dry_run"]), bool(answer["more"]), *space
        )

    def to_json(self) -> dict[str, Any]:
        """The report as JSON (what the HTTP route answers and the CLI prints)."""
        return {
            "pruned": self.pruned,
            "count": len(self.pruned),
            "changed": self.changed,
            "dry_run": self.dry_run,
            "more": self.more,
            "reclaimed_pages": self.reclaimed_pages,
            "reclaimed_bytes": self.reclaimed_bytes,
            "free_pages_left": self.free_pages_left,
        }


_SPACE: Final = ("reclaimed_pages", "reclaimed_bytes", "free_pages_left")
"""The report's fields of the space returned, in their order."""


def due(
    db: Database, policy: RetentionPolicy, now: int, limit: int, scope: Scope | None = None
) -> list[Due]:
    """At most ``limit`` finished workloads past their age under ``policy`` at ``now``
    (and in ``scope``, unless ``None``), oldest first per state, states in
    :data:`~feltdb.work.retention.FINISHED_STATES` order. Reads no more than
    :data:`SCAN_PER_STATE` index entries per state.

    Raises:
        WorkloadError: ``WORKLOAD_INVALID`` for a ``limit`` outside 1 to
            :data:`MAX_PRUNE_BATCH`; ``WORKLOAD_STORAGE_FAILURE``.
    """
    limit = inputs.integer(limit, "limit", 1, MAX_PRUNE_BATCH)
    found: list[Due] = []
    for state in FINISHED_STATES:
        shortest = policy.shortest(state)
        if shortest is None or len(found) >= limit:
            continue
        found += _due_in(db, policy, state, now - shortest, now, limit - len(found), scope)
    return found


def _due_in(
    db: Database,
    policy: RetentionPolicy,
    state: WorkloadState,
    cutoff: int,
    now: int,
    wanted: int,
    scope: Scope | None,
) -> Iterator[Due]:
    """Up to ``wanted`` due workloads in ``state``, created at or before ``cutoff``."""
    after: tuple[int, str] | None = None
    read = yielded = 0
    page = min(max(wanted, 100), MAX_PLANS_PER_BATCH)  # get_rows reads a batch at most
    while yielded < wanted and read < SCAN_PER_STATE:
        keys = db.keys_created_before(
            DURABLE_WORK_COLLECTION, state.value, cutoff, after, limit=page
        )
        if not keys:
            return
        read, after = read + len(keys), keys[-1]
        rows = db.get_rows(DURABLE_WORK_COLLECTION, [key for _, key in keys])
        for _, key in keys:
            row = rows.get(key)
            candidate = _candidate(row, policy, state, now, scope) if row is not None else None
            if candidate is not None and yielded < wanted:
                yielded += 1
                yield candidate


def _candidate(
    row: StoredRow, policy: RetentionPolicy, state: WorkloadState, now: int, scope: Scope | None
) -> Due | None:
    """``row`` as a due workload, or ``None`` if it is not due (or not in ``scope``)."""
    document = row.document
    definition = str(document.get("definition_id"))
    updated = document.get("updated_at")
    age = policy.age_for(definition, state)
    if document.get("state") != state.value or age is None or not isinstance(updated, int):
        return None
    if updated > now - age:
        return None
    tenant, application = str(document.get("tenant_id")), str(document.get("application_id"))
    environment = str(document.get("environment"))
    if scope is not None and not scope.admits(tenant, application, environment, definition):
        return None
    text = row.text if row.text is not None else canonical_json(_without_version(document))
    return Due(
        row.key, tenant, application, definition, state.value, updated, row.version,
        row.revision, text,
    )  # fmt: skip


def _without_version(document: dict[str, Any]) -> dict[str, Any]:
    return {name: value for name, value in document.items() if name != VERSION_FIELD}


def prune(
    db: Database,
    policy: RetentionPolicy,
    now: int,
    actor: str,
    *,
    limit: int = PRUNE_BATCH,
    dry_run: bool = False,
    archive: Path | None = None,
    scope: Scope | None = None,
) -> PruneReport:
    """One pass: delete the workloads :func:`due` finds (at most ``limit``), as the
    module says, then returns at most :data:`RECLAIM_PAGES` free pages to the file system
    (whether or not it deleted any); on a ``dry_run``, only say which. With ``archive``,
    each is first appended to that JSON Lines file (one ``{"archived_at", "version",
    "revision", "workload"}`` object a line), which is flushed and synced to disk before
    anything is deleted; a workload archived but then left (changed since it was read) is
    in the archive too.

    Raises:
        WorkloadError: ``WORKLOAD_INVALID`` (the ``limit``, the ``actor``);
            ``WORKLOAD_STORAGE_FAILURE``, also for an archive that cannot be written
            (nothing is then deleted).
    """
    actor = inputs.actor(actor)
    found = due(db, policy, now, limit, scope)
    more = len(found) >= limit
    if dry_run:
        return PruneReport([item.named() for item in found], 0, dry_run, more)
    if archive is not None and found:
        append_archive(archive, found, now)
    deleted = delete_due(db, found, actor, now) if found else set()
    pruned = [item.named() for item in found if item.workload_id in deleted]
    # Also when nothing was due: what an earlier pass left on the free list goes too.
    space = db.reclaim_space(RECLAIM_PAGES)
    return PruneReport(
        pruned, len(found) - len(pruned), False, more, space.pages, space.bytes, space.left
    )


def append_archive(path: Path, found: Sequence[Due], now: int) -> None:
    """Append ``found`` to the JSON Lines file at ``path``, then sync it to disk.

    Raises:
        WorkloadError: ``WORKLOAD_STORAGE_FAILURE`` when it cannot be written.
    """
    lines = "".join(
        f'{{"archived_at":{now},"version":{item.version},"revision":{item.revision},'
        f'"workload":{item.text}}}\n'
        for item in found
    )
    try:
        with open(path, "a", encoding="utf-8") as archive:
            archive.write(lines)
            archive.flush()
            os.fsync(archive.fileno())
    except OSError as error:
        raise storage_failure(f"the archive {path} cannot be written: {error}") from error


def delete_due(db: Database, found: Sequence[Due], actor: str, now: int) -> set[str]:
    """Delete ``found`` (read by :func:`due`) at ``now`` by ``actor``: one guarded commit
    per tenant's application, all in one write transaction; of an application whose guard
    failed, the rows still at the version read are committed again (:data:`ATTEMPTS` times
    in all), the others left. The ids deleted.

    Raises:
        WorkloadError: ``WORKLOAD_STORAGE_FAILURE``.
    """
    groups: dict[tuple[str, str], list[Due]] = {}
    for item in found:
        groups.setdefault((item.tenant_id, item.application_id), []).append(item)
    deleted: set[str] = set()
    for _ in range(ATTEMPTS):
        pending = list(groups.values())
        groups = {}
        for start in range(0, len(pending), MAX_PLANS_PER_BATCH):
            chunk = pending[start : start + MAX_PLANS_PER_BATCH]
            outcomes = db.commit_many([_plan(items, actor, now) for items in chunk])
            for items, outcome in zip(chunk, outcomes, strict=True):
                if isinstance(outcome, StorageConflict):
                    still = _unchanged(db, items)
                    if still:
                        groups[(items[0].tenant_id, items[0].application_id)] = still
                else:
                    deleted.update(item.workload_id for item in items)
        if not groups:
            break
    return deleted


def _unchanged(db: Database, items: Sequence[Due]) -> list[Due]:
    """Those of ``items`` whose rows are still at the version read."""
    rows = db.get_rows(DURABLE_WORK_COLLECTION, [item.workload_id for item in items])
    return [
        item
        for item in items
        if (row := rows.get(item.workload_id)) is not None and row.version == item.version
    ]


def _plan(items: Sequence[Due], actor: str, now: int) -> PlannedCommit:
    """The guarded deletion of ``items`` (all of one tenant's application), audited."""
    operation_id = "prune_tx_" + secrets.token_hex(12)
    audit = {
        "kind": PRUNED,
        "subject": actor,
        "actor": actor,
        "tenant": items[0].tenant_id,
        "application": items[0].application_id,
        "operation": "prune",
        "operation_id": operation_id,
        "pruned_at": now,
        "pruned": [item.named() for item in items],
    }
    return PlannedCommit(
        operation_id,
        [Mutation(DURABLE_WORK_COLLECTION, item.workload_id, None) for item in items],
        [
            Precondition(DURABLE_WORK_COLLECTION, item.workload_id, expected_version=item.version)
            for item in items
        ],
        audit,
    )


class Retention:
    """Retention of one store (``WorkloadStore.retention``): :func:`due` and :func:`prune`
    over its database, with ``now`` resolved by the store's clock and the policy
    :class:`~feltdb.work.retention.RetentionPolicy`'s defaults unless one is given.
    """

    def __init__(self, db: Database, clock: Callable[[int | None], int]) -> None:
        self._db, self._clock = db, clock

    def due(
        self,
        policy: RetentionPolicy | None = None,
        now: int | None = None,
        *,
        limit: int = PRUNE_BATCH,
        scope: Scope | None = None,
    ) -> list[Due]:
        """What a pass at ``now`` would prune next, oldest first per state (:func:`due`)."""
        return due(self._db, policy or RetentionPolicy(), self._clock(now), limit, scope)

    def prune(
        self,
        actor: str,
        policy: RetentionPolicy | None = None,
        now: int | None = None,
        *,
        limit: int = PRUNE_BATCH,
        dry_run: bool = False,
        archive: Path | None = None,
        scope: Scope | None = None,
    ) -> PruneReport:
        """One prune pass by ``actor`` (:func:`prune`): at most ``limit`` workloads deleted,
        in guarded commits, each logged with what it pruned.
        """
        return prune(
            self._db, policy or RetentionPolicy(), self._clock(now), actor,
            limit=limit, dry_run=dry_run, archive=archive, scope=scope,
        )  # fmt: skip
