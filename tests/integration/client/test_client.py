"""``feltdb.client.Client`` against a real server process: the store's operations over HTTP,
answered with the library's records, refused with the server's codes.
"""

from __future__ import annotations

import http.server
import pickle
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from support.server import WORK_CAPABILITY, Server, free_port, submission

from feltdb import (
    ApprovalOutcome,
    Subject,
    Workload,
    WorkloadClaim,
    WorkloadError,
    WorkloadRetryPolicy,
    WorkloadState,
)
from feltdb.auth.policy import APPROVE, AUDIT, CANCEL, CLAIM, OPERATE, READ, REVOKE, SUBMIT
from feltdb.client import Client, ClientError, Page

REQUESTER = {"subject": Subject.agent("a1"), "capabilities": [SUBMIT, READ, CANCEL]}
WORKER = {"subject": Subject.worker("w1"), "capabilities": [CLAIM, WORK_CAPABILITY]}


@contextmanager
def client(server: Server, app: str, **grant: Any) -> Iterator[Client]:
    with Client(server.url, server.token(app, **grant), timeout=15.0) as felt:
        yield felt


def test_a_workload_runs_its_whole_lifecycle_through_the_client(server: Server, app: str):
    with client(server, app, **REQUESTER) as requester, client(server, app, **WORKER) as worker:
        workload, created = requester.admit(**submission())
        assert created is True
        assert isinstance(workload, Workload)
        assert workload.state is WorkloadState.READY
        assert workload.requested_by == Subject.agent("a1")
        assert (workload.tenant_id, workload.application_id) == ("t", app)

        replay, created_again = requester.admit(**submission())
        assert (replay.workload_id, created_again) == (workload.workload_id, False)
        assert requester.create(**submission()).workload_id == workload.workload_id

        claim = worker.claim_next(lease_ms=60_000)
        assert isinstance(claim, WorkloadClaim)
        assert (claim.workload_id, claim.worker_id) == (workload.workload_id, "worker:w1")
        wid, fence = workload.workload_id, (claim.claim_id, claim.fencing_token)

        worker.start(wid, *fence)
        assert worker.heartbeat(wid, *fence, extend_ms=60_000).claim_id == claim.claim_id
        assert worker.checkpoint(wid, *fence, {"n": 1}).sequence == 1
        context = worker.execution_context(wid, *fence)
        assert context.input == submission()["input"]
        assert [c.state for c in context.checkpoints] == [{"n": 1}]
        result = worker.complete(wid, *fence, f"result-{app}", {"sent": True})
        assert result.output == {"sent": True}
        again = worker.complete(wid, *fence, f"result-{app}", {"sent": True})
        assert again == result  # a lost answer, resent: the recorded result

        read = requester.get(wid)
        assert read.state is WorkloadState.SUCCEEDED
        assert read.result is not None and read.result.result_id == f"result-{app}"


def test_refusals_come_back_as_workload_errors_with_the_servers_code(server: Server, app: str):
    with client(server, app, **REQUESTER) as requester, client(server, app, **WORKER) as worker:
        with pytest.raises(WorkloadError) as missing:
            requester.get("no-such-workload")
        assert missing.value.code == "WORKLOAD_NOT_FOUND"
        assert isinstance(missing.value, ClientError) and missing.value.status == 404
        assert missing.value.details == {"workload_id": "no-such-workload"}

        wid = requester.create(**submission()).workload_id
        claim = worker.claim_next()
        assert claim is not None
        with pytest.raises(WorkloadError) as stale:
            worker.start(wid, claim.claim_id, claim.fencing_token + 1)
        assert (stale.value.code, stale.value.status) == ("WORKLOAD_STALE_FENCE", 409)

        with pytest.raises(WorkloadError) as reused:
            requester.admit(**submission(input={"to": "bob@example.com"}))
        assert reused.value.code == "IDEMPOTENCY_KEY_REUSED"

        # A submission the model refuses is refused before it is sent (no status)...
        with pytest.raises(ClientError) as invalid:
            requester.admit(**submission(key="two", priority=10**20))
        assert (invalid.value.code, invalid.value.status) == ("WORKLOAD_INVALID", None)
        assert "priority" in invalid.value.message
        # ...one only the authority can judge is the server's 422.
        with pytest.raises(ClientError) as unseen:
            requester.admit(**submission(key="three", dependencies=[{"workload_id": "nope"}]))
        assert (unseen.value.code, unseen.value.status) == ("WORKLOAD_INVALID", 422)

        # The requester's grant holds no workload:claim.
        with pytest.raises(WorkloadError) as denied:
            requester.claim_next()
        assert (denied.value.code, denied.value.status) == ("WORKLOAD_UNAUTHORIZED", 403)

    with Client(server.url, "not-a-token") as stranger, pytest.raises(ClientError) as unknown:
        stranger.get("anything")
    assert (unknown.value.code, unknown.value.status) == ("WORKLOAD_UNAUTHORIZED", 401)


