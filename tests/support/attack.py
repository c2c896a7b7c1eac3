"""What the security tests share: tokens for the roles they play, and the calls they make."""

from __future__ import annotations

import base64
from typing import Any

import httpx

from feltdb import Subject
from feltdb.storage.canonical import canonical_json
from support.server import Server, submission

REQUESTER = Subject.agent("requester")
WORKER = Subject.worker("w1")


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def token_from_document(prefix: str, document: dict[str, Any]) -> str:
    """What an attacker builds from a signed grant it read: the token encoding of it."""
    raw = canonical_json(document).encode("utf-8")
    return prefix + base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def admit(http: httpx.Client, headers: dict[str, str], key: str = "one", **body: Any) -> Any:
    answer = http.post("/v1/workloads", json=submission(key, **body), headers=headers)
    assert answer.status_code == 201, answer.text
    return answer.json()


def awaiting_approval(
    http: httpx.Client, server: Server, app: str
) -> tuple[dict[str, Any], dict[str, str]]:
    """Work the requester admitted for a person's approval, and the headers of a person
    who may decide it.
    """
    gated = admit(
        http,
        server.headers(app, subject=REQUESTER),
        "gated",
        approval={"approver_kinds": ["human"]},
    )
    return gated, server.headers(app, subject=Subject.human("ops"))


def claim(http: httpx.Client, headers: dict[str, str], **body: Any) -> Any:
    answer = http.post("/v1/claims", json=body, headers=headers)
    assert answer.status_code == 200, answer.text
    return answer.json()


def fence(claimed: dict[str, Any]) -> dict[str, Any]:
    return {"claim_id": claimed["claim_id"], "fencing_token": claimed["fencing_token"]}


def held(http: httpx.Client, server: Server, app: str) -> tuple[str, dict[str, Any]]:
    """A workload admitted by the requester, claimed and started by :data:`WORKER`: its id
    and the fence the worker holds.
    """
    workload = admit(http, server.headers(app, subject=REQUESTER))
    worker = server.headers(app, subject=WORKER)
    claimed = claim(http, worker)
    assert claimed["workload_id"] == workload["workload_id"]
    started = http.post(
        f"/v1/workloads/{claimed['workload_id']}/start", json=fence(claimed), headers=worker
    )
    assert started.status_code == 204, started.text
    return claimed["workload_id"], fence(claimed)
