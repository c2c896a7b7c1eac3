""":class:`~feltdb.client.LocalClient`'s batch calls: one store call each, as the client's
worker in the client's scope, answering per item what the single call answers.
"""

from __future__ import annotations

import builtins
from collections.abc import Iterable, Sequence

from feltdb.auth.scope import Scope
from feltdb.client.batches import (
    CompletionLike,
    HeartbeatLike,
    completion_item,
    heartbeat_item,
)
from feltdb.client.protocol import SubmissionLike
from feltdb.errors import WorkloadError
from feltdb.work.batches import Completion, Heartbeat, per_item
from feltdb.work.inputs import DEFAULT_LEASE_MS
from feltdb.work.models import CreateWorkload, Workload, WorkloadClaim, WorkloadResult
from feltdb.work.store import WorkloadStore


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

    def _held(self, asked: Iterable[str] | None) -> frozenset[str]:
        raise NotImplementedError

    def _served(self, asked: Iterable[str] | None) -> frozenset[str] | None:
        raise NotImplementedError

    def _request(self, submission: SubmissionLike) -> CreateWorkload:
        raise NotImplementedError

    def admit_many(
        self, submissions: Sequence[SubmissionLike]
    ) -> builtins.list[tuple[Workload, bool] | WorkloadError]:
        """See :meth:`WorkloadClient.admit_many`."""
        return per_item(submissions, self._request, self.store.admit_many)

    def claim_many(
        self,
        limit: int,
        *,
        lease_ms: int = DEFAULT_LEASE_MS,
        capabilities: Iterable[str] | None = None,
        definitions: Iterable[str] | None = None,
        start: bool = False,
    ) -> builtins.list[WorkloadClaim]:
        """See :meth:`WorkloadClient.claim_many`."""
        return self.store.claim_many(
            self.scope.tenant_id, self.scope.application_id, self.worker,
            self._held(capabilities), limit, self._now(), lease_ms,
            definitions=self._served(definitions),
            environments=self.scope.environments or None, start=start,
        )  # fmt: skip

    def complete_many(
        self, items: Sequence[CompletionLike]
    ) -> builtins.list[WorkloadResult | WorkloadError]:
        """See :meth:`WorkloadClient.complete_many`."""
        completions = [
            Completion(i.workload_id, i.claim_id, self.worker, i.fencing_token, i.result_id,
                       i.output, i.artifacts, i.schema_version)
            for i in map(completion_item, items)
        ]  # fmt: skip
        return self.store.complete_many(completions, self._now(), scope=self.scope)

    def heartbeat_many(
        self, items: Sequence[HeartbeatLike]
    ) -> builtins.list[WorkloadClaim | WorkloadError]:
        """See :meth:`WorkloadClient.heartbeat_many`."""
        beats = [
            Heartbeat(i.workload_id, i.claim_id, self.worker, i.fencing_token, i.extend_ms)
            for i in map(heartbeat_item, items)
        ]
        return self.store.heartbeat_many(beats, self._now(), scope=self.scope)
