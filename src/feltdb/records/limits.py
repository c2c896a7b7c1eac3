"""What the concurrency limits of an application hold now (:mod:`feltdb.work.limits_view`)."""

from __future__ import annotations

import msgspec

from feltdb.records.base import Record

__all__ = ["ConcurrencyKey", "ConcurrencyKeys"]


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
