"""Pruning through a client: :meth:`RetentionClient.prune`, over HTTP
(``POST /v1/retention/prune``) and in process, to the same effect.

A client prunes its tenant's application's finished work only, within its scope, and needs
``workload:operate`` over every workload of it (:mod:`feltdb.work.retention_authority`).
What a pass prunes is a :class:`PruneRequest`: the default ages, ``retain`` items,
``older_than`` for every finished state, or one ``definition``'s work
(:func:`~feltdb.work.retention.policy_of`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from feltdb.client.calls import Steps, ask, operation
from feltdb.errors import ErrorCode, WorkloadError
from feltdb.work.pruning import PRUNE_BATCH, PruneReport
from feltdb.work.retention import policy_of

if TYPE_CHECKING:  # the HTTP client never acts in process: the authority is the local one's
    from feltdb.work.authority import Authority

__all__ = ["HttpRetention", "LocalRetention", "PruneRequest", "RetentionClient"]


@dataclass(frozen=True, slots=True)
class PruneRequest:
    """One prune pass: at most ``limit`` workloads past their age (``dry_run``: only say
    which), under ``retain`` items (``[DEFINITION:]STATE=AGE``) over the default ages, or
    ``older_than`` (``30d``) for every finished state; only ``definition``'s work if given.
    ``archive``: a JSON Lines file each is appended to first (in process only).
    """

    retain: Sequence[str] = ()
    older_than: str | None = None
    definition: str | None = None
    limit: int = PRUNE_BATCH
    dry_run: bool = False
    archive: Path | None = None

    def body(self) -> dict[str, Any]:
        """The request as ``POST /v1/retention/prune``'s body (without ``archive``)."""
        body: dict[str, Any] = {
            "retain": list(self.retain), "limit": self.limit, "dry_run": self.dry_run,
        }  # fmt: skip
        if self.older_than is not None:
            body["older_than"] = self.older_than
        if self.definition is not None:
            body["definition"] = self.definition
        return body


class RetentionClient(Protocol):
    """The prune call of a :class:`~feltdb.client.protocol.WorkloadClient`."""

    def prune(self, request: PruneRequest | None = None) -> PruneReport:
        """One prune pass of the application's finished work past its age, as ``request``
        says (``None``: the default ages, :data:`~feltdb.work.pruning.PRUNE_BATCH` at most).

        Raises:
            WorkloadError: ``WORKLOAD_UNAUTHORIZED`` without ``workload:operate`` over the
                whole application; ``WORKLOAD_INVALID`` (a policy item, the limit, an
                archive asked of a server).
        """
        ...


class HttpRetention:
    """:meth:`RetentionClient.prune` over HTTP, for both HTTP clients."""

    @operation
    def prune(self, request: PruneRequest | None = None) -> Steps[PruneReport]:
        """See :meth:`RetentionClient.prune` (``POST /v1/retention/prune``)."""
        asked = request if request is not None else PruneRequest()
        if asked.archive is not None:
            raise WorkloadError(
                ErrorCode.WORKLOAD_INVALID,
                "archive: a server writes no file a caller names; archive with the store "
                "itself (--db)",
                {"fields": ["archive"]},
            )
        return PruneReport.of_json((yield from ask("POST", "/v1/retention/prune", asked.body())))


class LocalRetention:
    """:meth:`RetentionClient.prune` in process, through the client's authority."""

    acting: Authority
    clock: Callable[[], int] | None

    def prune(self, request: PruneRequest | None = None) -> PruneReport:
        """See :meth:`RetentionClient.prune`."""
        from feltdb.work.retention_authority import prune_as

        asked = request if request is not None else PruneRequest()
        policy = policy_of(asked.retain, asked.older_than, asked.definition)
        now = self.clock() if self.clock is not None else None
        return prune_as(
            self.acting, policy, now,
            limit=asked.limit, dry_run=asked.dry_run, archive=asked.archive,
        )  # fmt: skip