def test_work_not_yet_eligible_is_refused_with_retry_after(server: Server, app: str):
    with client(server, app, **REQUESTER) as requester, client(server, app, **WORKER) as worker:
        later = requester.create(**submission(not_before=4_000_000_000))
        with pytest.raises(ClientError) as early:
            worker.claim(later.workload_id)
    assert (early.value.code, early.value.status) == ("WORKLOAD_NOT_YET_ELIGIBLE", 425)
    assert early.value.retry_after is not None and early.value.retry_after > 0


def test_a_client_error_survives_pickling(server: Server, app: str):
    with client(server, app, **REQUESTER) as requester, pytest.raises(ClientError) as missing:
        requester.get("gone")
    copy = pickle.loads(pickle.dumps(missing.value))
    assert isinstance(copy, ClientError)
    assert (copy.code, copy.message, copy.details, copy.status) == (
        missing.value.code,
        missing.value.message,
        missing.value.details,
        404,
    )


def test_an_unreachable_server_is_a_storage_failure_naming_the_url():
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    with Client(url, "token", timeout=5.0) as felt, pytest.raises(ClientError) as down:
        felt.get("w")
    assert down.value.code == "WORKLOAD_STORAGE_FAILURE"
    assert down.value.status is None
    # Nothing was sent: the refusal says the server cannot be reached (details mark it).
    assert down.value.details == {"url": f"{url}/v1/workloads/w", "unreachable": True}
    assert down.value.message.startswith(f"cannot reach the feltdb server at {url}:")


