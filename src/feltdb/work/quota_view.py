"""What the admission quotas are and hold now (:mod:`feltdb.work.quotas`): listed for the
store's holder (``store.limits.quotas``, ``feltdb limits quota --db``), who alone sets
them, and shown to a caller for its own tenant and grant (``GET /v1/limits/quota``).
"""

from __future__ import annotations

from typing import Final

from feltdb.auth.capabilities import SUBMIT
from feltdb.auth.grants import Grant
from feltdb.auth.policy import READ, authorize_application
from feltdb.errors import WorkloadError
from feltdb.records.limits import AdmissionQuota, AdmissionQuotas
from feltdb.records.workload import DURABLE_WORK_COLLECTION
from feltdb.storage.base import Database
from feltdb.work import inputs
from feltdb.work.authority import Authority
from feltdb.work.quotas import (
    MAX_UNFINISHED,
    MILLI,
    QUOTAS_COLLECTION,
    UNFINISHED_STATES,
    Quota,
    quota_key,
    quota_of,
    quota_rows,
    rate_milli,
    set_quota,
)

__all__ = [
    "MAX_QUOTAS_LISTED",
    "admission_quotas",
    "admission_quotas_as",
    "quota_as_set",
    "quota_now",
    "set_quota_checked",
]

MAX_QUOTAS_LISTED: Final = 100
"""The most quotas one answer lists (each counts its subject's unfinished work, up to its
cap)."""


def quota_now(db: Database, quota: Quota, now: int) -> AdmissionQuota:
    """``quota`` as it stands at ``now``: its subject's unfinished work counted (up to its
    cap, so one statement reads at most :data:`~feltdb.work.quotas.MAX_UNFINISHED` index
    entries) and its bucket refilled to ``now``.
    """
    cap = quota.max_unfinished
    unfinished = None
    if cap is not None:
        unfinished = db.count_in_states(
            DURABLE_WORK_COLLECTION, quota.tenant_id, UNFINISHED_STATES, cap,
            grant_id=quota.grant_id, application_id=quota.application_id,
        )  # fmt: skip
    tokens = None if quota.per_second_milli is None else quota.tokens_at(now) / MILLI
    return AdmissionQuota(
        tenant_id=quota.tenant_id, grant_id=quota.grant_id, max_unfinished=cap,
        per_second=quota.per_second, unfinished=unfinished, tokens=tokens,
        set_by=quota.set_by, set_at=quota.set_at,
    )  # fmt: skip


def admission_quotas(db: Database, tenant_id: str | None, now: int) -> AdmissionQuotas:
    """The quotas of ``tenant_id`` (``None``: of every tenant), at most
    :data:`MAX_QUOTAS_LISTED`, each as it stands at ``now``.

    Raises:
        WorkloadError: ``WORKLOAD_STORAGE_FAILURE``.
    """
    found = quota_rows(db, tenant_id, MAX_QUOTAS_LISTED + 1)
    listed = [quota_now(db, quota, now) for quota in found[:MAX_QUOTAS_LISTED]]
    return AdmissionQuotas(quotas=listed, complete=len(found) <= MAX_QUOTAS_LISTED)


def quota_as_set(
    db: Database, tenant_id: str, grant_id: str | None, now: int
) -> AdmissionQuota | None:
    """The quota of ``tenant_id`` (or of its grant ``grant_id``) as it stands at ``now``;
    ``None``: none is set.
    """
    quota = quota_of(db.get_row(QUOTAS_COLLECTION, quota_key(tenant_id, grant_id)))
    return None if quota is None else quota_now(db, quota, now)


def admission_quotas_as(acting: Authority, now: int) -> AdmissionQuotas:
    """The quotas ``acting``'s admissions are charged to, as they stand at ``now``: its
    tenant's, and its grant's (those that exist), to a caller that may submit work into,
    or read, every workload of its application, unnarrowed (as the other limits' views:
    a grant over other resources, or narrowed to some of the work, is refused).

    Raises:
        WorkloadError: ``WORKLOAD_UNAUTHORIZED``; ``WORKLOAD_STORAGE_FAILURE``.
    """

    def submits_or_reads(grant: Grant) -> None:
        try:
            authorize_application(grant, SUBMIT)
        except WorkloadError:
            authorize_application(grant, READ)

    acting.whole_application(submits_or_reads, "the quotas are")
    db, tenant_id = acting.store.db, acting.scope.tenant_id
    grants = [None] if acting.grant is None else [None, acting.grant.id]
    found = [quota_as_set(db, tenant_id, grant_id, now) for grant_id in grants]
    return AdmissionQuotas(quotas=[quota for quota in found if quota is not None])


def set_quota_checked(
    db: Database,
    tenant_id: str,
    grant_id: str | None,
    max_unfinished: int | None,
    per_second: float | None,
    *,
    actor: str,
    now: int,
) -> None:
    """:func:`~feltdb.work.quotas.set_quota`, its arguments checked first.

    Raises:
        WorkloadError: ``WORKLOAD_INVALID`` (a name; a cap not 1 to 1,000,000; a rate not
            0.001 to 1,000,000; past 1,000 quotas of a tenant); ``WORKLOAD_CONFLICT``;
            ``WORKLOAD_STORAGE_FAILURE``.
    """
    tenant_id = inputs.identifier(tenant_id, "tenant_id")
    if grant_id is not None:
        grant_id = inputs.identifier(grant_id, "grant_id")
    if max_unfinished is not None:
        max_unfinished = inputs.integer(max_unfinished, "max_unfinished", 1, MAX_UNFINISHED)
    rate = None if per_second is None else rate_milli(per_second)
    set_quota(db, tenant_id, grant_id, max_unfinished, rate, actor=inputs.actor(actor), now=now)
