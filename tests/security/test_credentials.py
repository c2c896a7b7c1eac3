"""Point 1: nothing a reader receives, and nothing stored, works as a token.

Before the fix every workload answer carried the submitter's signed grant, and
``"fgt1." + base64url(canonical JSON of it)`` was the submitter's bearer token, byte for
byte: a reader became the submitter.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from support.attack import (
    REQUESTER,
    WORKER,
    admit,
    bearer,
    claim,
    held,
    token_from_document,
)
from support.server import Server

from feltdb import SignedGrant, Subject, WorkloadError, WorkloadStore

TOKEN_PREFIX = "fgt2."
RETIRED_PREFIXES = ("fgt1.",)
PREFIXES = (TOKEN_PREFIX, *RETIRED_PREFIXES)
REDACTED = "redacted"
"""What an answer shows in place of a snapshot's signature (the README says so)."""


def snapshots(answer: Any) -> list[dict[str, Any]]:
    """Every ``authorization_snapshot`` anywhere in a JSON answer."""
    found: list[dict[str, Any]] = []
    stack = [answer]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            if isinstance(item.get("authorization_snapshot"), dict):
                found.append(item["authorization_snapshot"])
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return found


def assert_not_a_credential(http: httpx.Client, snapshot: dict[str, Any]) -> None:
    """Every way of presenting ``snapshot`` as a token is refused (401/403)."""
    for prefix in PREFIXES:
        for document in (snapshot, {**snapshot, "signature": snapshot["signature"]}):
            answer = http.get("/v1/audit", headers=bearer(token_from_document(prefix, document)))
            assert answer.status_code in (401, 403), (prefix, answer.text)


def test_no_workload_answer_carries_a_signature_or_works_as_a_token(
    http: httpx.Client, server: Server, app: str
):
    requester = server.headers(app, subject=REQUESTER)
    admitted = admit(http, requester, "read-me")
    gated = admit(http, requester, "gated", approval={"approver_kinds": ["human"]}, input={"n": 2})
    reads = {
        "admit": admitted,
        "get": http.get(f"/v1/workloads/{admitted['workload_id']}", headers=requester).json(),
        "list": http.get("/v1/workloads", headers=requester).json(),
        "approvals": http.get("/v1/approvals", headers=server.headers(app)).json(),
        "dead-letters": http.get("/v1/dead-letters", headers=server.headers(app)).json(),
    }
    assert gated["state"] == "AWAITING_APPROVAL"
    seen = [(name, s) for name, answer in reads.items() for s in snapshots(answer)]
    assert {name for name, _ in seen} == {"admit", "get"}
    # The lists answer summaries: the signed grant is not in them at all.
    assert [w["workload_id"] for w in reads["approvals"]["items"]] == [gated["workload_id"]]
    assert len(reads["list"]["items"]) == 2
    for name, snapshot in seen:
        assert snapshot["signature"] == REDACTED, name
        assert snapshot["grant"]["subject"] == {"kind": "agent", "id": "requester"}, name
        assert_not_a_credential(http, snapshot)


def test_a_worker_reading_what_it_holds_gets_no_credential(
    http: httpx.Client, server: Server, app: str
):
    workload_id, _ = held(http, server, app)
    worker = server.headers(app, subject=WORKER, capabilities=["workload:claim", "email:send"])
    answer = http.get(f"/v1/workloads/{workload_id}", headers=worker)
    assert answer.status_code == 200, answer.text
    (snapshot,) = snapshots(answer.json())
    assert snapshot["signature"] == REDACTED
    assert_not_a_credential(http, snapshot)


def test_an_agent_cannot_approve_its_own_work_with_what_it_read(
    http: httpx.Client, server: Server, app: str
):
    # A person submitted some work; an agent, which may submit and read, submitted work that
    # needs a person's approval, and reads the person's work to borrow their grant.
    person = server.headers(app, subject=Subject.human("ada"))
    theirs = admit(http, person, "theirs")
    agent = server.headers(
        app, subject=Subject.agent("reader"), capabilities=["workload:read", "workload:execute"]
    )
    gated = admit(http, agent, "gated", approval={"approver_kinds": ["human"]})
    read = http.get(f"/v1/workloads/{theirs['workload_id']}", headers=agent).json()
    (snapshot,) = snapshots(read)
    for prefix in PREFIXES:
        forged = bearer(token_from_document(prefix, snapshot))
        decided = http.post(
            f"/v1/workloads/{gated['workload_id']}/decision",
            json={"outcome": "approved", "input_hash": gated["input_hash"]},
            headers=forged,
        )
        assert decided.status_code in (401, 403), decided.text
        assert decided.json()["error"]["code"] == "WORKLOAD_UNAUTHORIZED"
    state = http.get(f"/v1/workloads/{gated['workload_id']}", headers=agent).json()["state"]
    assert state == "AWAITING_APPROVAL"


def test_nothing_stored_works_as_a_token(http: httpx.Client, server: Server, app: str):
    requester_token = server.token(app, subject=REQUESTER)
    admitted = admit(http, bearer(requester_token), "stored")
    claim(http, server.headers(app, subject=WORKER))
    # The attacker reads the database itself: the stored snapshot keeps its signature (it
    # is evidence, and the server can verify it), but it is not the token's.
    with WorkloadStore.open(server.target) as store:
        stored = store.get(admitted["workload_id"]).authorization_snapshot.to_json()
        log = store.db.committed_transactions_after(0)
    assert stored["signature"] != REDACTED
    assert stored["signature"] not in requester_token
    assert_not_a_credential(http, stored)
    # It is evidence: the keyring verifies it as such, and never as a token.
    evidence = SignedGrant.parse(stored)
    now = evidence.grant.issued_at + 1
    assert server.keyring.verify_evidence(evidence, now).id == evidence.grant.id
    with pytest.raises(WorkloadError):
        server.keyring.verify_signed(evidence, now)
    # Nor does the log hold the token.
    assert requester_token not in str([entry.model_dump(mode="json") for entry in log])


@pytest.mark.parametrize("prefix", RETIRED_PREFIXES)
def test_a_token_of_a_retired_format_is_refused_with_a_reason(
    http: httpx.Client, server: Server, app: str, prefix: str
):
    token = server.token(app)
    retired = prefix + token[len(TOKEN_PREFIX) :]
    answer = http.get("/v1/workloads", headers=bearer(retired))
    assert answer.status_code == 401
    assert "retired" in answer.json()["error"]["message"]
