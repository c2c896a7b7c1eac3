"""Admission quotas: how much work a tenant, or one grant of a tenant, may hold unfinished,
and how fast it may admit more (issue 27, point 4: one tenant's flood must not fill the
store that others share).

A quota names a *subject*: a tenant (all its applications), or a grant of a tenant (the
work admitted under that grant: its ``authorization_snapshot``). It has a cap,
``max_unfinished`` (1 to :data:`MAX_UNFINISHED`: work not in a terminal state, so a dead
letter counts until an operator retries or cancels it), a rate, ``per_second`` (a token
bucket whose burst is the rate rounded up), or both. Each quota is one row of
:data:`QUOTAS_COLLECTION`, set by the store's holder alone (:func:`set_quota`; a tenant may
not raise its own), and written again by each admission it counts, in the admission's own
commit (:mod:`feltdb.work.quota_charges`).

The row's ``count`` is what admissions have added since the last exact count: finishing
work does not touch it, so it only ever counts too much. When it would pass the cap, the
admission counts the subject's unfinished work exactly (a bounded statement, stopping at
the cap: :meth:`~feltdb.storage.counts.IndexCounts.count_in_states`) and stores that.

This module holds what a process remembers of quotas, each bounded: which tenants have
any (:class:`_Present`, trusted :data:`PRESENT_TTL_S`: work of a tenant without a quota
pays one dictionary lookup an admission, and a read a second per process), and which
subjects an admission lately found full or out of tokens (:class:`_Refused`, trusted
:data:`REFUSED_FRESH_S`: a flood of refused admissions does not open a transaction each;
it may refuse that much too long, never admit too many).
"""

from __future__ import annotations

import math
import threading
import time
import weakref
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Final

from feltdb.storage.base import (
    Database,
    Mutation,
    RowIndex,
    StoredRow,
)
from feltdb.work import inputs
from feltdb.work.settings import Remembered, write_setting
from feltdb.work.states import TERMINAL_STATES, WorkloadState

__all__ = [
    "MAX_QUOTAS_PER_TENANT",
    "MAX_UNFINISHED",
    "QUOTAS_COLLECTION",
    "UNFINISHED_STATES",
    "Quota",
    "quota_key",
    "quota_of",
    "quota_rows",
    "set_quota",
]

QUOTAS_COLLECTION: Final = "system_admission_quotas"
QUOTA_SET: Final = "limits.quota_set"
"""The audit kind of a change of a quota."""
MAX_UNFINISHED: Final = 1_000_000
"""The largest cap: an exact count stops there, so a recount reads at most this many
index entries."""
MIN_PER_SECOND: Final = 0.001
MAX_PER_SECOND: Final = 1_000_000
"""A rate is 0.001 (one admission in 1,000 s) to 1,000,000 admissions a second, kept in
thousandths (the bucket counts thousandths of a token: every number is an integer)."""
MILLI: Final = 1000
MAX_QUOTAS_PER_TENANT: Final = 1000
"""The most quotas of one tenant: its own and its grants'. An admission reads them all
once a second per process."""
UNFINISHED_STATES: Final = tuple(
    sorted(state.value for state in WorkloadState if state not in TERMINAL_STATES)
)
"""Every state but the terminal ones (succeeded, cancelled, rejected)."""
SETTLE_S: Final = 5
"""How long after a quota is set its count is not trusted: another process may admit
without it for up to :data:`PRESENT_TTL_S`, so until then every admission counts exactly."""


@dataclass(frozen=True, slots=True)
class Quota:
    """One quota as its row holds it: the rule (subject, cap, rate) and its state (the
    count and the bucket), at the row's version.
    """

    tenant_id: str
    grant_id: str | None
    max_unfinished: int | None
    per_second_milli: int | None
    """The rate in thousandths of an admission a second."""
    set_by: str
    set_at: int
    version: int
    count: int | None = None
    """At least the subject's unfinished work (``None``: not known: count it)."""
    counted_at: int | None = None
    """When the exact count ``count`` grew from was made."""
    tokens_milli: int | None = None
    refilled_at: int | None = None
    application_id: str | None = None
    """A grant's application (a grant is of one), once an admission under it told it."""

    @property
    def per_second(self) -> float | None:
        """The rate, admissions a second."""
        return None if self.per_second_milli is None else self.per_second_milli / MILLI

    @property
    def burst_milli(self) -> int:
        """The bucket's size: the rate rounded up, in thousandths (0 without a rate)."""
        rate = self.per_second_milli or 0
        return math.ceil(rate / MILLI) * MILLI

    def tokens_at(self, now: int) -> int:
        """The bucket at ``now`` (thousandths of a token): full when never taken from; time
        before the last refill adds nothing.
        """
        rate = self.per_second_milli
        if rate is None:
            return 0
        if self.tokens_milli is None or self.refilled_at is None:
            return self.burst_milli
        elapsed = max(0, now - self.refilled_at)
        return min(self.burst_milli, self.tokens_milli + elapsed * rate)

    def subject(self) -> str:
        """The subject, as messages name it."""
        if self.grant_id is None:
            return f"tenant {self.tenant_id!r}"
        return f"grant {self.grant_id!r} of tenant {self.tenant_id!r}"

    def document(self) -> dict[str, Any]:
        """The row's document."""
        return {
            "tenant_id": self.tenant_id, "grant_id": self.grant_id,
            "max_unfinished": self.max_unfinished, "per_second_milli": self.per_second_milli,
            "set_by": self.set_by, "set_at": self.set_at, "count": self.count,
            "counted_at": self.counted_at, "tokens_milli": self.tokens_milli,
            "refilled_at": self.refilled_at, "application_id": self.application_id,
        }  # fmt: skip

    def mutation(self) -> Mutation:
        """The write of this quota's row (indexed by its tenant, so a tenant's are listed)."""
        key = quota_key(self.tenant_id, self.grant_id)
        return Mutation(QUOTAS_COLLECTION, key, self.document(), RowIndex(tenant_id=self.tenant_id))


