"""Revoked grants: a revocation is a row of its own, scoped to a tenant's application.

A grant is a signed statement, valid until it expires; revoking one records its id, with
its tenant and application, in :data:`REVOKED_GRANTS_COLLECTION`, and every request under
it is refused from then on (the server checks each request with one keyed read).
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from typing import Any

from feltdb.auth.grants import Grant, minted_grant_id
from feltdb.errors import ErrorCode, WorkloadError
from feltdb.storage.base import Database, Mutation, Precondition, RowReader, StorageConflict
from feltdb.storage.canonical import canonical_json, sha256_hex
from feltdb.work import inputs

REVOKED_GRANTS_COLLECTION = "system_revoked_grants"
"""Where revoked grants are kept."""


def revoked_grant_key(tenant_id: str, application_id: str, grant_id: str) -> str:
    """The key of a grant's revocation in ``system_revoked_grants``: a digest of the grant
    id with its tenant and application (a JSON array, so no ids can make two coincide).
    """
    return "revoked_" + sha256_hex(canonical_json([tenant_id, application_id, grant_id]))[:32]


def revoke_grant(
    db: Database, grant_id: str, actor: str, now: int, *, tenant_id: str, application_id: str
) -> bool:
    """Revoke a grant of ``tenant_id``'s ``application_id`` at ``now``: ``True`` when this
    call revoked it, ``False`` when it already was (idempotent; the first revocation is
    kept).

    The revocation is a row keyed by the grant id *and* its tenant and application,
    committed require-absent and logged (audit kind ``grant.revoked``). Scoping it means a
    tenant can only revoke its own grants: a revocation naming another tenant's grant id
    matches no grant that tenant's server checks.

    Raises:
        WorkloadError: ``WORKLOAD_INVALID``; ``WORKLOAD_STORAGE_FAILURE``.
    """
    grant_id = inputs.identifier(grant_id, "grant_id")
    actor = inputs.actor(actor)
    tenant_id = inputs.identifier(tenant_id, "tenant_id")
    application_id = inputs.identifier(application_id, "application_id")
    key = revoked_grant_key(tenant_id, application_id, grant_id)
    if db.get_row(REVOKED_GRANTS_COLLECTION, key) is not None:
        return False
    document = {
        "grant_id": grant_id,
        "tenant_id": tenant_id,
        "application_id": application_id,
        "revoked_by": actor,
        "revoked_at": now,
    }
    operation_id = "grant_tx_" + secrets.token_hex(12)
    audit = {
        "kind": "grant.revoked",
        "subject": actor,
        "actor": actor,
        "tenant": tenant_id,
        "application": application_id,
        "grant_id": grant_id,
        "operation_id": operation_id,
        "revoked_at": now,
    }
    try:
        db.commit(
            operation_id,
            [Mutation(REVOKED_GRANTS_COLLECTION, key, document)],
            [Precondition(REVOKED_GRANTS_COLLECTION, key, require_absent=True)],
            audit,
        )
    except StorageConflict:
        # Another writer revoked it first: revoked either way.
        if db.get_row(REVOKED_GRANTS_COLLECTION, key) is None:
            raise
        return False
    return True


def refuse_unminted(grant_id: str) -> None:
    """Refuse to revoke ``grant_id`` if feltdb never minted it
    (:func:`~feltdb.auth.grants.minted_grant_id`): a revocation of a mistyped id would
    say "revoked" while the grant meant stays in force.

    Raises:
        WorkloadError: ``WORKLOAD_NOT_FOUND``.
    """
    if not minted_grant_id(grant_id):
        raise WorkloadError(
            ErrorCode.WORKLOAD_NOT_FOUND,
            f"no grant {grant_id!r} was minted by feltdb (its ids are grant_ and 24 hex"
            " digits, the last 8 a check): check the id grant issue printed; an id made by"
            " other code is revoked with force",
            {"grant_id": grant_id},
        )


def revocations(db: Database, tenant_id: str, application_id: str) -> list[dict[str, Any]]:
    """The grants revoked in ``tenant_id``'s ``application_id``, oldest first:
    ``{"grant_id", "revoked_by", "revoked_at"}`` each.

    Raises:
        WorkloadError: ``WORKLOAD_INVALID``; ``WORKLOAD_STORAGE_FAILURE``.
    """
    tenant_id = inputs.identifier(tenant_id, "tenant_id")
    application_id = inputs.identifier(application_id, "application_id")
    found = [
        {key: row.document[key] for key in ("grant_id", "revoked_by", "revoked_at")}
        for row in db.list_rows(REVOKED_GRANTS_COLLECTION)
        if row.document.get("tenant_id") == tenant_id
        and row.document.get("application_id") == application_id
    ]
    return sorted(found, key=lambda entry: (entry["revoked_at"], entry["grant_id"]))


def is_grant_revoked(db: Database, grant_id: str, *, tenant_id: str, application_id: str) -> bool:
    """Whether this grant of ``tenant_id``'s ``application_id`` was revoked: one keyed read.

    Raises:
        WorkloadError: ``WORKLOAD_STORAGE_FAILURE``.
    """
    return _revoked(db.get_row, grant_id, tenant_id, application_id)


def _revoked(read: RowReader, grant_id: str, tenant_id: str, application_id: str) -> bool:
    """Whether ``read`` finds the revocation of this grant of the tenant's application."""
    return (
        read(REVOKED_GRANTS_COLLECTION, revoked_grant_key(tenant_id, application_id, grant_id))
        is not None
    )


