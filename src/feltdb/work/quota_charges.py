"""Admission under quotas (:mod:`feltdb.work.quotas`): each new workload of a subject with
a quota is charged to it in the admission's own commit, or refused
``WORKLOAD_QUOTA_EXCEEDED``.

An admission whose tenant, or whose grant, has a quota is committed by
:meth:`~feltdb.storage.held.HeldCommits.commit_held`: one write transaction that reads and
holds the subjects' quota rows (SQLite: the one writer's lock; PostgreSQL: ``FOR
UPDATE``), decides each item on them, and writes them again with the admissions. So two
admissions, in two processes or on two servers, never decide on the same count: the
second waits for the first and decides on what it committed. For each item, each of its
subjects' quotas in turn (the tenant's, then the grant's):

- the rate: the bucket refilled since it was last taken from (the admission's
  ``created_at``, whole seconds), and one token taken, or the item refused with the
  seconds until the next token;
- the cap: the stored count, plus one, must stay within ``max_unfinished``; when it would
  not (or the count is not trusted yet: :data:`~feltdb.work.quotas.SETTLE_S`), the
  subject's unfinished work is counted exactly, in the same transaction, stopping at the
  cap, and the items this transaction admitted already are added; still over, the item is
  refused (retry after a second). Finished work makes room only through that count.

A refused item changes nothing, and the others of a batch are decided as if it had not
been asked for. Work of a subject without a quota is not charged. A replay of work
already admitted is answered before any quota is looked at: it admits nothing.

Before the transaction, an item of a subject found full, or out of tokens, by this process
within :data:`~feltdb.work.quotas.REFUSED_FRESH_S` is refused on that: a flood of refused
admissions does not take the write lock each. Single admissions that threads of a process
make at once are committed together (:class:`QuotaGroups`, a
:class:`~feltdb.storage.group_commit.GroupCommit` writing by :func:`commit_admissions`),
one transaction holding their quotas, as other admissions share one by group commit.
"""

from __future__ import annotations

import math
import threading
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import replace
from functools import partial
from typing import Final

from feltdb.errors import ErrorCode, WorkloadError
from feltdb.records.workload import DURABLE_WORK_COLLECTION, Workload
from feltdb.storage.base import Commit, Database, Mutation, PlannedCommit, StoredRow
from feltdb.storage.group_commit import GroupCommit
from feltdb.storage.held import Counter, Decision
from feltdb.work.admission import ADMISSION_ACTOR
from feltdb.work.quotas import (
    MILLI,
    PRESENT,
    QUOTAS_COLLECTION,
    REFUSED,
    SETTLE_S,
    UNFINISHED_STATES,
    Quota,
    quota_key,
    quota_of,
)

__all__ = ["QUOTA_GROUPS", "QuotaGroups", "commit_admissions", "subjects_of"]

QUOTA_CHARGED: Final = "limits.quota_charged"
"""The audit kind of quotas' rows written alone (the admission that was to carry them lost
its guard after others of its transaction committed)."""
CAP_RETRY_AFTER_S: Final = 1
"""What a refusal by a cap says to wait: work finishes at its own pace."""


def subjects_of(db: Database, workload: Workload) -> list[str]:
    """The keys of the quotas ``workload`` is charged to: its tenant's and its grant's, of
    those that exist (as this process last read its tenant's quotas: at most
    :data:`~feltdb.work.quotas.PRESENT_TTL_S` ago).
    """
    present = PRESENT.keys(db, workload.tenant_id)
    if not present:
        return []
    grant_id = workload.authorization_snapshot.grant.id
    keys = (quota_key(workload.tenant_id), quota_key(workload.tenant_id, grant_id))
    return [key for key in keys if key in present]


def cap_refusal(quota: Quota) -> WorkloadError:
    """The refusal of an admission past ``quota``'s cap."""
    cap = quota.max_unfinished or 0
    return WorkloadError(
        ErrorCode.WORKLOAD_QUOTA_EXCEEDED,
        f"the admission quota of {quota.subject()} is {_many(cap, 'unfinished workload')} "
        "at most, and it holds that many: admit again once some finish",
        _details(quota, "max_unfinished", CAP_RETRY_AFTER_S),
    )


