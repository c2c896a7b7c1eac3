"""What the limits of one tenant's application hold now: each concurrency key a claim took
a slot of, its limit, and the workloads holding its slots (:mod:`feltdb.work.concurrency`);
its rate limits (:mod:`feltdb.work.rate_limits`) and aging period; and, for the store's
holder, the admission quotas (:mod:`feltdb.work.quota_view`). Each set, or read, as a
caller may.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from feltdb.auth.policy import OPERATE, READ, authorize_application
from feltdb.fields import MAX_CONCURRENCY_LIMIT, MAX_RATE_PERIOD_S, MAX_RATE_STARTS
from feltdb.records.limits import (
    AdmissionQuota,
    AdmissionQuotas,
    ConcurrencyKey,
    ConcurrencyKeys,
    RateLimits,
)
from feltdb.records.workload import DURABLE_WORK_COLLECTION
from feltdb.storage.base import Database, StoredRow
from feltdb.work import inputs
from feltdb.work.authority import Authority
from feltdb.work.claim_aging import MAX_AGING_S, aging_period, set_aging
from feltdb.work.concurrency import SLOTS_COLLECTION, holders_of, live_holders
from feltdb.work.concurrency_defaults import definition_limits, set_definition_limit
from feltdb.work.quota_view import admission_quotas, quota_as_set, set_quota_checked
from feltdb.work.rate_limits import rate_limits, set_rate_limit

__all__ = [
    "MAX_KEYS_LISTED",
    "Limits",
    "aging_as",
    "concurrency_keys",
    "concurrency_keys_as",
    "rate_limits_as",
    "set_aging_as",
    "set_definition_limit_as",
    "set_rate_limit_as",
]

MAX_KEYS_LISTED: Final = 100
"""The most keys one answer lists (the first in the index's order): each lists at most its
limit of holders, whose rows are read, :data:`READ_AT_ONCE` a statement."""
READ_AT_ONCE: Final = 1000


def concurrency_keys(db: Database, tenant_id: str, application_id: str) -> ConcurrencyKeys:
    """Each concurrency key of the application a claim took a slot of, with its limit and
    its live holders (those whose rows still hold the claim they took it with), at most
    :data:`MAX_KEYS_LISTED`, by key.

    Raises:
        WorkloadError: ``WORKLOAD_STORAGE_FAILURE``.
    """
    rows = db.list_rows(
        SLOTS_COLLECTION,
        tenant_id=tenant_id,
        application_id=application_id,
        limit=MAX_KEYS_LISTED + 1,
    )
    named = {row.key: holders_of(row) for row in rows[:MAX_KEYS_LISTED]}
    holders = [holder for named_holders in named.values() for holder in named_holders]
    held: dict[str, StoredRow] = {}
    for start in range(0, len(holders), READ_AT_ONCE):
        held |= db.get_rows(DURABLE_WORK_COLLECTION, holders[start : start + READ_AT_ONCE])
    keys = []
    for row in rows[:MAX_KEYS_LISTED]:
        key, limit = row.document.get("key"), row.document.get("limit")
        if not isinstance(key, str):
            continue
        live = live_holders(named[row.key], held)
        keys.append(
            ConcurrencyKey(
                key=key, limit=limit if type(limit) is int else None, holders=sorted(live)
            )
        )
    keys.sort(key=lambda entry: entry.key)
    defaults = definition_limits(db, tenant_id, application_id)
    return ConcurrencyKeys(keys=keys, complete=len(rows) <= MAX_KEYS_LISTED, definitions=defaults)


def set_definition_limit_as(
    acting: Authority, definition_id: str, limit: int | None, now: int
) -> None:
    """Set (``None``: remove) the default concurrency limit of ``definition_id``'s new work
    in ``acting``'s application (``workload:operate`` over the whole of it, unconstrained),
    recorded as its subject's: :func:`~feltdb.work.concurrency_defaults.set_definition_limit`.

    Raises:
        WorkloadError: ``WORKLOAD_UNAUTHORIZED``; ``WORKLOAD_INVALID`` (the definition, a
            limit not 1 to 1,000); ``WORKLOAD_CONFLICT``; ``WORKLOAD_STORAGE_FAILURE``.
    """
    acting.whole_application(
        lambda grant: authorize_application(grant, OPERATE), "a definition's limit is"
    )
    scope = acting.scope
    acting.store.limits.set_definition_limit(
        scope.tenant_id, scope.application_id, definition_id, limit, actor=acting.actor, now=now
    )


def concurrency_keys_as(acting: Authority) -> ConcurrencyKeys:
    """:func:`concurrency_keys` of ``acting``'s application, to a caller that may read all
    of it (``workload:read``, unconstrained: a key's holders are any definition's work).

    Raises:
        WorkloadError: ``WORKLOAD_UNAUTHORIZED``; ``WORKLOAD_STORAGE_FAILURE``.
    """
    acting.whole_application(
        lambda grant: authorize_application(grant, READ), "the concurrency keys are"
    )
    scope = acting.scope
    return concurrency_keys(acting.store.db, scope.tenant_id, scope.application_id)


def rate_limits_as(acting: Authority) -> RateLimits:
    """The rate limits of ``acting``'s application, to a caller that may read all of it
    (``workload:read``, unconstrained: a limit counts any definition's work).

    Raises:
        WorkloadError: ``WORKLOAD_UNAUTHORIZED``; ``WORKLOAD_STORAGE_FAILURE``.
    """
    acting.whole_application(lambda grant: authorize_application(grant, READ), "rate limits are")
    scope = acting.scope
    return RateLimits(limits=rate_limits(acting.store.db, scope.tenant_id, scope.application_id))


def set_rate_limit_as(
    acting: Authority, name: str, limit: tuple[int, int] | None, now: int
) -> None:
    """Set (``None``: remove) the rate limit ``name`` of ``acting``'s application to
    ``limit`` (starts, period in seconds), needing ``workload:operate`` over the whole of
    it, unconstrained; recorded as its subject's (:meth:`Limits.set_rate_limit`).

    Raises:
        WorkloadError: ``WORKLOAD_UNAUTHORIZED``; ``WORKLOAD_INVALID``;
            ``WORKLOAD_CONFLICT``; ``WORKLOAD_STORAGE_FAILURE``.
    """
    acting.whole_application(lambda grant: authorize_application(grant, OPERATE), "a rate limit is")
    scope = acting.scope
    acting.store.limits.set_rate_limit(
        scope.tenant_id, scope.application_id, name, limit, actor=acting.actor, now=now
    )


def aging_as(acting: Authority) -> int | None:
    """The aging period of ``acting``'s application (``workload:read`` over all of it).

    Raises:
        WorkloadError: ``WORKLOAD_UNAUTHORIZED``; ``WORKLOAD_STORAGE_FAILURE``.
    """
    acting.whole_application(lambda grant: authorize_application(grant, READ), "aging is")
    scope = acting.scope
    return acting.store.limits.aging(scope.tenant_id, scope.application_id)


def set_aging_as(acting: Authority, aging_s: int | None, now: int) -> None:
    """Set (``None``: remove) the aging period of ``acting``'s application
    (``workload:operate`` over all of it, unconstrained): :meth:`Limits.set_aging`.

    Raises:
        WorkloadError: ``WORKLOAD_UNAUTHORIZED``; ``WORKLOAD_INVALID``;
            ``WORKLOAD_CONFLICT``; ``WORKLOAD_STORAGE_FAILURE``.
    """
    acting.whole_application(lambda grant: authorize_application(grant, OPERATE), "aging is")
    scope = acting.scope
    acting.store.limits.set_aging(
        scope.tenant_id, scope.application_id, aging_s, actor=acting.actor, now=now
    )


class Limits:
    """The concurrency limits of one store (``WorkloadStore.limits``), for its holder: what
    they hold in an application, and a definition's default limit set or removed; and the
    admission quotas, which only the holder sets.
    """

    def __init__(self, db: Database, clock: Callable[[int | None], int]) -> None:
        self._db = db
        self._clock = clock

    def keys(self, tenant_id: str, application_id: str) -> ConcurrencyKeys:
        """:func:`concurrency_keys` of a tenant's application.

        Raises:
            WorkloadError: ``WORKLOAD_INVALID``; ``WORKLOAD_STORAGE_FAILURE``.
        """
        tenant_id = inputs.identifier(tenant_id, "tenant_id")
        application_id = inputs.identifier(application_id, "application_id")
        return concurrency_keys(self._db, tenant_id, application_id)

    def set_definition_limit(
        self,
        tenant_id: str,
        application_id: str,
        definition_id: str,
        limit: int | None,
        *,
        actor: str,
        now: int | None = None,
    ) -> None:
        """Set (``None``: remove) ``definition_id``'s default concurrency limit in a
        tenant's application: :mod:`feltdb.work.concurrency_defaults`.

        Raises:
            WorkloadError: ``WORKLOAD_INVALID`` (a name, a limit not 1 to 1,000);
                ``WORKLOAD_CONFLICT``; ``WORKLOAD_STORAGE_FAILURE``.
        """
        tenant_id = inputs.identifier(tenant_id, "tenant_id")
        application_id = inputs.identifier(application_id, "application_id")
        definition_id = inputs.identifier(definition_id, "definition_id")
        if limit is not None:
            limit = inputs.integer(limit, "limit", 1, MAX_CONCURRENCY_LIMIT)
        set_definition_limit(
            self._db, tenant_id, application_id, definition_id, limit,
            actor=inputs.actor(actor), now=self._clock(now),
        )  # fmt: skip

    def set_quota(
        self,
        tenant_id: str,
        *,
        grant_id: str | None = None,
        max_unfinished: int | None = None,
        per_second: float | None = None,
        actor: str,
        now: int | None = None,
    ) -> None:
        """Set the admission quota of ``tenant_id`` (or of its grant ``grant_id``): at most
        ``max_unfinished`` (1 to 1,000,000) unfinished workloads, at most ``per_second``
        (0.001 to 1,000,000) admissions a second; neither removes it
        (:mod:`feltdb.work.quotas`). Another process applies it within a second.

        Raises:
            WorkloadError: ``WORKLOAD_INVALID`` (a name, a bound; past 1,000 quotas of a
                tenant); ``WORKLOAD_CONFLICT``; ``WORKLOAD_STORAGE_FAILURE``.
        """
        set_quota_checked(
            self._db, tenant_id, grant_id, max_unfinished, per_second,
            actor=actor, now=self._clock(now),
        )  # fmt: skip

    def quotas(self, tenant_id: str | None = None, *, now: int | None = None) -> AdmissionQuotas:
        """The admission quotas of ``tenant_id`` (``None``: of every tenant), at most 100,
        each with its subject's unfinished work (counted up to its cap) and its bucket.

        Raises:
            WorkloadError: ``WORKLOAD_INVALID``; ``WORKLOAD_STORAGE_FAILURE``.
        """
        if tenant_id is not None:
            tenant_id = inputs.identifier(tenant_id, "tenant_id")
        return admission_quotas(self._db, tenant_id, self._clock(now))

    def quota(
        self, tenant_id: str, grant_id: str | None = None, *, now: int | None = None
    ) -> AdmissionQuota | None:
        """The admission quota of ``tenant_id`` (or of its grant ``grant_id``) as it stands
        now, or ``None``: none is set.

        Raises:
            WorkloadError: ``WORKLOAD_INVALID``; ``WORKLOAD_STORAGE_FAILURE``.
        """
        tenant_id = inputs.identifier(tenant_id, "tenant_id")
        if grant_id is not None:
            grant_id = inputs.identifier(grant_id, "grant_id")
        return quota_as_set(self._db, tenant_id, grant_id, self._clock(now))

    def rate_limits(self, tenant_id: str, application_id: str) -> RateLimits:
        """The rate limits of a tenant's application, by name (at most 1,000).

        Raises:
            WorkloadError: ``WORKLOAD_INVALID``; ``WORKLOAD_STORAGE_FAILURE``.
        """
        tenant_id = inputs.identifier(tenant_id, "tenant_id")
        application_id = inputs.identifier(application_id, "application_id")
        return RateLimits(limits=rate_limits(self._db, tenant_id, application_id))

    def set_rate_limit(
        self,
        tenant_id: str,
        application_id: str,
        name: str,
        limit: tuple[int, int] | None,
        *,
        actor: str,
        now: int | None = None,
    ) -> None:
        """Set the rate limit ``name`` of a tenant's application to ``limit``: at most
        ``limit[0]`` starts (1 to 1,000) of its work per ``limit[1]`` seconds (1 to 86,400),
        per key; ``None`` removes it (its work then runs unlimited):
        :mod:`feltdb.work.rate_limits`.

        Raises:
            WorkloadError: ``WORKLOAD_INVALID`` (a name, starts or a period out of range);
                ``WORKLOAD_CONFLICT``; ``WORKLOAD_STORAGE_FAILURE``.
        """
        tenant_id = inputs.identifier(tenant_id, "tenant_id")
        application_id = inputs.identifier(application_id, "application_id")
        name = inputs.identifier(name, "name")
        if limit is not None:
            if not isinstance(limit, tuple | list) or len(limit) != 2:
                raise inputs.invalid("limit", "must be (starts, period_s) or None")
            limit = (
                inputs.integer(limit[0], "starts", 1, MAX_RATE_STARTS),
                inputs.integer(limit[1], "period_s", 1, MAX_RATE_PERIOD_S),
            )
        set_rate_limit(
            self._db, (tenant_id, application_id), name, limit,
            actor=inputs.actor(actor), now=self._clock(now),
        )  # fmt: skip

    def aging(self, tenant_id: str, application_id: str) -> int | None:
        """The aging period of a tenant's application, in seconds (``None``: none).

        Raises:
            WorkloadError: ``WORKLOAD_INVALID``; ``WORKLOAD_STORAGE_FAILURE``.
        """
        tenant_id = inputs.identifier(tenant_id, "tenant_id")
        application_id = inputs.identifier(application_id, "application_id")
        return aging_period(self._db, (tenant_id, application_id))

    def set_aging(
        self,
        tenant_id: str,
        application_id: str,
        aging_s: int | None,
        *,
        actor: str,
        now: int | None = None,
    ) -> None:
        """Set the aging period of a tenant's application: its ready work counts one
        priority higher at a claim for every ``aging_s`` seconds (1 to 30 days) since it
        was created; ``None`` removes it (claims follow priority alone):
        :mod:`feltdb.work.claim_aging`.

        Raises:
            WorkloadError: ``WORKLOAD_INVALID``; ``WORKLOAD_CONFLICT``;
                ``WORKLOAD_STORAGE_FAILURE``.
        """
        tenant_id = inputs.identifier(tenant_id, "tenant_id")
        application_id = inputs.identifier(application_id, "application_id")
        if aging_s is not None:
            aging_s = inputs.integer(aging_s, "aging_s", 1, MAX_AGING_S)
        set_aging(
            self._db, (tenant_id, application_id), aging_s,
            actor=inputs.actor(actor), now=self._clock(now),
        )  # fmt: skip
