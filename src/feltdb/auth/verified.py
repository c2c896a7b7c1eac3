"""A server's verified tokens, remembered briefly: the revocation bound.

Verifying a bearer token costs a decode, an HMAC over the grant's canonical JSON and one
keyed read of the revocations; a server answering a worker's requests would pay that on
every one. :class:`VerifiedTokens` remembers, for at most :data:`REVOCATION_BOUND_S`
seconds, what the full check answered for a token, so a caller's requests in quick
succession are checked once.

What it guarantees:

- **Revocation takes effect within** :data:`REVOCATION_BOUND_S` **(1 s).** An entry is
  served only while its revocation read is less than the bound old (by a monotonic
  clock, timed from *before* that read), so a revocation committed by any process, any
  server or the store directly refuses every request made a bound after it commits. A
  revocation through this server (:meth:`VerifiedTokens.forget_grant`, called once the
  revocation commits) takes effect at once: it drops the grant's entries, and a check
  that began before it (:meth:`VerifiedTokens.begin`) may not store its answer.
- **Validity is checked on every request.** A hit is served only while the request's
  clock is inside the grant's validity window (``issued_at <= now < expires_at``);
  otherwise the entry is dropped and the full check refuses the token exactly as it
  would have without the cache.
- **Only the exact token hits.** Entries are keyed by the SHA-256 of the token's bytes: a
  token differing in any byte is another key, verified in full. Only tokens that
  verified, and were not revoked, are stored.
- **Bounded.** At most :data:`MAX_ENTRIES` entries (least recently used dropped first),
  and tokens longer than :data:`MAX_CACHED_TOKEN_CHARS` are never stored, so the memory
  it holds is bounded whatever callers send.

It is thread-safe (one lock around an ordered dict): the event loop reads it, and the
revoke route, on a worker thread, invalidates it.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from feltdb.auth.grants import Grant

REVOCATION_BOUND_S = 1.0
"""How long a verified token's revocation check is trusted, in seconds: a revocation made
elsewhere (another server, the command line on the store) is in force on this server at
most this long after it commits."""

MAX_ENTRIES = 10_000
"""The most tokens remembered at once; beyond it the least recently used is dropped."""

MAX_CACHED_TOKEN_CHARS = 16_384
"""Longer tokens (up to the 64 KiB a token may be) are verified on every request, never
remembered: the entries' memory stays bounded by ``MAX_ENTRIES`` small grants."""

V = TypeVar("V")


def token_key(token: str) -> bytes:
    """The key of ``token``'s entry: the SHA-256 of its bytes (a lone surrogate, which no
    valid token holds, encoded as is rather than refused).
    """
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).digest()


@dataclass(frozen=True, slots=True)
class _Entry(Generic[V]):
    grant: Grant
    value: V
    checked_at: float
    """The monotonic time from before the revocation read this entry rests on."""


@dataclass(frozen=True, slots=True)
class Check:
    """A full check in progress (:meth:`VerifiedTokens.begin`): when it started, and the
    invalidation epoch it started in.
    """

    started_at: float
    epoch: int


class VerifiedTokens(Generic[V]):
    """Tokens that verified and were not revoked, each with what the server made of it
    (``V``: for the server, its ``Caller``), for at most ``bound_s`` seconds.

    Use: ``hit = cache.get(token, now)``; on a miss, ``check = cache.begin()`` *before*
    reading the revocations, verify in full, then ``cache.put(token, grant, value,
    check)``. After a revocation commits, ``cache.forget_grant(...)``.
    """

    def __init__(
        self,
        *,
        bound_s: float = REVOCATION_BOUND_S,
        max_entries: int = MAX_ENTRIES,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        """An empty cache trusting a check for ``bound_s`` seconds of ``monotonic``,
        holding at most ``max_entries`` tokens.

        Raises:
            ValueError: a negative bound or fewer than one entry.
        """
        if bound_s < 0 or max_entries < 1:
            raise ValueError("a verified-token cache needs bound_s >= 0 and max_entries >= 1")
        self.bound_s = bound_s
        self.max_entries = max_entries
        self._monotonic = monotonic
        self._entries: OrderedDict[bytes, _Entry[V]] = OrderedDict()
        self._epoch = 0
        self._lock = threading.Lock()

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    def get(self, token: str, now: int) -> V | None:
        """What the full check made of ``token``, if it passed less than the bound ago and
        ``now`` (the request's clock, unix seconds) is inside its grant's validity;
        ``None`` otherwise (a stale or no longer valid entry is dropped).
        """
        if len(token) > MAX_CACHED_TOKEN_CHARS:
            return None
        key = token_key(token)
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                return None
            fresh = self._monotonic() - entry.checked_at < self.bound_s
            grant = entry.grant
            if not fresh or not grant.issued_at <= now < grant.expires_at:
                del self._entries[key]
                return None
            self._entries.move_to_end(key)
            return entry.value

    def begin(self) -> Check:
        """Mark the start of a full check: call it before reading the revocations."""
        with self._lock:
            return Check(self._monotonic(), self._epoch)

    def put(self, token: str, grant: Grant, value: V, check: Check) -> None:
        """Remember that ``token`` verified as ``grant`` (the server's ``value`` of it),
        unrevoked as of ``check`` (:meth:`begin`). Nothing is stored when a revocation
        through this server (:meth:`forget_grant`) happened since ``check`` began, or the
        token is longer than :data:`MAX_CACHED_TOKEN_CHARS`.
        """
        if len(token) > MAX_CACHED_TOKEN_CHARS:
            return
        key = token_key(token)
        with self._lock:
            if check.epoch != self._epoch:
                return
            self._entries[key] = _Entry(grant, value, check.started_at)
            self._entries.move_to_end(key)
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)

    def forget_grant(self, grant_id: str, *, tenant_id: str, application_id: str) -> None:
        """Drop every entry of this grant of ``tenant_id``'s ``application_id`` (it was
        just revoked), and keep any check already under way from storing its answer.
        """
        with self._lock:
            self._epoch += 1
            doomed = [
                key
                for key, entry in self._entries.items()
                if entry.grant.id == grant_id
                and entry.grant.tenant_id == tenant_id
                and entry.grant.application_id == application_id
            ]
            for key in doomed:
                del self._entries[key]

    def clear(self) -> None:
        """Forget every entry (and keep checks under way from storing theirs)."""
        with self._lock:
            self._epoch += 1
            self._entries.clear()
