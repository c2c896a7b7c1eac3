"""Rate limits of one server process: how often a client, or a grant, may sign in to the
dashboard.

A sign-in opens a session in the store and writes an audit entry that is kept for good, so
one token replayed in a loop (300 sign-ins in 2.5 s, once) would grow both without bound.
Each sign-in takes a token from two buckets, the client address's and the grant's, each
holding as many sign-ins as it refills in a minute (:data:`SIGN_INS_PER_CLIENT`,
:data:`SIGN_INS_PER_GRANT`); an empty bucket refuses ``429`` with how long until it holds
one again. The buckets are this process's
(several servers each allow as much), and each kind keeps at most :data:`MAX_KEYS` keys,
the least recently used forgotten first (a forgotten key starts full again).
"""

from __future__ import annotations

import math
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final

SIGN_INS_PER_CLIENT: Final = 30
"""Sign-ins one client address may make at once, and a minute on average, by default
(``feltdb serve --sign-ins-per-client``: clients behind one proxy share its address)."""

SIGN_INS_PER_GRANT: Final = 10
"""Sign-ins one grant may make at once, and a minute on average."""

MAX_KEYS: Final = 10_000
"""Keys (addresses, grants) each limit remembers."""


class RateLimit:
    """A token bucket per key: ``burst`` tokens, refilled at ``per_minute``. Thread-safe."""

    def __init__(
        self,
        burst: int,
        per_minute: float,
        *,
        max_keys: int = MAX_KEYS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._burst, self._per_s, self._max_keys = burst, per_minute / 60, max_keys
        self._clock = clock
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._buckets)

    def take(self, key: str) -> int:
        """Take a token of ``key``'s bucket: ``0`` when there was one, else the whole
        seconds until there will be (nothing is taken then).
        """
        now = self._clock()
        with self._lock:
            tokens, at = self._buckets.pop(key, (float(self._burst), now))
            tokens = min(float(self._burst), tokens + (now - at) * self._per_s)
            wait = 0 if tokens >= 1 else max(1, math.ceil((1 - tokens) / self._per_s))
            self._buckets[key] = (tokens - 1 if wait == 0 else tokens, now)
            while len(self._buckets) > self._max_keys:
                self._buckets.popitem(last=False)
        return wait


@dataclass(frozen=True)
class SignInLimits:
    """The two limits every dashboard sign-in passes: its client address's, checked before
    anything else is done, and its grant's, once the grant is verified.
    """

    per_client: RateLimit = field(
        default_factory=lambda: RateLimit(SIGN_INS_PER_CLIENT, SIGN_INS_PER_CLIENT)
    )
    per_grant: RateLimit = field(
        default_factory=lambda: RateLimit(SIGN_INS_PER_GRANT, SIGN_INS_PER_GRANT)
    )

    @classmethod
    def allowing(cls, per_client: int) -> SignInLimits:
        """The limits with ``per_client`` sign-ins a minute (and at once) per address."""
        return cls(per_client=RateLimit(per_client, per_client))
