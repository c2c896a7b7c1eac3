"""What a claim's write transaction selects and writes: the part of the
:class:`~feltdb.storage.base.Database` protocol that selects claimable rows, hands them to
the caller's ``choose`` and commits what it plans (:class:`SelectingCommits`), and the
rows ``choose`` may set aside instead (:class:`SetAside`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:  # base composes this protocol: its types are only named here
    from feltdb.storage.base import Commit, PlannedCommit, RowReader, StorageConflict, StoredRow
    from feltdb.storage.partitions import ClaimPartitions

__all__ = ["SelectingCommits", "SetAside"]


@dataclass(frozen=True, slots=True)
class SetAside:
    """A selected row that ``commit_selected_many``'s ``choose`` sets aside until the row
    ``waits_on`` (of its tenant's application) is written in state ``waits_for``: its index
    alone is written (no version, no log entry), and only if it is still at ``version``
    and ``waits_on`` is still at ``waits_on_version``, the version the choice read it at
    (a row written since, or being written by another transaction at that moment, may
    have released already: nothing is set aside, and the next claim reads it again). A
    write of the row, or the release of a :class:`Mutation` of ``waits_on``, makes it
    claimable again.
    """

    collection: str
    key: str
    version: int
    waits_on: str
    waits_for: str
    waits_on_version: int


class SelectingCommits(Protocol):
    """Commits decided on rows selected and held inside their own write transaction."""

    def commit_selected(
        self,
        collection: str,
        tenant_id: str,
        application_id: str,
        state: str,
        now: int,
        choose: Callable[[Sequence[StoredRow], RowReader], PlannedCommit | None],
        *,
        limit: int,
        offset: int = 0,
        partitions: ClaimPartitions | None = None,
    ) -> Commit | None:
        """In one write transaction: select the claimable rows, call ``choose`` with them and
        a reader of further rows, and apply the commit it plans, guarded and logged as
        :meth:`commit` does. ``None``, and nothing written, when ``choose`` answers ``None``.
        ``choose`` may be called again if the backend retries the transaction, so it must
        not act outside it.

        The claimable rows are the rows of one tenant's application in index ``state``
        whose ``eligible_at`` is ``None`` or ``<= now`` and that are not set aside
        (:class:`SetAside`), in :meth:`list_rows`'s order, and
        of those the ``limit`` after the first ``offset``; read from an index, never a scan.
        Each is locked against every other writer until the transaction ends (a backend
        with row locks skips rows another transaction holds, so concurrent callers get
        disjoint rows; one with a single writer holds its write lock throughout).

        ``partitions`` (:mod:`~feltdb.storage.partitions`) selects instead the rows, whatever
        their state, of the claim groups it accepts (of the definitions it names): one index
        range per group, each read to ``offset + limit`` rows (or from ``partitions.after``
        on), merged in the same order and paged, never a filter over other groups' rows. None
        accepted: no transaction, ``choose`` is not called, ``[]``. Too many groups to walk:
        as without ``partitions`` (so ``choose`` must still check each row's definition and
        group).

        Raises:
            StorageConflict: a precondition of the plan failed; nothing was written.
            WorkloadError: whatever ``choose`` raises; ``WORKLOAD_INVALID`` for a plan
                :meth:`commit` refuses; ``WORKLOAD_STORAGE_FAILURE``.
        """
        ...

    def commit_selected_many(
        self,
        collection: str,
        tenant_id: str,
        application_id: str,
        state: str,
        now: int,
        choose: Callable[[Sequence[StoredRow], RowReader], Sequence[PlannedCommit | SetAside]],
        *,
        limit: int,
        offset: int = 0,
        partitions: ClaimPartitions | None = None,
    ) -> list[Commit | StorageConflict]:
        """:meth:`commit_selected` for a ``choose`` that plans any number of commits: the
        rows are selected and held as there, and the plans applied as :meth:`commit_many`
        applies them, in the same transaction; answers per plan, in order (``[]`` when
        ``choose`` plans none, and nothing is written). ``choose`` may also set rows aside
        (:class:`SetAside`), which answer nothing.

        Raises:
            WorkloadError: whatever ``choose`` raises; ``WORKLOAD_INVALID`` for plans
                :meth:`commit_many` refuses; ``WORKLOAD_STORAGE_FAILURE``.
        """
        ...
