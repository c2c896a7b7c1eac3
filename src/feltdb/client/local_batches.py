""":class:`~feltdb.client.LocalClient`'s batch calls: one store call each, as the client's
worker in the client's scope, answering per item what the single call answers.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable, Iterable, Sequence
from typing import TypeVar

from feltdb.auth.policy import ClaimFilter
from feltdb.auth.scope import Scope
from feltdb.client.batches import (
    CompletionLike,
    HeartbeatLike,
    completion_item,
    heartbeat_item,
)
from feltdb.client.protocol import SubmissionLike
from feltdb.errors import WorkloadError
from feltdb.records.workload import Workload, WorkloadResult
from feltdb.work import worker_authority
from feltdb.work.authority import Authority
from feltdb.work.batches import per_item
from feltdb.work.claimed import ClaimedWork, LeaseRenewal
from feltdb.work.inputs import DEFAULT_LEASE_MS
from feltdb.work.models import CreateWorkload
from feltdb.work.store import WorkloadStore

Found = TypeVar("Found")


class LocalBatches:
    """The batch calls, over the store, scope and identity of the class this is mixed
    into (:class:`~feltdb.client.LocalClient`).
    """

    store: WorkloadStore
    scope: Scope

    @property
    def worker(self) -> str:
        """The worker name the store records for this client's claims."""
        raise NotImplementedError

    def _now(self) -> int | None:
        raise NotImplementedError

    acting: Authority

    def _eligible(
        self, capabilities: Iterable[str] | None, definitions: Iterable[str] | None
    ) -> ClaimFilter:
        raise NotImplementedError

    def _request(self, submission: SubmissionLike) -> CreateWorkload:
        raise NotImplementedError

    def _waiting(self, wait_ms: int, look: Callable[[], Found]) -> Found:
        raise NotImplementedError

    def admit_many(
        self, submissions: Sequence[SubmissionLike]
    ) -> builtins.list[tuple[Workload, bool] | WorkloadError]:
        """See :meth:`WorkloadClient.admit_many`."""
        return per_item(submissions, self._request, self.store.admit_many)

    def claim_work(
        self,
        limit: int,
        *,
        lease_ms: int = DEFAULT_LEASE_MS,
        wait_ms: int = 0,
        capabilities: Iterable[str] | None = None,
        definitions: Iterable[str] | None = None,
        start: bool = True,
    ) -> builtins.list[ClaimedWork]:
        """See :meth:`WorkloadClient.claim_work`; it waits as ``claim_next`` does."""
        eligible = self._eligible(capabilities, definitions)
        return self._waiting(
            wait_ms,
            lambda: worker_authority.claim_work(
                self.acting, eligible, limit, now=self._now(), lease_ms=lease_ms, start=start
            ),
        )

    def complete_many(
        self, items: Sequence[CompletionLike]
    ) -> builtins.list[WorkloadResult | WorkloadError]:
        """See :meth:`WorkloadClient.complete_many`."""
        completions = [completion_item(item) for item in items]
        return worker_authority.complete_each(self.acting, completions, self._now())

    def renew_leases(
        self, items: Sequence[HeartbeatLike]
    ) -> builtins.list[LeaseRenewal | WorkloadError]:
        """See :meth:`WorkloadClient.renew_leases`."""
        beats = [heartbeat_item(item) for item in items]
        return worker_authority.renew_each(self.acting, beats, self._now())
