"""The concurrency limits through a client: :meth:`LimitsClient.concurrency_keys`, over HTTP
(``GET /v1/limits/concurrency``) and in process, to the same answer
(:mod:`feltdb.work.limits_view`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from feltdb.client.transport import Transport
from feltdb.records.limits import ConcurrencyKeys

if TYPE_CHECKING:  # the HTTP client never acts in process: the authority is the local one's
    from feltdb.work.authority import Authority

__all__ = ["HttpLimits", "LimitsClient", "LocalLimits"]


class LimitsClient(Protocol):
    """The limits calls of a :class:`~feltdb.client.protocol.WorkloadClient`."""

    def concurrency_keys(self) -> ConcurrencyKeys:
        """Each concurrency key of the application a claim took a slot of: its limit and
        the workloads holding its slots now (needs ``workload:read`` over the whole
        application, unconstrained).

        Raises:
            WorkloadError: ``WORKLOAD_UNAUTHORIZED``.
        """
        ...


class HttpLimits(Transport):
    """:meth:`LimitsClient.concurrency_keys` over the transport of the class this is mixed
    into.
    """

    def concurrency_keys(self) -> ConcurrencyKeys:
        """See :meth:`LimitsClient.concurrency_keys` (``GET /v1/limits/concurrency``)."""
        found: ConcurrencyKeys = ConcurrencyKeys.parse(self._ask("GET", "/v1/limits/concurrency"))
        return found


class LocalLimits:
    """:meth:`LimitsClient.concurrency_keys` in process, through the client's authority."""

    acting: Authority

    def concurrency_keys(self) -> ConcurrencyKeys:
        """See :meth:`LimitsClient.concurrency_keys`."""
        from feltdb.work.limits_view import concurrency_keys_as

        return concurrency_keys_as(self.acting)
