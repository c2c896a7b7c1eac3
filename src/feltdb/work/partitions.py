"""What a claim partitions ready work by: its environment, the capabilities it needs, its
concurrency key and limit (:mod:`feltdb.work.concurrency`), its rate limit and key
(:mod:`feltdb.work.rate_limits`) and its fairness key (:mod:`feltdb.work.fairness`).

Every ready workload's index carries a *claim group* (:func:`claim_group`), a digest of
these, so the ready work of one definition that needs the same
things is one index range (:mod:`feltdb.storage.partitions`). A claim walks the groups and
reads only those whose needs the worker meets (:func:`group_accepted`): a backlog of work
nobody may take costs it one index seek per group, however large the backlog.

The digest alone does not say what the group needs, so the first row of a group seen for
the first time is read once and remembered (:data:`MAX_GROUPS_REMEMBERED`, least recently
used first out). A group label that is not a digest of this kind (``"unsorted"``: written
before groups, by a migration) is always read, and each row in it checked.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Collection
from typing import Final

import orjson

from feltdb.storage.partitions import GroupSample

GROUP_PREFIX: Final = "c1:"
"""The first characters of every group made by :func:`claim_group` (its version)."""
LIMITED_PREFIX: Final = "c1l:"
"""The first characters of the group of work under a concurrency key or a rate limit
instead: a claim tells such a group from the rest by its label alone (:func:`keyed`)."""

FAIR_PREFIX: Final = "c1f:"
"""The first characters of the group of work under a fairness key and no limit."""

MAX_GROUPS_REMEMBERED: Final = 4096
"""The most group digests a process remembers the needs of (each a few hundred bytes)."""

Concurrency = tuple[str, int] | None
"""A group's concurrency key and limit (``None``: none)."""
Rate = tuple[str, str] | None
"""A group's rate limit name and key (``""``: none; ``None``: no rate limit)."""
Needs = tuple[str, frozenset[str], Concurrency, Rate, str | None]
"""What a group's work needs of a claim: its environment and its capability set; its
concurrency key and limit; its rate limit and key; and its fairness key."""


def claim_group(
    environment: str,
    capabilities: Collection[str],
    concurrency: Concurrency = None,
    rate: Rate = None,
    fairness: str | None = None,
) -> str:
    """The claim group of work of ``environment`` needing ``capabilities`` (under the
    ``concurrency`` key and limit, the ``rate`` limit and key and the ``fairness`` key, if
    any): a prefix and the first 128 bits of a SHA-256 of them, so an index entry stays
    small whatever they are. A collision would only make a claim read a range it cannot
    take from: every candidate is still checked.
    """
    named: list[object] = [environment, sorted(capabilities)]
    if concurrency is not None:  # unlimited work keeps the groups it had
        named.append(list(concurrency))
    if rate is not None:
        named.append(["rate", *rate])
    if fairness is not None:
        named.append(["fair", fairness])
    digest = hashlib.sha256(orjson.dumps(named)).hexdigest()
    if concurrency is not None or rate is not None:
        return LIMITED_PREFIX + digest[:32]
    return (GROUP_PREFIX if fairness is None else FAIR_PREFIX) + digest[:32]


def keyed(group: str) -> bool:
    """Whether ``group``'s work may name a fairness key (by its label: no read)."""
    return group.startswith((LIMITED_PREFIX, FAIR_PREFIX))


class _Remembered:
    """Group digests and their needs, bounded, least recently used first out."""

    def __init__(self) -> None:
        self._needs: OrderedDict[str, Needs] = OrderedDict()
        self._lock = threading.Lock()

    def needs(self, group: str, sample: GroupSample) -> Needs | None:
        """``group``'s needs, read from its first row when not remembered; ``None`` when
        they cannot be known (not a digest of :func:`claim_group`'s, or no row whose own
        needs make that digest).
        """
        if not group.startswith((GROUP_PREFIX, LIMITED_PREFIX, FAIR_PREFIX)):
            return None
        with self._lock:
            known = self._needs.get(group)
            if known is not None:
                self._needs.move_to_end(group)
                return known
        row = sample()
        if row is None:
            return None
        document = row.document
        environment, capabilities = document.get("environment"), document.get("capability_snapshot")
        if not isinstance(environment, str) or not isinstance(capabilities, list):
            return None
        key, limit = document.get("concurrency_key"), document.get("concurrency_limit")
        concurrency = (key, limit) if isinstance(key, str) and type(limit) is int else None
        rate = rate_of(document.get("rate_limit"), document.get("rate_key"))
        fair = document.get("fairness_key")
        fairness = fair if isinstance(fair, str) else None
        if claim_group(environment, capabilities, concurrency, rate, fairness) != group:
            return None  # its index is stale: the choice checks it
        needs = (environment, frozenset(capabilities), concurrency, rate, fairness)
        with self._lock:
            self._needs[group] = needs
            while len(self._needs) > MAX_GROUPS_REMEMBERED:
                self._needs.popitem(last=False)
        return needs


_REMEMBERED: Final = _Remembered()


def group_accepted(
    group: str,
    sample: GroupSample,
    held: frozenset[str],
    environments: frozenset[str] | None,
) -> bool:
    """Whether a claim holding ``held`` (in ``environments``; ``None``: any) reads the
    ``group``'s range: its work needs nothing more and is of an environment it may serve,
    or its needs cannot be known without reading it.
    """
    needs = _REMEMBERED.needs(group, sample)
    if needs is None:
        return True
    environment, capabilities = needs[0], needs[1]
    return capabilities <= held and (environments is None or environment in environments)


def rate_of(name: object, key: object) -> Rate:
    """The rate limit and key a workload's fields name (``None``: no limit)."""
    if not isinstance(name, str):
        return None
    return name, key if isinstance(key, str) else ""


def group_needs(group: str, sample: GroupSample) -> Needs | None:
    """What ``group``'s work needs (its concurrency key and limit, rate limit and key and
    fairness key among them); ``None``: not known (read as :func:`group_accepted` reads it).
    """
    return _REMEMBERED.needs(group, sample)