def quota_key(tenant_id: str, grant_id: str | None = None) -> str:
    """The row key of a tenant's quota, or of one of its grants' (each part length-prefixed:
    names may hold any character, and a tenant's keys share its prefix).
    """
    tenant = f"{len(tenant_id)}:{tenant_id}/"
    return tenant if grant_id is None else f"{tenant}{len(grant_id)}:{grant_id}"


def _integer(document: dict[str, Any], name: str) -> int | None:
    value = document.get(name)
    return value if type(value) is int else None


def _text(document: dict[str, Any], name: str) -> str | None:
    value = document.get(name)
    return value if isinstance(value, str) else None


def quota_of(row: StoredRow | None) -> Quota | None:
    """The quota a row holds (``None``: no row, or one not of this shape)."""
    if row is None:
        return None
    document = row.document
    tenant_id = _text(document, "tenant_id")
    cap, rate = _integer(document, "max_unfinished"), _integer(document, "per_second_milli")
    if tenant_id is None or (cap is None and rate is None):
        return None
    return Quota(
        tenant_id=tenant_id, grant_id=_text(document, "grant_id"), max_unfinished=cap,
        per_second_milli=rate, set_by=_text(document, "set_by") or "",
        set_at=_integer(document, "set_at") or 0, version=row.version,
        count=_integer(document, "count"), counted_at=_integer(document, "counted_at"),
        tokens_milli=_integer(document, "tokens_milli"),
        refilled_at=_integer(document, "refilled_at"),
        application_id=_text(document, "application_id"),
    )  # fmt: skip


def rate_milli(per_second: Any) -> int:
    """``per_second`` (a number, :data:`MIN_PER_SECOND` to :data:`MAX_PER_SECOND`) in
    thousandths.

    Raises:
        WorkloadError: ``WORKLOAD_INVALID`` naming ``per_second``.
    """
    if isinstance(per_second, bool) or not isinstance(per_second, int | float):
        raise inputs.invalid("per_second", "must be a number")
    if not MIN_PER_SECOND <= per_second <= MAX_PER_SECOND:
        raise inputs.invalid(
            "per_second", f"must be from {MIN_PER_SECOND} to {MAX_PER_SECOND:,} a second"
        )
    return max(1, round(per_second * MILLI))


def set_quota(
    db: Database,
    tenant_id: str,
    grant_id: str | None,
    max_unfinished: int | None,
    per_second_milli: int | None,
    *,
    actor: str,
    now: int,
) -> None:
    """Set the quota of a tenant (``grant_id`` ``None``) or of one of its grants, in one
    audited commit; neither a cap nor a rate removes it. Its count starts unknown (the
    next admission counts exactly) and its bucket full.

    Raises:
        WorkloadError: ``WORKLOAD_INVALID`` past :data:`MAX_QUOTAS_PER_TENANT`;
            ``WORKLOAD_CONFLICT`` if it was changed meanwhile; ``WORKLOAD_STORAGE_FAILURE``.
    """
    key = quota_key(tenant_id, grant_id)
    row = db.get_row(QUOTAS_COLLECTION, key)
    removing = max_unfinished is None and per_second_milli is None
    if removing and row is None:
        return  # nothing to remove
    if row is None:
        held = db.list_rows(QUOTAS_COLLECTION, tenant_id=tenant_id, limit=MAX_QUOTAS_PER_TENANT)
        if len(held) >= MAX_QUOTAS_PER_TENANT:
            raise inputs.invalid(
                "tenant_id", f"a tenant has at most {MAX_QUOTAS_PER_TENANT:,} quotas"
            )
    quota = Quota(
        tenant_id=tenant_id, grant_id=grant_id, max_unfinished=max_unfinished,
        per_second_milli=per_second_milli, set_by=actor, set_at=now, version=0,
    )  # fmt: skip
    mutation = (
        Mutation(QUOTAS_COLLECTION, key, None, RowIndex(tenant_id=tenant_id))
        if removing
        else quota.mutation()
    )
    audit = {
        "kind": QUOTA_SET, "actor": actor, "tenant": tenant_id, "grant_id": grant_id,
        "max_unfinished": max_unfinished, "per_second": quota.per_second, "at": now,
    }  # fmt: skip
    try:
        write_setting(db, row, mutation, audit, f"the quota of {quota.subject()}")
    finally:
        PRESENT.forget(db, tenant_id)
        REFUSED.forget_tenant(db, tenant_id)


