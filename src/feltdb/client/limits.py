"""The concurrency limits through a client: :meth:`LimitsClient.concurrency_keys`, over HTTP
(``GET /v1/limits/concurrency``) and in process, to the same answer
(:mod:`feltdb.work.limits_view`); and the admission quotas the client's admissions are
charged to, :meth:`LimitsClient.admission_quotas` (``GET /v1/limits/quota``,
:mod:`feltdb.work.quota_view`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol
from urllib.parse import quote

from feltdb.client.transport import Transport
from feltdb.records.limits import AdmissionQuotas, ConcurrencyKeys

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

    def set_definition_limit(self, definition_id: str, limit: int | None) -> None:
        """Set (``None``: remove) how many of ``definition_id``'s workloads admitted from now
        on hold a claim at once, when they name no concurrency key of their own (needs
        ``workload:operate`` over the whole application, unconstrained).

        Raises:
            WorkloadError: ``WORKLOAD_UNAUTHORIZED``; ``WORKLOAD_INVALID``.
        """
        ...

    def admission_quotas(self) -> AdmissionQuotas:
        """The admission quotas of the client's tenant and of its grant (those that exist):
        each one's cap and rate, its subject's unfinished work (counted up to the cap) and
        the admissions its bucket allows now (needs ``workload:execute``, or
        ``workload:read`` over the whole application). Only the store's holder sets them.

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

    def set_definition_limit(self, definition_id: str, limit: int | None) -> None:
        """See :meth:`LimitsClient.set_definition_limit`
        (``PUT /v1/limits/concurrency/definitions/{definition_id}``).
        """
        path = f"/v1/limits/concurrency/definitions/{quote(definition_id, safe='')}"
        self._ask("PUT", path, {"limit": limit})

    def admission_quotas(self) -> AdmissionQuotas:
        """See :meth:`LimitsClient.admission_quotas` (``GET /v1/limits/quota``)."""
        found: AdmissionQuotas = AdmissionQuotas.parse(self._ask("GET", "/v1/limits/quota"))
        return found


class LocalLimits:
    """:meth:`LimitsClient.concurrency_keys` in process, through the client's authority."""

    acting: Authority
    clock: Callable[[], int] | None

    def concurrency_keys(self) -> ConcurrencyKeys:
        """See :meth:`LimitsClient.concurrency_keys`."""
        from feltdb.work.limits_view import concurrency_keys_as

        return concurrency_keys_as(self.acting)

    def set_definition_limit(self, definition_id: str, limit: int | None) -> None:
        """See :meth:`LimitsClient.set_definition_limit`."""
        from feltdb.work.limits_view import set_definition_limit_as

        now = self.clock() if self.clock is not None else int(time.time())
        set_definition_limit_as(self.acting, definition_id, limit, now)

    def admission_quotas(self) -> AdmissionQuotas:
        """See :meth:`LimitsClient.admission_quotas`."""
        from feltdb.work.quota_view import admission_quotas_as

        now = self.clock() if self.clock is not None else int(time.time())
        return admission_quotas_as(self.acting, now)
