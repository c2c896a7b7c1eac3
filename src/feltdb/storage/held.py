"""Commits decided on rows read and held inside their own write transaction: what an
admission under a quota commits (:mod:`feltdb.work.quota_charges`).

:meth:`HeldCommits.commit_held` opens one write transaction, reads the rows it is asked to
hold, each locked against every other writer until the transaction ends (SQLite: the one
writer's lock, taken by ``BEGIN IMMEDIATE``; PostgreSQL: ``SELECT … FOR UPDATE``, in key
order, waiting for a writer that holds one), and hands them to the caller's ``decide``
with a bounded count of rows (:meth:`~feltdb.storage.counts.IndexCounts.count_in_states`)
read inside the same transaction. ``decide`` answers the plans to commit, the refusals of
the items it will not commit, and the new documents of the held rows. The plans are
written as :meth:`~feltdb.storage.base.Database.commit_many` writes them (each its own
commit, guards and log entry; by arrays on PostgreSQL), and the held rows' writes ride on
the last, guarded by the versions read: held, they cannot have changed. If that plan loses
its own guard (its workload was admitted by another writer meanwhile), they are written in
a plan of their own after it, if any plan before it committed; if none did, they are not
written.

So a decision on a shared row (a quota's count) is never lost to another writer's, as a
guard read outside the transaction would be under a flood: writers of a held row queue
on it, and each decides on what the one before it committed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from feltdb.errors import WorkloadError

if TYPE_CHECKING:  # base composes this protocol: its types are only named here
    from feltdb.storage.base import Commit, Mutation, PlannedCommit, StoredRow

__all__ = ["Counter", "Decision", "HeldCommits"]

Counter = Callable[[str, Sequence[str], int, str | None, str | None], int]
"""``count(tenant_id, states, limit, grant_id, application_id)``:
:meth:`~feltdb.storage.counts.IndexCounts.count_in_states` of the collection counted, read
inside the transaction (bound by :meth:`HeldCommits.commit_held`)."""


@dataclass(frozen=True, slots=True)
class Decision:
    """What ``decide`` answers: per item, its plan or its refusal (in the order the answers
    are wanted), and the held rows' new documents (:class:`Mutation` of held keys).
    """

    items: Sequence[PlannedCommit | WorkloadError]
    held_writes: Sequence[Mutation] = ()
    held_audit: Mapping[str, Any] | None = None
    """The audit record of the held rows' writes in a plan of their own (when the plan
    that was to carry them lost its guard after others committed)."""


class HeldCommits(Protocol):
    """Commits decided on rows held inside their write transaction."""

    def commit_held(
        self,
        collection: str,
        keys: Sequence[str],
        counted: str,
        decide: Callable[[Mapping[str, StoredRow | None], Counter], Decision],
    ) -> list[Commit | WorkloadError]:
        """In one write transaction: read and hold the rows of ``collection`` at ``keys``,
        call ``decide`` with them (by key; ``None``: no row) and a :data:`Counter` of the
        rows of the collection ``counted``, and write what it
        decided (see the module's docstring). Answers per item of the decision, in order:
        its :class:`Commit`, its lost guard's :class:`StorageConflict`, or its refusal.
        ``decide`` may be called again if the backend retries the transaction, so it must
        not act outside it.

        Raises:
            WorkloadError: whatever ``decide`` raises (nothing is written);
                ``WORKLOAD_INVALID`` for a plan :meth:`commit` refuses, or a held write of
                a key not held; ``WORKLOAD_STORAGE_FAILURE``.
        """
        ...
