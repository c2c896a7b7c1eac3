"""Dashboard sessions and spent sign-in tickets as rows of the store (feltdb.server.ui.sessions):
what is kept (evidence, never a token or a session id), when they end, and their pruning."""

from __future__ import annotations

import pytest

from feltdb import Subject, WorkloadError, WorkloadStore
from feltdb.auth.policy import application_grant
from feltdb.auth.sessions import new_session_id, session_key
from feltdb.auth.tokens import Keyring
from feltdb.server.ui import sessions
from feltdb.server.ui.sessions import (
    SESSION_LIFETIME_S,
    SESSIONS_COLLECTION,
    SPENT_TICKETS_COLLECTION,
)
from feltdb.storage import Mutation, Precondition

NOW = 1_800_000_000
RING = Keyring({"k1": bytes([7] * 32)}, "k1")


def evidence(lifetime: int = 86_400):
    grant = application_grant(
        Subject.human("ada"), "t", "app", {"workload:read"}, issued_at=NOW - 1,
        expires_at=NOW + lifetime,
    )  # fmt: skip
    return RING.evidence(grant)


def test_a_session_is_kept_under_a_digest_with_its_grant_as_evidence(store: WorkloadStore) -> None:
    session_id, signed = new_session_id(), evidence()
    ends = sessions.open_session(store.db, session_id, signed, NOW)
    assert ends == NOW + SESSION_LIFETIME_S
    row = store.db.get_row(SESSIONS_COLLECTION, session_key(session_id))
    assert row is not None
    text = str(row.document)
    assert session_id not in text and "fgt2." not in text
    opened = sessions.session_of(store.db, session_id, NOW + 5)
    assert opened is not None and opened.evidence == signed and opened.expires_at == ends
    # The evidence verifies as evidence, never as a token.
    assert RING.verify_evidence(opened.evidence, NOW).subject == Subject.human("ada")
    [entry] = store.db.committed_transactions_after(0)
    assert entry.audit is not None and entry.audit["kind"] == "ui.signed_in"
    assert entry.audit["actor"] == "human:ada" and session_id not in str(entry.model_dump())


def test_a_session_ends_by_its_end_its_grants_or_signing_out(store: WorkloadStore) -> None:
    session_id = new_session_id()
    sessions.open_session(store.db, session_id, evidence(), NOW)
    assert sessions.session_of(store.db, session_id, NOW + SESSION_LIFETIME_S) is None
    short = new_session_id()
    assert sessions.open_session(store.db, short, evidence(lifetime=60), NOW) == NOW + 60
    assert sessions.session_of(store.db, short, NOW + 60) is None
    assert sessions.session_of(store.db, new_session_id(), NOW) is None  # never opened
    assert sessions.end_session(store.db, session_id, NOW) is True
    assert sessions.session_of(store.db, session_id, NOW) is None
    assert sessions.end_session(store.db, session_id, NOW) is False  # ended already


def test_a_ticket_is_spent_once(store: WorkloadStore) -> None:
    assert sessions.spend_ticket(store.db, "a" * 32, NOW + 600, NOW) is True
    assert sessions.spend_ticket(store.db, "a" * 32, NOW + 600, NOW + 1) is False
    assert sessions.spend_ticket(store.db, "b" * 32, NOW + 600, NOW) is True


def test_pruning_deletes_only_what_has_ended(store: WorkloadStore) -> None:
    lasting, short = new_session_id(), new_session_id()
    sessions.open_session(store.db, lasting, evidence(), NOW)
    sessions.open_session(store.db, short, evidence(lifetime=60), NOW)
    sessions.spend_ticket(store.db, "c" * 32, NOW + 600, NOW)
    assert sessions.prune_expired(store.db, NOW + 59) == 0
    assert sessions.prune_expired(store.db, NOW + 60) == 1
    assert store.db.get_row(SESSIONS_COLLECTION, session_key(short)) is None
    assert sessions.session_of(store.db, lasting, NOW + 60) is not None
    assert sessions.prune_expired(store.db, NOW + 600) == 0  # kept past its end: clocks differ
    assert sessions.prune_expired(store.db, NOW + 900) == 1  # the ticket, refused everywhere by now
    assert store.db.list_rows(SPENT_TICKETS_COLLECTION) == []
    assert sessions.prune_expired(store.db, NOW + 900) == 0


def test_a_session_row_that_holds_no_signed_grant_is_a_storage_failure(
    store: WorkloadStore,
) -> None:
    session_id = new_session_id()
    sessions.open_session(store.db, session_id, evidence(), NOW)
    key = session_key(session_id)
    row = store.db.get_row(SESSIONS_COLLECTION, key)
    assert row is not None
    damaged = {**row.document, "evidence": {"grant": "?"}}
    damaged.pop("__version", None)
    guard = Precondition(SESSIONS_COLLECTION, key, expected_version=row.version)
    store.db.commit("damage", [Mutation(SESSIONS_COLLECTION, key, damaged)], [guard])
    for read in (
        lambda: sessions.session_of(store.db, session_id, NOW + 5),
        lambda: sessions.end_session(store.db, session_id, NOW + 5),
    ):
        with pytest.raises(WorkloadError) as raised:
            read()
        assert raised.value.code == "WORKLOAD_STORAGE_FAILURE"
        assert "signed grant" in raised.value.message