def grant_in_force(grant: Grant, now: int, read: RowReader) -> None:
    """Refuse what ``grant`` would do at ``now`` if it has expired or (read through
    ``read``, inside the caller's transaction) was revoked: how a commit that may come long
    after its request was verified (a long-poll's claim) checks the grant again where it
    commits.

    Raises:
        WorkloadError: ``WORKLOAD_UNAUTHORIZED``.
    """
    if now >= grant.expires_at:
        raise WorkloadError(ErrorCode.WORKLOAD_UNAUTHORIZED, "grant has expired")
    if _revoked(read, grant.id, grant.tenant_id, grant.application_id):
        raise WorkloadError(
            ErrorCode.WORKLOAD_UNAUTHORIZED, "the grant was revoked", {"grant_id": grant.id}
        )


class Revocations:
    """The revoked grants of one store (``WorkloadStore.grants``): the functions above,
    over its database, with ``now`` resolved by the store's clock.
    """

    def __init__(self, db: Database, clock: Callable[[int | None], int]) -> None:
        self._db, self._clock = db, clock

    def revoke(
        self,
        grant_id: str,
        actor: str,
        now: int | None = None,
        *,
        tenant_id: str,
        application_id: str,
    ) -> bool:
        """Revoke a grant of ``tenant_id``'s ``application_id``: from now on
        :meth:`is_revoked` answers ``True`` for it. ``True`` when this call revoked it,
        ``False`` when it already was (see :func:`revoke_grant`).
        """
        at = self._clock(now)
        return revoke_grant(
            self._db, grant_id, actor, at, tenant_id=tenant_id, application_id=application_id
        )

    def listed(self, tenant_id: str, application_id: str) -> list[dict[str, Any]]:
        """The grants revoked in ``tenant_id``'s ``application_id``, oldest first:
        ``{"grant_id", "revoked_by", "revoked_at"}`` each. Minted grants are not recorded,
        so revocations are what a store can list.
        """
        return revocations(self._db, tenant_id, application_id)

    def is_revoked(self, grant_id: str, *, tenant_id: str, application_id: str) -> bool:
        """Whether this grant of ``tenant_id``'s ``application_id`` was revoked: one keyed
        read of the store.
        """
        return is_grant_revoked(
            self._db, grant_id, tenant_id=tenant_id, application_id=application_id
        )
