""":class:`~feltdb.client.Client`'s calls that read the log: the audit, over ``/v1/audit``
(both need ``audit:read``), and the workers, over ``/v1/workers`` (``workload:read``).
"""

from __future__ import annotations

from feltdb.client.protocol import AuditPage
from feltdb.client.transport import Transport
from feltdb.records.workers import WorkersSeen
from feltdb.storage.audit_chain import ChainReport
from feltdb.storage.base import CommittedTransaction


class HttpAudit(Transport):
    """The audit and workers calls, over the transport of the class this is mixed into."""

    def workers(self) -> WorkersSeen:
        """See :meth:`WorkloadClient.workers` (``GET /v1/workers``)."""
        found: WorkersSeen = WorkersSeen.parse(self._ask("GET", "/v1/workers"))
        return found

    def audit(self, *, after: int = 0, limit: int = 100) -> AuditPage:
        """Committed transactions of the token's application after revision ``after``."""
        answer = self._ask("GET", "/v1/audit", params={"after": after, "limit": limit})
        items = [CommittedTransaction.model_validate(item) for item in answer["items"]]
        return AuditPage(items, int(answer["next_after"]))

    def verify_audit(self, *, anchor: str | None = None) -> ChainReport:
        """See :meth:`WorkloadClient.verify_audit` (``GET /v1/audit/verify``)."""
        params = {} if anchor is None else {"anchor": anchor}
        return ChainReport.model_validate(self._ask("GET", "/v1/audit/verify", params=params))
