"""The limits through a client (:class:`LimitsClient`): concurrency keys, definitions'
default limits and rate limits, over HTTP (``/v1/limits/...``) and in process, to the same
answers (:mod:`feltdb.work.limits_view`); and the admission quotas the client's admissions
are charged to, :meth:`LimitsClient.admission_quotas` (``GET /v1/limits/quota``,
:mod:`feltdb.work.quota_view`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol
from urllib.parse import quote

from feltdb.client.calls import Steps, ask, operation, send
from feltdb.records.limits import AdmissionQuotas, ConcurrencyKeys, RateLimits

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

    def rate_limits(self) -> RateLimits:
        """The application's rate limits, by name (needs ``workload:read`` over the whole
        application, unconstrained).

        Raises:
            WorkloadError: ``WORKLOAD_UNAUTHORIZED``.
        """
        ...

    def set_rate_limit(self, name: str, limit: tuple[int, int] | None) -> None:
        """Set the rate limit ``name`` to ``limit``: at most ``limit[0]`` starts of its work
        (1 to 1,000) per ``limit[1]`` seconds (1 to 86,400), per key; ``None`` removes it
        (needs ``workload:operate`` over the whole application, unconstrained).

        Raises:
            WorkloadError: ``WORKLOAD_UNAUTHORIZED``; ``WORKLOAD_INVALID``.
        """
        ...

    def aging(self) -> int | None:
        """The application's aging period in seconds (``None``: none; needs
        ``workload:read`` over the whole application, unconstrained).

        Raises:
            WorkloadError: ``WORKLOAD_UNAUTHORIZED``.
        """
        ...

    def set_aging(self, aging_s: int | None) -> None:
        """Set (``None``: remove) the application's aging period: its ready work counts
        one priority higher at a claim for every ``aging_s`` seconds waited (needs
        ``workload:operate`` over the whole application, unconstrained).

        Raises:
            WorkloadError: ``WORKLOAD_UNAUTHORIZED``; ``WORKLOAD_INVALID``.
        """
        ...


class HttpLimits:
    """The limits calls over ``/v1/limits``, for both HTTP clients."""

    @operation
    def concurrency_keys(self) -> Steps[ConcurrencyKeys]:
        """See :meth:`LimitsClient.concurrency_keys` (``GET /v1/limits/concurrency``)."""
        found: ConcurrencyKeys = ConcurrencyKeys.parse(
            (yield from ask("GET", "/v1/limits/concurrency"))
        )
        return found

    @operation
    def set_definition_limit(self, definition_id: str, limit: int | None) -> Steps[None]:
        """See :meth:`LimitsClient.set_definition_limit`
        (``PUT /v1/limits/concurrency/definitions/{definition_id}``).
        """
        path = f"/v1/limits/concurrency/definitions/{quote(definition_id, safe='')}"
        yield from ask("PUT", path, {"limit": limit})

    @operation
    def admission_quotas(self) -> Steps[AdmissionQuotas]:
        """See :meth:`LimitsClient.admission_quotas` (``GET /v1/limits/quota``)."""
        found: AdmissionQuotas = AdmissionQuotas.parse((yield from ask("GET", "/v1/limits/quota")))
        return found

    @operation
    def rate_limits(self) -> Steps[RateLimits]:
        """See :meth:`LimitsClient.rate_limits` (``GET /v1/limits/rate``)."""
        found: RateLimits = RateLimits.parse((yield from ask("GET", "/v1/limits/rate")))
        return found

    @operation
    def set_rate_limit(self, name: str, limit: tuple[int, int] | None) -> Steps[None]:
        """See :meth:`LimitsClient.set_rate_limit` (``PUT`` or ``DELETE``
        ``/v1/limits/rate/{name}``).
        """
        path = f"/v1/limits/rate/{quote(name, safe='')}"
        if limit is None:
            yield from send("DELETE", path)  # answered 204: nothing to read
        else:
            yield from ask("PUT", path, {"starts": limit[0], "period_s": limit[1]})

    @operation
    def aging(self) -> Steps[int | None]:
        """See :meth:`LimitsClient.aging` (``GET /v1/limits/aging``)."""
        found = (yield from ask("GET", "/v1/limits/aging")).get("aging_s")
        return found if isinstance(found, int) else None

    @operation
    def set_aging(self, aging_s: int | None) -> Steps[None]:
        """See :meth:`LimitsClient.set_aging` (``PUT /v1/limits/aging``)."""
        yield from ask("PUT", "/v1/limits/aging", {"aging_s": aging_s})


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

    def rate_limits(self) -> RateLimits:
        """See :meth:`LimitsClient.rate_limits`."""
        from feltdb.work.limits_view import rate_limits_as

        return rate_limits_as(self.acting)

    def set_rate_limit(self, name: str, limit: tuple[int, int] | None) -> None:
        """See :meth:`LimitsClient.set_rate_limit`."""
        from feltdb.work.limits_view import set_rate_limit_as

        now = self.clock() if self.clock is not None else int(time.time())
        set_rate_limit_as(self.acting, name, limit, now)

    def aging(self) -> int | None:
        """See :meth:`LimitsClient.aging`."""
        from feltdb.work.limits_view import aging_as

        return aging_as(self.acting)

    def set_aging(self, aging_s: int | None) -> None:
        """See :meth:`LimitsClient.set_aging`."""
        from feltdb.work.limits_view import set_aging_as

        now = self.clock() if self.clock is not None else int(time.time())
        set_aging_as(self.acting, aging_s, now)
