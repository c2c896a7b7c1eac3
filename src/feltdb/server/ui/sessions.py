"""Dashboard sessions and spent sign-in links, kept in the store so that every server of a
database knows them (a session opened on one server is valid on all, and ended on all).

A session is a row of :data:`SESSIONS_COLLECTION` under the digest of its id
(:func:`feltdb.auth.sessions.session_key`), holding the grant it acts under as *evidence*
(:meth:`~feltdb.auth.tokens.Keyring.evidence`: signed in a domain no token verifies in),
its tenant, application and subject, and when it ends. So a reader of the database finds
neither a session id nor a token. Opening and ending one are logged commits (audit kinds
``ui.signed_in`` and ``ui.signed_out``).

A sign-in link's nonce, once used, is a row of :data:`SPENT_TICKETS_COLLECTION`, written
require-absent: of two servers redeeming one link at once, one commits and the other is
refused.

Both kinds of row carry their end as the index's ``deadline_at``, so
:func:`prune_expired` finds those past it in the deadline index (never a scan) and deletes
them: a session past its end, and a ticket's nonce once the ticket itself is refused.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from feltdb.auth.grants import SignedGrant
from feltdb.auth.sessions import session_key
from feltdb.errors import ErrorCode, WorkloadError
from feltdb.storage.base import Database, Mutation, Precondition, RowIndex, StorageConflict
from feltdb.storage.canonical import sha256_hex

SESSIONS_COLLECTION = "system_ui_sessions"
SPENT_TICKETS_COLLECTION = "system_ui_spent_tickets"
SESSION_LIFETIME_S = 12 * 3600
"""The longest a session lasts (less when its grant expires first): twelve hours."""
SPENT_TICKET_GRACE_S = 300
"""How long a spent ticket is kept past its end (servers' clocks may differ by as much)."""
MAX_SESSIONS_PER_GRANT = 20
"""The most sessions one grant holds open at once: its next sign-in ends its oldest."""
OPEN = "OPEN"
"""The ``state`` index column of a session row: with the grant's id as its ``definition_id``
and the grant's tenant and application, what counts a grant's sessions in one index range."""
PRUNE_PER_PASS = 500
"""The most expired rows of each kind :func:`prune_expired` deletes in one call."""


def _operation_id() -> str:
    """A fresh operation id for a commit of this module's rows."""
    return "ui_tx_" + secrets.token_hex(12)


@dataclass(frozen=True, slots=True)
class Session:
    """An open session: the grant it acts under (as evidence) and when it ends."""

    evidence: SignedGrant
    expires_at: int


def _audit(kind: str, evidence: SignedGrant, operation_id: str, at: int) -> dict[str, Any]:
    grant = evidence.grant
    return {
        "kind": kind,
        "subject": str(grant.subject),
        "actor": str(grant.subject),
        "tenant": grant.tenant_id,
        "application": grant.application_id,
        "authorization_decision_id": grant.id,
        "operation_id": operation_id,
        "at": at,
    }


def open_session(db: Database, session_id: str, evidence: SignedGrant, now: int) -> int:
    """Record a session of ``session_id`` under ``evidence`` from ``now``; when it ends:
    :data:`SESSION_LIFETIME_S` later, or when its grant expires if that is sooner.

    A grant holding :data:`MAX_SESSIONS_PER_GRANT` open sessions already has its oldest
    ended first (logged as a sign-out): a browser that lost its cookie never locks its
    grant out. (Two servers signing one grant in at the same instant may each leave one
    more open.)

    Raises:
        WorkloadError: ``WORKLOAD_STORAGE_FAILURE`` (also for a session id already used,
            which 256 random bits never are).
    """
    grant = evidence.grant
    expires_at = min(now + SESSION_LIFETIME_S, grant.expires_at)
    document = {
        "tenant_id": grant.tenant_id,
        "application_id": grant.application_id,
        "subject": str(grant.subject),
        "evidence": evidence.to_json(),
        "opened_at": now,
        "expires_at": expires_at,
    }
    _make_room(db, evidence, now)
    key = session_key(session_id)
    operation_id = _operation_id()
    index = RowIndex(
        tenant_id=grant.tenant_id, application_id=grant.application_id, state=OPEN,
        definition_id=grant.id, created_at=now, deadline_at=expires_at,
    )  # fmt: skip
    db.commit(
        operation_id,
        [Mutation(SESSIONS_COLLECTION, key, document, index)],
        [Precondition(SESSIONS_COLLECTION, key, require_absent=True)],
        _audit("ui.signed_in", evidence, operation_id, now),
    )
    return expires_at


def _make_room(db: Database, evidence: SignedGrant, now: int) -> None:
    """End the oldest of the grant's open sessions while it holds
    :data:`MAX_SESSIONS_PER_GRANT` (read from the grant's index range, oldest first;
    sessions past their end, not yet pruned, count for nothing).
    """
    grant = evidence.grant
    held = db.page_rows_in_range(
        SESSIONS_COLLECTION, grant.tenant_id, grant.application_id, OPEN,
        ("definition_id", grant.id), None,
        limit=MAX_SESSIONS_PER_GRANT + PRUNE_PER_PASS,
    )  # fmt: skip
    live = [row for row in held if int(row.document["expires_at"]) > now]
    for row in live[: max(0, len(live) - MAX_SESSIONS_PER_GRANT + 1)]:
        operation_id = _operation_id()
        try:
            db.commit(
                operation_id,
                [Mutation(SESSIONS_COLLECTION, row.key, None)],
                [Precondition(SESSIONS_COLLECTION, row.key, expected_version=row.version)],
                _audit("ui.signed_out", evidence, operation_id, now),
            )
        except StorageConflict:
            continue  # ended meanwhile


def session_of(db: Database, session_id: str, now: int) -> Session | None:
    """The session ``session_id`` names, if it is open at ``now``; ``None`` for one never
    opened, ended, or past its end. One keyed read.

    Raises:
        WorkloadError: ``WORKLOAD_STORAGE_FAILURE`` when the row is not a session's.
    """
    row = db.get_row(SESSIONS_COLLECTION, session_key(session_id))
    if row is None:
        return None
    document = row.document
    expires_at = int(document["expires_at"])
    if now >= expires_at:
        return None
    return Session(_evidence(row.key, document), expires_at)


def _evidence(key: str, document: Mapping[str, Any]) -> SignedGrant:
    """The signed grant a session row keeps as its evidence.

    Raises:
        WorkloadError: ``WORKLOAD_STORAGE_FAILURE`` when the row holds none.
    """
    try:
        return SignedGrant.parse(document.get("evidence"))
    except WorkloadError as error:
        raise WorkloadError(
            ErrorCode.WORKLOAD_STORAGE_FAILURE,
            f"the session row {SESSIONS_COLLECTION}/{key} holds no signed grant: {error.message}",
        ) from None


def end_session(db: Database, session_id: str, now: int) -> bool:
    """End the session ``session_id`` names (sign-out): ``True`` when it was open.

    Raises:
        WorkloadError: ``WORKLOAD_STORAGE_FAILURE``.
    """
    key = session_key(session_id)
    row = db.get_row(SESSIONS_COLLECTION, key)
    if row is None:
        return False
    evidence = _evidence(key, row.document)
    operation_id = _operation_id()
    try:
        db.commit(
            operation_id,
            [Mutation(SESSIONS_COLLECTION, key, None)],
            [Precondition(SESSIONS_COLLECTION, key, expected_version=row.version)],
            _audit("ui.signed_out", evidence, operation_id, now),
        )
    except StorageConflict:
        return False  # ended meanwhile (by another tab, or another server)
    return True


def spend_ticket(db: Database, nonce: str, expires_at: int, now: int) -> bool:
    """Record a sign-in link's ``nonce`` as used at ``now``: ``True`` for its first use,
    ``False`` when it was used already (by any server).

    Raises:
        WorkloadError: ``WORKLOAD_STORAGE_FAILURE``.
    """
    key = "ticket_" + sha256_hex(nonce)
    document = {"spent_at": now, "expires_at": expires_at}
    # Kept a while past the ticket's end: another server whose clock is behind still
    # accepts the ticket a little longer, and must still find it spent.
    kept_until = expires_at + SPENT_TICKET_GRACE_S
    try:
        db.commit(
            _operation_id(),
            [Mutation(SPENT_TICKETS_COLLECTION, key, document, RowIndex(deadline_at=kept_until))],
            [Precondition(SPENT_TICKETS_COLLECTION, key, require_absent=True)],
        )
    except StorageConflict:
        return False
    return True


def prune_expired(db: Database, now: int, limit: int = PRUNE_PER_PASS) -> int:
    """Delete sessions past their end and spent tickets past theirs (at most ``limit`` of
    each), read from the deadline index; how many were deleted. A row another server
    deleted first is skipped.

    Raises:
        WorkloadError: ``WORKLOAD_STORAGE_FAILURE``.
    """
    deleted = 0
    for collection in (SESSIONS_COLLECTION, SPENT_TICKETS_COLLECTION):
        for row in db.rows_due(collection, "deadline_at", now, limit=limit):
            try:
                db.commit(
                    _operation_id(),
                    [Mutation(collection, row.key, None)],
                    [Precondition(collection, row.key, expected_version=row.version)],
                )
            except StorageConflict:
                continue
            deleted += 1
    return deleted
