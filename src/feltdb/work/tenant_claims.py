"""Claims that serve several tenants' applications in turn (``store.tenants``): a worker
that runs the work of many tenants takes from each in turn, weighted, so one tenant's
backlog of a million never starves another's ten.

Each claim of :meth:`TenantClaims.claim_many` picks the next application by smooth
weighted round robin (each application's weight added to its credit, the one with the
most credit chosen and its credit lowered by the sum of the weights: over any run of
picks, each application is picked in proportion to its weight, spread out rather than in
bursts) and claims one workload of it, as ``store.claim_work`` claims (limits, fairness
keys and aging apply within it). An application with nothing to claim is passed over for
the rest of the call. The credits are kept per process for each list of applications
(:data:`MAX_ROTATIONS` lists), so successive calls go on where the last stopped.

It is the embedded store's: over HTTP a credential is one tenant's application, and a
worker serving several holds one credential, and one client, each.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Final

from feltdb.work import inputs
from feltdb.work.claimed import Claims

if TYPE_CHECKING:
    from feltdb.work.store import WorkloadStore

__all__ = ["MAX_SCOPES", "MAX_WEIGHT", "TenantClaims"]

MAX_SCOPES: Final = 1000
"""The most applications one call serves."""
MAX_WEIGHT: Final = 1000
MAX_ROTATIONS: Final = 1024
"""The most lists of applications a process keeps the credits of (least recently used out)."""

Scopes = tuple[tuple[str, str], ...]


class _Credits:
    """The smooth weighted round robin's credits, per list of applications and weights."""

    def __init__(self) -> None:
        # By a hash of the list and its weights, not the list itself: a key stays small
        # (two lists sharing a hash would share credits: fairness, not safety, is at stake).
        self._credits: OrderedDict[int, list[int]] = OrderedDict()
        self._lock = threading.Lock()

    def pick(self, scopes: Scopes, weights: tuple[int, ...], passed: set[int]) -> int:
        """The index of the next application (none of ``passed``) to claim from."""
        with self._lock:
            key = hash((scopes, weights))
            credits = self._credits.pop(key, None)
            if credits is None or len(credits) != len(scopes):
                credits = [0] * len(scopes)
            self._credits[key] = credits
            while len(self._credits) > MAX_ROTATIONS:
                self._credits.popitem(last=False)
            open_ = [n for n in range(len(scopes)) if n not in passed]
            for n in open_:
                credits[n] += weights[n]
            chosen = max(open_, key=lambda n: (credits[n], -n))
            credits[chosen] -= sum(weights[n] for n in open_)
            return chosen


_CREDITS: Final = _Credits()


class TenantClaims:
    """Claims across several tenants' applications of one store (``store.tenants``)."""

    def __init__(self, store: WorkloadStore, clock: Callable[[int | None], int]) -> None:
        self._store = store
        self._clock = clock

    def claim_many(
        self,
        scopes: Sequence[tuple[str, str]],
        worker: str,
        capabilities: Iterable[str],
        limit: int,
        now: int | None = None,
        lease_ms: int = inputs.DEFAULT_LEASE_MS,
        *,
        weights: Sequence[int] | None = None,
        definitions: Iterable[str] | None = None,
        environments: Iterable[str] | None = None,
        start: bool = True,
    ) -> Claims:
        """Up to ``limit`` claims (1 to the batch bound) from the ``scopes`` ((tenant,
        application) pairs, 1 to 1,000, no two alike), one at a time, each from the next
        application in weighted turn (``weights``: 1 to 1,000 each, by default all 1), as
        ``store.claim_work`` claims (started unless ``start=False``). Fewer, or none, when
        fewer are claimable; ``next_start_s`` as ``claim_work`` answers it, the soonest of
        the applications'.

        Raises:
            WorkloadError: ``WORKLOAD_INVALID`` (scopes, weights, or as ``claim_work``).
        """
        named, given = _checked(scopes, weights)
        wanted = inputs.integer(limit, "limit", 1, inputs.MAX_BATCH_ITEMS)
        # Read once here: each application's claim is given the same (an iterator is not).
        capabilities = inputs.capabilities(capabilities)
        definitions = _read_once(definitions, "definitions")
        environments = _read_once(environments, "environments")
        now = self._clock(now)
        claimed, passed = Claims(), set[int]()
        while len(claimed) < wanted and len(passed) < len(named):
            chosen = _CREDITS.pick(named, given, passed)
            found = self._store.claim_work(
                *named[chosen], worker, capabilities, 1, now, lease_ms,
                definitions=definitions, environments=environments, start=start,
            )  # fmt: skip
            claimed.extend(found)
            if not found:
                passed.add(chosen)
                wait, soonest = found.next_start_s, claimed.next_start_s
                if wait is not None and (soonest is None or wait < soonest):
                    claimed.next_start_s = wait
        return claimed


def _checked(
    scopes: Sequence[tuple[str, str]], weights: Sequence[int] | None
) -> tuple[Scopes, tuple[int, ...]]:
    """The scopes and weights given, checked."""
    if isinstance(scopes, str | bytes) or not isinstance(scopes, Sequence):
        raise inputs.invalid("scopes", "must be a list of (tenant_id, application_id) pairs")
    if not 1 <= len(scopes) <= MAX_SCOPES:
        raise inputs.invalid("scopes", f"must name 1 to {MAX_SCOPES} applications")
    named: list[tuple[str, str]] = []
    for scope in scopes:
        if not isinstance(scope, tuple | list) or len(scope) != 2:
            raise inputs.invalid("scopes", "each must be a (tenant_id, application_id) pair")
        named.append(
            (
                inputs.identifier(scope[0], "tenant_id"),
                inputs.identifier(scope[1], "application_id"),
            )
        )
    if len(set(named)) != len(named):
        raise inputs.invalid("scopes", "name an application once")
    if weights is None:
        return tuple(named), (1,) * len(named)
    if not isinstance(weights, Sequence) or isinstance(weights, str | bytes):
        raise inputs.invalid("weights", "must be a list of integers")
    if len(weights) != len(named):
        raise inputs.invalid("weights", "must give one weight for each of scopes")
    return tuple(named), tuple(inputs.integer(w, "weights", 1, MAX_WEIGHT) for w in weights)


def _read_once(values: Iterable[str] | None, field: str) -> frozenset[str] | None:
    return None if values is None else frozenset(inputs.identifiers(values, field))