@contextmanager
def proxy_page() -> Iterator[str]:
    """A real HTTP endpoint that answers every request ``200`` with an HTML page, as a
    misconfigured proxy in front of the server would.
    """

    class Page(http.server.BaseHTTPRequestHandler):
        def _answer(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            body = b"<html>gateway</html>"
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = _answer

        def log_message(self, *args: Any) -> None:
            pass

    with http.server.ThreadingHTTPServer(("127.0.0.1", 0), Page) as httpd:
        thread = threading.Thread(target=httpd.serve_forever, daemon=True)
        thread.start()
        try:
            yield f"http://127.0.0.1:{httpd.server_address[1]}"
        finally:
            httpd.shutdown()


def test_a_success_answer_that_is_not_a_json_object_is_a_storage_failure():
    with proxy_page() as url, Client(url, "token", timeout=5.0) as felt:
        calls = {
            "/v1/workloads": lambda: felt.admit(**submission("k")),
            "/v1/claims": lambda: felt.claim_next(),
            "/v1/workloads/w": lambda: felt.get("w"),
        }
        for path, call in calls.items():
            with pytest.raises(ClientError) as odd:
                call()
            assert odd.value.code == "WORKLOAD_STORAGE_FAILURE", path
            assert odd.value.status == 200
            assert odd.value.details == {"url": f"{url}{path}", "status": 200, "code": None}


def test_a_long_poll_answers_none_when_no_work_arrives(server: Server, app: str):
    with client(server, app, **WORKER) as worker:
        assert worker.claim_next() is None
        assert worker.claim_next(wait_ms=300) is None


def test_a_long_poll_answers_with_work_admitted_while_it_waits(server: Server, app: str):
    claims: list[WorkloadClaim | None] = []

    def wait_for_work() -> None:
        with client(server, app, **WORKER) as worker:
            claims.append(worker.claim_next(wait_ms=10_000))

    waiter = threading.Thread(target=wait_for_work)
    waiter.start()
    try:
        with client(server, app, **REQUESTER) as requester:
            workload = requester.create(**submission())
    finally:
        waiter.join(timeout=20.0)
    assert not waiter.is_alive()
    assert len(claims) == 1 and claims[0] is not None
    assert claims[0].workload_id == workload.workload_id


def test_cancel_claim_fail_and_retry(server: Server, app: str):
    operator = {"subject": Subject.human("op"), "capabilities": [OPERATE, READ]}
    with (
        client(server, app, **REQUESTER) as requester,
        client(server, app, **WORKER) as worker,
        client(server, app, **operator) as op,
    ):
        doomed = requester.create(**submission(key="cancel-me"))
        assert requester.cancel(doomed.workload_id) is WorkloadState.CANCELLED

        running = requester.create(
            **submission(key="running", retry_policy=WorkloadRetryPolicy(max_attempts=3))
        )
        claim = worker.claim(running.workload_id, lease_ms=60_000)
        worker.start(running.workload_id, claim.claim_id, claim.fencing_token)
        assert requester.cancel(running.workload_id) is WorkloadState.CANCELLATION_REQUESTED
        worker.confirm_cancel(running.workload_id, claim.claim_id, claim.fencing_token)
        assert requester.get(running.workload_id).state is WorkloadState.CANCELLED

        failing = requester.create(
            **submission(key="fails", retry_policy={"max_attempts": 3, "retry_on": []})
        )
        claim = worker.claim(failing.workload_id)
        worker.start(failing.workload_id, claim.claim_id, claim.fencing_token)
        state = worker.fail(
            failing.workload_id, claim.claim_id, claim.fencing_token, "permanent", "bounced",
            effect="none",
        )  # fmt: skip
        assert state is WorkloadState.DEAD_LETTER
        retried = op.retry(failing.workload_id, "mailbox fixed")
        assert retried.state is WorkloadState.READY


def test_a_decision_is_the_tokens_subjects(server: Server, app: str):
    approver = {"subject": Subject.human("ada"), "capabilities": [APPROVE]}
    agent = {"subject": Subject.agent("a2"), "capabilities": [APPROVE]}
    with (
        client(server, app, **REQUESTER) as requester,
        client(server, app, **approver) as ada,
        client(server, app, **agent) as bot,
    ):
        gated = requester.create(**submission(approval={"approver_kinds": ["human"]}))
        assert gated.state is WorkloadState.AWAITING_APPROVAL
        with pytest.raises(ClientError) as refused:
            bot.decide(gated.workload_id, "approved", None, gated.input_hash)
        assert (refused.value.code, refused.value.status) == (
            "WORKLOAD_APPROVER_NOT_PERMITTED",
            403,
        )
        decision, replayed = ada.decide(
            gated.workload_id, ApprovalOutcome.APPROVED, "looks fine", gated.input_hash
        )
        assert replayed is False
        assert decision.decided_by == Subject.human("ada")
        assert decision.outcome is ApprovalOutcome.APPROVED
        _, replayed = ada.decide(
            gated.workload_id, ApprovalOutcome.APPROVED, "looks fine", gated.input_hash
        )
        assert replayed is True
        assert requester.get(gated.workload_id).state is WorkloadState.READY


def test_a_workload_id_never_becomes_a_query_or_a_fragment(server: Server, app: str):
    with client(server, app, **REQUESTER) as requester, pytest.raises(ClientError) as missing:
        requester.get("a?state=READY#b")
    assert missing.value.code == "WORKLOAD_NOT_FOUND"
    assert missing.value.details == {"workload_id": "a?state=READY#b"}


def test_lists_and_inboxes_page_through_the_applications_work(server: Server, app: str):
    reader = {
        "subject": Subject.human("op"),
        "capabilities": [READ, APPROVE, OPERATE, AUDIT],
    }
    with client(server, app, **REQUESTER) as requester, client(server, app, **reader) as op:
        ids = {requester.create(**submission(key=f"k{n}")).workload_id for n in range(3)}
        gated = requester.create(
            **submission(key="gated", approval={"approver_kinds": ["human"]})
        ).workload_id

        seen: list[str] = []
        page = op.list(state=WorkloadState.READY, limit=2)
        assert len(page.items) == 2 and page.next_cursor is not None
        while True:
            seen.extend(w.workload_id for w in page.items)
            if page.next_cursor is None:
                break
            page = op.list(state=WorkloadState.READY, limit=2, cursor=page.next_cursor)
        assert sorted(seen) == sorted(ids)

        assert [w.workload_id for w in op.approvals().items] == [gated]
        assert op.dead_letters() == Page([], None)
        assert op.list(definition="nothing-like-it").items == []

        audit = op.audit()
        assert {t.work_id for t in audit.items} >= ids | {gated}
        assert audit.next_after >= max(t.commit_revision for t in audit.items)
        assert op.audit(after=audit.next_after).items == []

    # Another application's lister sees none of it.
    with client(server, f"{app}-other", **reader) as stranger:
        assert stranger.list().items == []
        assert stranger.audit().items == []


def test_a_revoked_grant_is_refused_from_the_next_request_on(server: Server, app: str):
    victim = server.grant(app, **REQUESTER)
    revoker = {"subject": Subject.human("sec"), "capabilities": [REVOKE]}
    with Client(server.url, server.keyring.sign(victim)) as requester:
        requester.create(**submission())
        with client(server, app, **revoker) as security:
            assert security.revoke_grant(victim.id) is True
            assert security.revoke_grant(victim.id) is False  # idempotent
        with pytest.raises(ClientError) as refused:
            requester.create(**submission())
    assert (refused.value.code, refused.value.status) == ("WORKLOAD_UNAUTHORIZED", 403)
