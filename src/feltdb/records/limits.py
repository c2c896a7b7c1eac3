"""What the limits of an application hold now: its concurrency keys
(:mod:`feltdb.work.limits_view`) and its rate limits (:mod:`feltdb.work.rate_limits`).
"""

from __future__ import annotations

import msgspec

from feltdb.records.base import Record

__all__ = ["ConcurrencyKey", "ConcurrencyKeys", "RateLimit", "RateLimits"]


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
