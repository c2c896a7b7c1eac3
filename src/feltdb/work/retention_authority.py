"""Retention as one caller may use it: prune its application's finished work.

The per-caller part of :mod:`feltdb.work.pruning`, composed as
:class:`~feltdb.work.authority.Authority` composes the rest: the capability checked
against the caller's grant (``workload:operate`` over every workload of its application,
:func:`~feltdb.auth.policy.authorize_application`), and the caller's
:class:`~feltdb.auth.scope.Scope` given to the pass, so that a caller prunes only work it
could see (a grant narrowed to some definitions or environments prunes only theirs). The
pass is recorded as the caller's (its subject, the audit record's ``actor``).

Pruning every tenant's work at once is the store holder's (``store.retention.prune()``
without a scope) and the server's maintenance loop's, never a caller's.
"""

from __future__ import annotations

from pathlib import Path

from feltdb.auth.policy import OPERATE, authorize_application
from feltdb.work.authority import Authority
from feltdb.work.pruning import PRUNE_BATCH, PruneReport
from feltdb.work.retention import RetentionPolicy

__all__ = ["prune_as"]


def prune_as(
    acting: Authority,
    policy: RetentionPolicy,
    now: int | None,
    *,
    limit: int = PRUNE_BATCH,
    dry_run: bool = False,
    archive: Path | None = None,
) -> PruneReport:
    """One prune pass of ``acting``'s application under ``policy`` at ``now``, within its
    scope, recorded as its subject's (:meth:`~feltdb.work.pruning.Retention.prune`).

    Raises:
        WorkloadError: ``WORKLOAD_UNAUTHORIZED`` for a grant without ``workload:operate``
            over every workload of its application; the pass's refusals.
    """
    if acting.checked and acting.grant is not None:
        authorize_application(acting.grant, OPERATE)
    return acting.store.retention.prune(
        acting.actor, policy, now,
        limit=limit, dry_run=dry_run, archive=archive, scope=acting.scope,
    )  # fmt: skip
