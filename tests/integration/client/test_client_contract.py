"""The client contract: the same behaviour through :class:`Client` and :class:`AsyncClient`
(a real server process) and :class:`LocalClient` (its store, in process), on both backends
(the ``clients`` fixture of conftest.py): each test body is written once against the
protocol; an HTTP client's refusal also carries the server's status.
"""

from __future__ import annotations

import asyncio
import threading

import pydantic
import pytest
from support.client_kinds import Clients
from support.server import WORK_CAPABILITY, Server, submission

from feltdb import (
    ApprovalOutcome,
    Definition,
    Subject,
    Workload,
    WorkloadClaim,
    WorkloadError,
    WorkloadRetryPolicy,
    WorkloadState,
    WorkloadStore,
)
from feltdb.auth.policy import APPROVE, AUDIT, CANCEL, CLAIM, OPERATE, READ, REVOKE, SUBMIT
from feltdb.client import AsyncClient, ClientError, Page

REQUESTER = {"subject": Subject.agent("a1"), "capabilities": [SUBMIT, READ, CANCEL]}
WORKER = {"subject": Subject.worker("w1"), "capabilities": [CLAIM, WORK_CAPABILITY]}


def refused(clients: Clients, error: pytest.ExceptionInfo[WorkloadError], status: int) -> str:
    """The refusal's code, checking the status an HTTP client's refusal carries."""
    if clients.over_http:
        assert isinstance(error.value, ClientError) and error.value.status == status
    return error.value.code


def test_a_workload_runs_its_whole_lifecycle(clients: Clients, app: str):
    requester, worker = clients(app, **REQUESTER), clients(app, **WORKER)
    workload, created = requester.admit(**submission())
    assert created is True and isinstance(workload, Workload)
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

    assert worker.start(wid, *fence) is None
    assert worker.heartbeat(wid, *fence, extend_ms=60_000).claim_id == claim.claim_id
    assert worker.checkpoint(wid, *fence, {"n": 1}).sequence == 1
    context = worker.execution_context(wid, *fence)
    assert context.input == submission()["input"]
    assert [c.state for c in context.checkpoints] == [{"n": 1}]
    result = worker.complete(wid, *fence, f"result-{app}", {"sent": True})
    assert result.output == {"sent": True}
    assert worker.complete(wid, *fence, f"result-{app}", {"sent": True}) == result  # resent

    read = requester.get(wid)
    assert read.state is WorkloadState.SUCCEEDED
    assert read.result is not None and read.result.result_id == f"result-{app}"


def test_refusals_carry_the_authoritys_code(clients: Clients, app: str):
    requester, worker = clients(app, **REQUESTER), clients(app, **WORKER)
    with pytest.raises(WorkloadError) as missing:
        requester.get("no-such-workload")
    assert refused(clients, missing, 404) == "WORKLOAD_NOT_FOUND"
    assert missing.value.details == {"workload_id": "no-such-workload"}

    wid = requester.create(**submission()).workload_id
    claim = worker.claim_next()
    assert claim is not None
    with pytest.raises(WorkloadError) as stale:
        worker.start(wid, claim.claim_id, claim.fencing_token + 1)
    assert refused(clients, stale, 409) == "WORKLOAD_STALE_FENCE"

    with pytest.raises(WorkloadError) as reused:
        requester.admit(**submission(input={"to": "bob@example.com"}))
    assert refused(clients, reused, 409) == "IDEMPOTENCY_KEY_REUSED"

    with pytest.raises(WorkloadError) as unseen:
        requester.admit(**submission(key="three", dependencies=[{"workload_id": "nope"}]))
    assert refused(clients, unseen, 422) == "WORKLOAD_INVALID"


def test_a_long_poll_answers_none_when_no_work_arrives(clients: Clients, app: str):
    worker = clients(app, **WORKER)
    assert worker.claim_next() is None
    assert worker.claim_next(wait_ms=300) is None
    assert worker.claim_work(2, wait_ms=300) == []


def test_a_long_poll_answers_with_work_admitted_while_it_waits(clients: Clients, app: str):
    worker = clients(app, **WORKER)  # made here: the waiting thread only calls it
    claims: list[WorkloadClaim | None] = []
    waiter = threading.Thread(target=lambda: claims.append(worker.claim_next(wait_ms=10_000)))
    waiter.start()
    try:
        workload = clients(app, **REQUESTER).create(**submission())
    finally:
        waiter.join(timeout=20.0)
    assert not waiter.is_alive()
    assert len(claims) == 1 and claims[0] is not None
    assert claims[0].workload_id == workload.workload_id


