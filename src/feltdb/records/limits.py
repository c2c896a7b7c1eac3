"""What the limits of an application hold now: its concurrency keys
(:mod:`feltdb.work.limits_view`), its rate limits (:mod:`feltdb.work.rate_limits`), and the
admission quotas (:mod:`feltdb.work.quota_view`).
"""

from __future__ import annotations

import msgspec

from feltdb.records.base import Record

__all__ = [
    "AdmissionQuota",
    "AdmissionQuotas",
    "ConcurrencyKey",
    "ConcurrencyKeys",
    "RateLimit",
    "RateLimits",
]


class ConcurrencyKey(Record, frozen=True, kw_only=True):  # type: ignore[misc]
    """One concurrency key: its limit (as the last claim of it named it), and the ids of
    the workloads holding its slots now.
    """

    key: str
    limit: int | None
    holders: list[str] = msgspec.field(default_factory=list)


class ConcurrencyKeys(Record, frozen=True, kw_only=True):  # type: ignore[misc]
    """The keys of one application a claim took a slot of, by key; ``complete``: every one
    (``False``: more than an answer lists); ``definitions``: the default limit of each
    definition that has one (:mod:`feltdb.work.concurrency_defaults`).
    """

    keys: list[ConcurrencyKey] = msgspec.field(default_factory=list)
    complete: bool = True
    definitions: dict[str, int] = msgspec.field(default_factory=dict)


class AdmissionQuota(Record, frozen=True, kw_only=True):  # type: ignore[misc]
    """One admission quota (:mod:`feltdb.work.quotas`): its subject (a tenant, or one grant
    of it), its cap and rate, who set it when, and what it holds now: the subject's
    unfinished work, counted up to the cap (``None`` without a cap), and the admissions its
    bucket allows now (``None`` without a rate).
    """

    tenant_id: str
    grant_id: str | None = None
    max_unfinished: int | None = None
    per_second: float | None = None
    unfinished: int | None = None
    tokens: float | None = None
    set_by: str = ""
    set_at: int = 0


class AdmissionQuotas(Record, frozen=True, kw_only=True):  # type: ignore[misc]
    """Admission quotas, by tenant then grant (a tenant's own first); ``complete``: every
    one asked for (``False``: more than an answer lists).
    """

    quotas: list[AdmissionQuota] = msgspec.field(default_factory=list)
    complete: bool = True


class RateLimit(Record, frozen=True, kw_only=True):  # type: ignore[misc]
    """A named rate limit: at most ``starts`` starts of its work per ``period_s`` seconds,
    per key (:mod:`feltdb.work.rate_limits`).
    """

    name: str
    starts: int
    period_s: int


class RateLimits(Record, frozen=True, kw_only=True):  # type: ignore[misc]
    """The rate limits of one application, by name (at most 1,000)."""

    limits: list[RateLimit] = msgspec.field(default_factory=list)