def rate_refusal(quota: Quota, wait_s: int) -> WorkloadError:
    """The refusal of an admission past ``quota``'s rate, a token ``wait_s`` away."""
    burst = quota.burst_milli // MILLI
    return WorkloadError(
        ErrorCode.WORKLOAD_QUOTA_EXCEEDED,
        f"the admission quota of {quota.subject()} is {quota.per_second:g} admissions a "
        f"second (bursts of {burst:,}), all taken: the next may be admitted in {wait_s} s",
        _details(quota, "per_second", wait_s),
    )


def _many(count: int, thing: str) -> str:
    return f"{count:,} {thing}" + ("" if count == 1 else "s")


def _details(quota: Quota, which: str, wait_s: int) -> dict[str, object]:
    limit = quota.max_unfinished if which == "max_unfinished" else quota.per_second
    return {
        "quota": which, "tenant_id": quota.tenant_id, "grant_id": quota.grant_id,
        which: limit, "retry_after_s": max(1, wait_s),
    }  # fmt: skip


class Charges:
    """The quotas one admission transaction holds, as its items charge them."""

    def __init__(self, db: Database, held: Mapping[str, StoredRow | None], count: Counter):
        self._db = db
        self._quotas = {key: quota_of(row) for key, row in held.items()}
        self._count = count
        self._charged: dict[str, Quota] = {}
        self._pending: dict[str, int] = {}

    def charge(self, workload: Workload, keys: Sequence[str]) -> None:
        """Charge ``workload`` to the quotas of ``keys``, all or none.

        Raises:
            WorkloadError: ``WORKLOAD_QUOTA_EXCEEDED``, and nothing is charged.
        """
        charged: dict[str, Quota] = {}
        for key in keys:
            quota = self._charged.get(key) or self._quotas.get(key)
            if quota is not None:
                charged[key] = self._charged_to(quota, workload, key)
        self._charged.update(charged)
        for key in charged:
            self._pending[key] = self._pending.get(key, 0) + 1

    def _charged_to(self, quota: Quota, workload: Workload, key: str) -> Quota:
        now = workload.created_at
        rate = quota.per_second_milli
        if rate is not None:
            tokens = quota.tokens_at(now)
            if tokens < MILLI:
                wait = max(1, math.ceil((MILLI - tokens) / rate))
                if key not in self._charged:  # remembered only of the bucket as committed
                    REFUSED.note(self._db, quota, now + wait)
                raise rate_refusal(quota, wait)
            last = quota.refilled_at if quota.refilled_at is not None else now
            quota = replace(quota, tokens_milli=tokens - MILLI, refilled_at=max(last, now))
        cap = quota.max_unfinished
        if cap is None:
            return quota
        count, counted_at = quota.count, quota.counted_at
        if (
            count is None
            or counted_at is None
            or counted_at < quota.set_at + SETTLE_S  # counted before others saw the quota
            or count + 1 > cap
        ):
            grant_id = quota.grant_id
            application = workload.application_id if grant_id is not None else None
            unfinished = self._count(
                workload.tenant_id, UNFINISHED_STATES, cap, grant_id, application
            )
            count, counted_at = unfinished + self._pending.get(key, 0), now
            if count + 1 > cap:
                if unfinished >= cap:  # full as committed, not only by this transaction's
                    REFUSED.note(self._db, quota)
                raise cap_refusal(quota)
        application_id = quota.application_id
        if quota.grant_id is not None:
            application_id = workload.application_id
        return replace(quota, count=count + 1, counted_at=counted_at, application_id=application_id)

    def writes(self) -> list[Mutation]:
        """The charged quotas' rows, to write with the admissions."""
        return [quota.mutation() for quota in self._charged.values()]


def _remembered_refusal(
    db: Database, workload: Workload, keys: Sequence[str]
) -> WorkloadError | None:
    """The refusal this process found lately for one of ``keys`` and that still holds."""
    now = workload.created_at
    for key in keys:
        found = REFUSED.fresh(db, workload.tenant_id, key, now)
        if found is not None:
            quota, until = found
            return cap_refusal(quota) if until is None else rate_refusal(quota, until - now)
    return None


