"""The HTTP clients' calls that read the log: the audit, over ``/v1/audit`` (both need
``audit:read``), and the workers, over ``/v1/workers`` (``workload:read``); written once
for :class:`~feltdb.client.Client` and :class:`~feltdb.client.AsyncClient`.
"""

from __future__ import annotations

from feltdb.client.calls import Steps, ask, operation
from feltdb.client.protocol import AuditPage
from feltdb.records.workers import WorkersSeen
from feltdb.storage.audit_chain import ChainReport
from feltdb.storage.base import CommittedTransaction


class HttpAudit:
    """The audit and workers calls."""

    @operation
    def workers(self) -> Steps[WorkersSeen]:
        """See :meth:`WorkloadClient.workers` (``GET /v1/workers``)."""
        found: WorkersSeen = WorkersSeen.parse((yield from ask("GET", "/v1/workers")))
        return found

    @operation
    def audit(self, *, after: int = 0, limit: int = 100) -> Steps[AuditPage]:
        """Committed transactions of the token's application after revision ``after``."""
        answer = yield from ask("GET", "/v1/audit", params={"after": after, "limit": limit})
        items = [CommittedTransaction.model_validate(item) for item in answer["items"]]
        return AuditPage(items, int(answer["next_after"]))

    @operation
    def verify_audit(self, *, anchor: str | None = None) -> Steps[ChainReport]:
        """See :meth:`WorkloadClient.verify_audit` (``GET /v1/audit/verify``)."""
        params = {} if anchor is None else {"anchor": anchor}
        answer = yield from ask("GET", "/v1/audit/verify", params=params)
        return ChainReport.model_validate(answer)
