"""The overview's retention box: what the server's maintenance loop will prune next of the
viewer's work, or that it prunes nothing (``feltdb serve`` without ``--retain``).

Read as a dry run of the loop's next pass (:meth:`~feltdb.work.pruning.Retention.due`,
with the server's policy and the viewer's scope): at most
:data:`~feltdb.work.pruning.PRUNE_BATCH` workloads, so a count of that many is said as "at
least".
"""

from __future__ import annotations

from dataclasses import dataclass

from fastapi import Request

from feltdb.auth.scope import Scope
from feltdb.work.pruning import PRUNE_BATCH
from feltdb.work.retention import RetentionPolicy
from feltdb.work.store import WorkloadStore

__all__ = ["RetentionView", "retention_view"]


@dataclass(frozen=True, slots=True)
class RetentionView:
    """The policy (``None``: retention is off) and, when on, what its next pass prunes."""

    policy: RetentionPolicy | None
    due: int = 0
    """Workloads the next pass would prune (at most :data:`bound`)."""
    bound: int = PRUNE_BATCH
    oldest_at: int | None = None
    """The earliest ``updated_at`` among them (``None``: none is due)."""

    @property
    def at_least(self) -> bool:
        """Whether the count is the pass's bound (more may be due)."""
        return self.due >= self.bound


def retention_view(request: Request, store: WorkloadStore, scope: Scope, now: int) -> RetentionView:
    """What the server's retention (``app.state.maintenance.retention``) prunes next of the
    work in ``scope`` at ``now``.

    Raises:
        WorkloadError: ``WORKLOAD_STORAGE_FAILURE``.
    """
    maintenance = getattr(request.app.state, "maintenance", None)
    policy: RetentionPolicy | None = getattr(maintenance, "retention", None)
    if policy is None:
        return RetentionView(None)
    due = store.retention.due(policy, now, limit=PRUNE_BATCH, scope=scope)
    oldest = min((item.updated_at for item in due), default=None)
    return RetentionView(policy, len(due), PRUNE_BATCH, oldest)