def test_cancel_claim_fail_and_retry(clients: Clients, app: str):
    operator = {"subject": Subject.human("op"), "capabilities": [OPERATE, READ]}
    requester, worker = clients(app, **REQUESTER), clients(app, **WORKER)
    op = clients(app, **operator)
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
    assert [w.workload_id for w in op.dead_letters().items] == [failing.workload_id]
    retried = op.retry(failing.workload_id, "mailbox fixed")
    assert retried.state is WorkloadState.READY


def test_a_decision_is_the_clients_subjects(clients: Clients, app: str):
    requester = clients(app, **REQUESTER)
    ada = clients(app, subject=Subject.human("ada"), capabilities=[APPROVE])
    bot = clients(app, subject=Subject.agent("a2"), capabilities=[APPROVE])
    gated = requester.create(**submission(approval={"approver_kinds": ["human"]}))
    assert gated.state is WorkloadState.AWAITING_APPROVAL
    with pytest.raises(WorkloadError) as denied:
        bot.decide(gated.workload_id, "approved", None, gated.input_hash)
    assert refused(clients, denied, 403) == "WORKLOAD_APPROVER_NOT_PERMITTED"
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


def test_lists_and_inboxes_page_through_the_applications_work(clients: Clients, app: str):
    reader = {"subject": Subject.human("op"), "capabilities": [READ, APPROVE, OPERATE, AUDIT]}
    requester, op = clients(app, **REQUESTER), clients(app, **reader)
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
    assert op.verify_audit().ok

    stranger = clients(f"{app}-other", **reader)  # another application's sees none of it
    assert stranger.list().items == []
    assert stranger.audit().items == []


def test_limits_are_set_and_read_alike(clients: Clients, app: str):
    op = clients(app, subject=Subject.human("op"), capabilities=[OPERATE, READ])
    assert op.rate_limits().limits == [] and op.aging() is None
    op.set_rate_limit("smtp", (5, 60))
    op.set_aging(30)
    op.set_definition_limit("send", 2)
    assert [(r.name, r.starts, r.period_s) for r in op.rate_limits().limits] == [("smtp", 5, 60)]
    assert op.aging() == 30
    assert op.concurrency_keys().definitions == {"send": 2}
    op.set_rate_limit("smtp", None)
    op.set_aging(None)
    op.set_definition_limit("send", None)
    assert op.rate_limits().limits == [] and op.aging() is None
    assert op.concurrency_keys().definitions == {}
    with pytest.raises(WorkloadError) as invalid:
        op.set_rate_limit("smtp", (0, 60))
    assert refused(clients, invalid, 422) == "WORKLOAD_INVALID"


def test_a_revoked_grant_is_revoked_once(clients: Clients, app: str):
    victim = clients.server.grant(app, **REQUESTER)
    security = clients(app, subject=Subject.human("sec"), capabilities=[REVOKE])
    clients.of(victim).create(**submission())
    assert security.revoke_grant(victim.id) is True
    assert security.revoke_grant(victim.id) is False  # idempotent
    assert [r["grant_id"] for r in security.revocations()] == [victim.id]
    with pytest.raises(WorkloadError) as unknown:
        security.revoke_grant("grant_never_minted")
    assert refused(clients, unknown, 404) == "WORKLOAD_NOT_FOUND"


class Greeting(pydantic.BaseModel):
    to: str


GREET = Definition("greet", input=Greeting, capabilities={WORK_CAPABILITY})


def test_a_typed_definition_submits_through_a_real_async_client(server: Server, app: str):
    # submit_async is the one call of a definition that awaits: through the AsyncClient
    # itself, not a stand-in; a bad input is refused before anything is sent.
    async def submitted() -> tuple[tuple[Workload, bool], tuple[Workload, bool], str]:
        async with AsyncClient(server.url, server.token(app, **REQUESTER)) as client:
            first = await GREET.submit_async(client, Greeting(to="ada"), key="g1")
            again = await GREET.submit_async(client, {"to": "ada"}, key="g1")
            with pytest.raises(WorkloadError) as bad:
                await GREET.submit_async(client, {"to": 5}, key="g2")
            return first, again, bad.value.code

    (workload, created), (replayed, created_again), code = asyncio.run(submitted())
    assert created and not created_again and replayed.workload_id == workload.workload_id
    assert workload.input == {"to": "ada"} and workload.definition_id == "greet"
    assert code == "WORKLOAD_INVALID"
    with WorkloadStore.open(server.target) as store:
        assert [w.idempotency_key for w in store.list("t", app)] == ["g1"]
