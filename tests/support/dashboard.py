"""The dashboard tests' seeded data and sign-in, over a real ``feltdb serve`` process.

:func:`seed` fills an application through the HTTP API, as its users would: a service
submits work, a worker completes some and fails some into the dead letters, and some
waits for a person's approval. :func:`signed_in` is an HTTP client holding a dashboard
session (its cookie), and :func:`form_token` reads a page's CSRF token.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

import httpx

from feltdb import Subject
from feltdb.client.http import Client
from support.server import WORK_CAPABILITY, Server

APPLICATION = "shop"
REQUESTER = Subject.service("shop-frontend")
WORKER = Subject.worker("w1")
APPROVER = Subject.human("ada")
SCRIPT = "<script>document.title='pwned'</script>"
"""An input value that would run if a page did not escape it."""
FORM_TOKEN = re.compile(r'name="csrf" value="([^"]+)"')


@dataclass
class Seeded:
    """What :func:`seed` made, by role."""

    succeeded: list[str] = field(default_factory=list)
    dead: list[str] = field(default_factory=list)
    held: list[str] = field(default_factory=list)
    """Awaiting approval, oldest first."""
    ready: list[str] = field(default_factory=list)
    script: str = ""
    """The READY workload whose input holds :data:`SCRIPT`."""


def client(server: Server, subject: Subject, application: str = APPLICATION, **grant) -> Client:
    return Client(server.url, server.token(application, subject=subject, **grant))


def submission(key: str, definition: str, data: object, **extra: object) -> dict[str, object]:
    body: dict[str, object] = {
        "environment": "production",
        "definition_id": definition,
        "definition_revision": "r1",
        "trigger": "manual",
        "input": data,
        "capability_snapshot": [WORK_CAPABILITY],
        "idempotency_key": key,
    }
    body.update(extra)
    return body


def hold(requester: Client, key: str, data: object) -> str:
    """Submit work that waits for a person's approval (an hour at most); its id."""
    workload, _ = requester.submit(
        submission(key, "payout", data, approval={}, timeouts={"approval_ms": 3_600_000})
    )
    return workload.workload_id


def seed(server: Server, application: str = APPLICATION) -> Seeded:
    """Fill ``application``: 3 ``send`` workloads succeeded, 2 ``report`` dead letters, 2
    ``payout`` held for approval, 2 ``report`` READY and the ``send`` of :data:`SCRIPT`.
    """
    seeded = Seeded()
    requester = client(server, REQUESTER, application)
    worker = client(server, WORKER, application)
    try:
        for n in range(3):
            requester.submit(submission(f"order-{n}", "send", {"to": f"user{n}@example.com"}))
            claim = worker.claim_next(definitions=["send"])
            assert claim is not None
            worker.start(claim.workload_id, claim.claim_id, claim.fencing_token)
            worker.complete(
                claim.workload_id, claim.claim_id, claim.fencing_token, f"r-{n}", {"sent": True}
            )
            seeded.succeeded.append(claim.workload_id)
        for n in range(2):
            requester.submit(
                submission(f"nightly-{n}", "report", {"day": n}, retry_policy={"max_attempts": 1})
            )
            claim = worker.claim_next(definitions=["report"])
            assert claim is not None
            worker.start(claim.workload_id, claim.claim_id, claim.fencing_token)
            worker.fail(
                claim.workload_id, claim.claim_id, claim.fencing_token, "permanent",
                "the mail relay refused the message", effect="none",
            )  # fmt: skip
            seeded.dead.append(claim.workload_id)
        seeded.held = [
            hold(requester, "refund-1", {"amount": 120, "to": "ada@example.com"}),
            hold(requester, "refund-2", {"amount": 9000, "to": "mallory@example.com"}),
        ]
        for n in range(2):
            workload, _ = requester.submit(submission(f"weekly-{n}", "report", {"week": n}))
            seeded.ready.append(workload.workload_id)
        workload, _ = requester.submit(submission("hostile", "send", {"note": SCRIPT}))
        seeded.script = workload.workload_id
    finally:
        requester.close()
        worker.close()
    return seeded


def form_token(html: str) -> str:
    found = FORM_TOKEN.search(html)
    assert found is not None, "no form token on the page"
    return found.group(1)


def signed_in(server: Server, token: str, **options) -> httpx.Client:
    """An HTTP client holding a dashboard session signed in with ``token``."""
    options.setdefault("follow_redirects", True)
    http = httpx.Client(base_url=server.url, timeout=10, **options)
    sign_in_page = http.get("/ui/login")
    assert sign_in_page.status_code == 200, sign_in_page.text
    answer = http.post("/ui/login", data={"csrf": form_token(sign_in_page.text), "token": token})
    # An approver's grant lands on its inbox; every other on the overview.
    assert answer.status_code == 200 and answer.url.path in ("/ui/", "/ui/approvals"), answer.text
    return http


def ids_on(html: str, ids: Iterable[str]) -> list[str]:
    """Which of ``ids`` the page names."""
    return [workload_id for workload_id in ids if workload_id in html]