def commit_admissions(
    db: Database,
    plans: Sequence[PlannedCommit],
    limited: Mapping[str, tuple[Workload, Sequence[str]]],
    *,
    whole: bool = False,
) -> list[Commit | WorkloadError]:
    """Commit the admissions ``plans`` in one transaction holding the quotas of
    ``limited`` (by workload id, each new workload of a subject with a quota and the keys
    of its quotas): each plan's commit, its lost guard, or its refusal, in order. With
    ``whole``, one refused item refuses every item (a workflow's nodes), in the first
    refusal's words.

    Raises:
        WorkloadError: ``WORKLOAD_STORAGE_FAILURE``; ``WORKLOAD_INVALID`` for a plan the
            store refuses.
    """
    early: list[WorkloadError | None] = []
    for plan in plans:
        entry = limited.get(plan.mutations[0].key)
        early.append(None if entry is None else _remembered_refusal(db, *entry))
    first = next((refusal for refusal in early if refusal is not None), None)
    if first is not None and (whole or all(refusal is not None for refusal in early)):
        return [first if whole else refusal or first for refusal in early]
    keys = sorted({key for _, subject_keys in limited.values() for key in subject_keys})

    def decide(held: Mapping[str, StoredRow | None], count: Counter) -> Decision:
        charges = Charges(db, held, count)
        items: list[PlannedCommit | WorkloadError] = []
        for plan, refused in zip(plans, early, strict=True):
            entry = limited.get(plan.mutations[0].key)
            if refused is not None or entry is None:
                items.append(plan if refused is None else refused)
                continue
            try:
                charges.charge(*entry)
            except WorkloadError as refusal:
                items.append(refusal)
                continue
            items.append(plan)
        denied = [item for item in items if isinstance(item, WorkloadError)]
        if whole and denied:
            return Decision([denied[0]] * len(items))
        audit = {"kind": QUOTA_CHARGED, "actor": ADMISSION_ACTOR, "quotas": keys}
        return Decision(items, charges.writes(), audit)

    return db.commit_held(QUOTAS_COLLECTION, keys, DURABLE_WORK_COLLECTION, decide)


class QuotaGroups:
    """Per store, the group commit of single admissions charged to quotas: the plans that
    threads commit at one moment, written by one :func:`commit_admissions` (bounded: one
    group per store, forgotten with it).
    """

    def __init__(self) -> None:
        self._groups: weakref.WeakKeyDictionary[Database, GroupCommit] = weakref.WeakKeyDictionary()
        self._charged: dict[str, list[tuple[Workload, Sequence[str]]]] = {}
        """What each waiting plan is charged to, by workload id (a list: two threads may
        admit one id at once, and each must find its own charge)."""
        self._lock = threading.Lock()

    def commit(
        self, db: Database, plan: PlannedCommit, workload: Workload, keys: Sequence[str]
    ) -> None:
        """Commit the admission ``plan`` of ``workload``, charged to the quotas of ``keys``,
        with the single admissions other threads commit at the same moment.

        Raises:
            WorkloadError: ``WORKLOAD_QUOTA_EXCEEDED``; ``StorageConflict``: its guard was
                lost (another writer admitted it); ``WORKLOAD_STORAGE_FAILURE``.
        """
        with self._lock:
            group = self._groups.get(db)
            if group is None:
                group = GroupCommit(db, commit_many=partial(self._write, db))
                self._groups[db] = group
            charge = (workload, keys)
            self._charged.setdefault(workload.workload_id, []).append(charge)
        try:
            group.commit(plan)
        finally:
            with self._lock:
                charges = self._charged[workload.workload_id]
                charges.remove(charge)
                if not charges:
                    del self._charged[workload.workload_id]

    def _write(self, db: Database, plans: list[PlannedCommit]) -> list[Commit | WorkloadError]:
        with self._lock:
            limited = {
                key: self._charged[key][0]
                for key in (plan.mutations[0].key for plan in plans)
                if key in self._charged
            }
        return commit_admissions(db, plans, limited)


QUOTA_GROUPS: Final = QuotaGroups()