def quota_rows(db: Database, tenant_id: str | None, limit: int) -> list[Quota]:
    """The quotas of a tenant (``None``: of every tenant), at most ``limit``, by tenant
    then grant (a tenant's own first).
    """
    rows = db.list_rows(QUOTAS_COLLECTION, tenant_id=tenant_id, limit=limit)
    found = [quota for quota in map(quota_of, rows) if quota is not None]
    return sorted(found, key=lambda q: (q.tenant_id, q.grant_id is not None, q.grant_id or ""))


PRESENT_TTL_S: Final = 1.0
"""How long a process trusts what it read of a tenant's quotas: one set (or removed) by
another process applies to this one's admissions within this long (this one's at once)."""
MEMORY: Final = 4096
"""The most tenants (:class:`_Present`) and subjects (:class:`_Refused`) a process
remembers per store; past it, the oldest are forgotten."""
REFUSED_FRESH_S: Final = 0.25
"""How long an admission trusts that a subject it found full (or out of tokens) still is:
the room another process's finished work makes is seen that much later at most."""


class _Present:
    """The keys of each tenant's quotas, per store, read at most once a
    :data:`PRESENT_TTL_S` (:class:`~feltdb.work.settings.Remembered`).
    """

    def __init__(self) -> None:
        self._remembered: Remembered[str, frozenset[str]] = Remembered(PRESENT_TTL_S, MEMORY)

    def keys(self, db: Database, tenant_id: str) -> frozenset[str]:
        def read() -> frozenset[str]:
            rows = db.list_rows(QUOTAS_COLLECTION, tenant_id=tenant_id, limit=MAX_QUOTAS_PER_TENANT)
            return frozenset(row.key for row in rows)

        return self._remembered.value(db, tenant_id, read)

    def forget(self, db: Database, tenant_id: str) -> None:
        self._remembered.forget(db, tenant_id)


Refusal = tuple["Quota", int | None]
"""What an admission found of a subject: its quota, and the instant its bucket has a token
again (``None``: it was found full)."""


class _Refused:
    """Subjects an admission found full, or out of tokens until an instant, lately, per
    store and tenant (bounded, oldest tenant out; forgotten with their store).
    """

    def __init__(self) -> None:
        self._stores: weakref.WeakKeyDictionary[
            Database, OrderedDict[str, dict[str, tuple[float, Refusal]]]
        ] = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()

    def note(self, db: Database, quota: Quota, until: int | None = None) -> None:
        """``quota``'s subject was found full (``until`` ``None``), or out of tokens until
        the instant ``until``.
        """
        key = quota_key(quota.tenant_id, quota.grant_id)
        with self._lock:
            tenants = self._stores.setdefault(db, OrderedDict())
            tenants.setdefault(quota.tenant_id, {})[key] = (time.monotonic(), (quota, until))
            tenants.move_to_end(quota.tenant_id)
            while len(tenants) > MEMORY:
                tenants.popitem(last=False)

    def fresh(self, db: Database, tenant_id: str, key: str, now: int) -> Refusal | None:
        """What was found of ``key`` within :data:`REFUSED_FRESH_S`, if it still holds at
        ``now`` (a bucket found empty has no token until its instant).
        """
        with self._lock:
            hit = self._stores.get(db, OrderedDict()).get(tenant_id, {}).get(key)
        if hit is None or time.monotonic() - hit[0] >= REFUSED_FRESH_S:
            return None
        until = hit[1][1]
        return hit[1] if until is None or now < until else None

    def forget_tenant(self, db: Database, tenant_id: str) -> None:
        """Forget every subject of ``tenant_id`` (its work finished here, or its quotas
        changed).
        """
        with self._lock:
            tenants = self._stores.get(db)
            if tenants:
                tenants.pop(tenant_id, None)


PRESENT: Final = _Present()
REFUSED: Final = _Refused()


def finished(db: Database, tenant_id: str) -> None:
    """Work of ``tenant_id`` was committed in a terminal state in this process: a subject
    this process found full may have room now (checked again at its next admission).
    """
    REFUSED.forget_tenant(db, tenant_id)
