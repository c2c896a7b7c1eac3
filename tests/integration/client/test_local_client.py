"""``feltdb.client.LocalClient``: the client protocol on a store in process, answering as
the server answers the same subject's token.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest
from support.server import Server, submission

from feltdb import (
    ApprovalPolicy,
    CreateWorkload,
    GrantConstraints,
    Subject,
    WorkloadError,
    WorkloadRetryPolicy,
    WorkloadState,
    WorkloadStore,
    WorkloadTimeouts,
)
from feltdb.auth import GrantSigner
from feltdb.auth.policy import ALL_CAPABILITIES, application_grant
from feltdb.auth.scope import Scope
from feltdb.client import AsyncClient, Client, LocalClient, WorkloadClient
from feltdb.work.submission import admission_request

Call = Callable[[WorkloadClient, str], object]

ON_ONE_WORKLOAD: dict[str, Call] = {
    "get": lambda c, wid: c.get(wid),
    "cancel": lambda c, wid: c.cancel(wid),
    "claim": lambda c, wid: c.claim(wid),
    "start": lambda c, wid: c.start(wid, "claim_x", 1),
    "heartbeat": lambda c, wid: c.heartbeat(wid, "claim_x", 1),
    "context": lambda c, wid: c.execution_context(wid, "claim_x", 1),
    "checkpoint": lambda c, wid: c.checkpoint(wid, "claim_x", 1, {"n": 1}),
    "complete": lambda c, wid: c.complete(wid, "claim_x", 1, "result_x", {}),
    "fail": lambda c, wid: c.fail(wid, "claim_x", 1, "boom", "it broke"),
    "confirm_cancel": lambda c, wid: c.confirm_cancel(wid, "claim_x", 1),
    "retry": lambda c, wid: c.retry(wid, "again"),
    "decide": lambda c, wid: c.decide(wid, "approved", None, "sha256:x"),
}
"""Every per-workload operation of the protocol, made on work the caller may not see."""


def refusal(call: Call, client: WorkloadClient, workload_id: str) -> tuple[Any, ...]:
    with pytest.raises(WorkloadError) as refused:
        call(client, workload_id)
    return refused.value.code, refused.value.message, refused.value.details


@pytest.fixture
def behind(server: Server) -> Iterator[WorkloadStore]:
    """The store the server serves, opened behind its back."""
    with WorkloadStore.open(server.target) as store:
        yield store


def local_of(server: Server, store: WorkloadStore, app: str, **narrowing: Any) -> LocalClient:
    grant = server.grant(app)
    if narrowing:
        grant = msgspec.structs.replace(grant, constraints=GrantConstraints(**narrowing))
    scope = Scope.of_grant(grant)
    return LocalClient(store, scope, grant.subject, grant=server.keyring.evidence(grant))


def test_another_applications_work_is_not_found_exactly_as_the_server_says(
    server: Server, app: str, behind: WorkloadStore
):
    other = f"{app}-other"
    with Client(server.url, server.token(app)) as owner:
        workload_id = owner.create(**submission()).workload_id
    local = local_of(server, behind, other)
    with Client(server.url, server.token(other)) as stranger:
        for name, call in ON_ONE_WORKLOAD.items():
            over_http = refusal(call, stranger, workload_id)
            in_process = refusal(call, local, workload_id)
            missing = refusal(call, local, "no-such-workload")
            assert over_http == in_process, name
            assert in_process[0] == "WORKLOAD_NOT_FOUND", name
            assert missing == (
                "WORKLOAD_NOT_FOUND",
                "workload no-such-workload not found",
                {"workload_id": "no-such-workload"},
            ), name
    assert behind.get(workload_id).state is WorkloadState.READY  # nothing was done to it


def test_work_outside_a_narrowed_scope_is_not_found_either(
    server: Server, app: str, behind: WorkloadStore
):
    with Client(server.url, server.token(app)) as owner:
        workload_id = owner.create(**submission()).workload_id  # environment "production"
    local = local_of(server, behind, app, environments=frozenset({"staging"}))
    assert refusal(ON_ONE_WORKLOAD["get"], local, workload_id) == (
        "WORKLOAD_NOT_FOUND",
        f"workload {workload_id} not found",
        {"workload_id": workload_id},
    )
    assert local.list().items == []
    with pytest.raises(WorkloadError) as audit:
        local.audit()
    assert audit.value.code == "WORKLOAD_UNAUTHORIZED"


# ------------------------------------------------------------------ one submission model

REQUESTER = Subject.service("api")
SIGNER = GrantSigner("k1", b"0" * 32)
GRANT = SIGNER.sign(
    application_grant(REQUESTER, "t", "app", ALL_CAPABILITIES, issued_at=0, expires_at=2**40)
)
FIELDS: dict[str, Any] = {
    "environment": "production",
    "definition_id": "send",
    "definition_revision": "r1",
    "trigger": "manual",
    "input": {"to": "ada@example.com", "n": [1, 2.5, None]},
    "capability_snapshot": ["email:send", "smtp"],
    "idempotency_key": "one",
    "priority": 3,
    "retry_policy": WorkloadRetryPolicy(max_attempts=5, retry_on={"timeout"}),
    "timeouts": {"execution_ms": 60_000, "approval_ms": 1000},
    "approval": ApprovalPolicy(approvers={Subject.human("ada")}),
    "dependencies": [{"workload_id": "workload_up", "required_state": "SUCCEEDED"}],
    "not_before": 1_900_000_000,
}


class Sent(Exception):
    """Stops a request once what it would admit is captured."""


def admitted_over_http(**fields: Any) -> CreateWorkload:
    """What a server admits for ``Client.admit(**fields)`` (and for
    ``AsyncClient.admit``, which sends the same body): its body, with the token's fields
    added as the server adds them.
    """
    bodies: list[dict[str, Any]] = []

    def capture(request: httpx.Request) -> httpx.Response:
        bodies.append(json.loads(request.content))
        raise Sent

    with Client("http://authority.invalid", "token") as felt:
        felt._http = httpx.Client(
            base_url=felt.url, transport=httpx.MockTransport(capture)
        )  # the client's own pool, answered here
        with pytest.raises(Sent):
            felt.admit(**fields)

    async def admit_awaited() -> None:
        async with AsyncClient("http://authority.invalid", token="token") as felt:
            mock = httpx.MockTransport(capture)
            felt._http = httpx.AsyncClient(base_url=felt.url, transport=mock)
            await felt.admit(**fields)

    with pytest.raises(Sent):
        asyncio.run(admit_awaited())
    body, same = bodies
    assert same == body  # the AsyncClient sends what the Client sends
    return admission_request(
        body,
        tenant_id="t",
        application_id="app",
        requested_by=REQUESTER,
        authorization_snapshot=GRANT,
        created_at=1_800_000_000,
    )


def admitted_in_process(tmp_path: Path, **fields: Any) -> CreateWorkload:
    requests: list[CreateWorkload] = []
    with WorkloadStore.open(tmp_path / "w.db") as store:

        def capture(request: CreateWorkload) -> Any:
            requests.append(request)
            raise Sent

        store.admit = capture  # type: ignore[method-assign]
        local = LocalClient(
            store, Scope("t", "app"), REQUESTER, clock=lambda: 1_800_000_000, grant=GRANT
        )
        with pytest.raises(Sent):
            local.admit(**fields)
    (request,) = requests
    return request


@pytest.mark.parametrize(
    "fields",
    [FIELDS, {k: v for k, v in FIELDS.items() if k in submission()}],
    ids=["every-field", "required-only"],
)
def test_a_submission_builds_the_same_request_through_either_client(
    tmp_path: Path, fields: dict[str, Any]
):
    over_http = admitted_over_http(**fields)
    in_process = admitted_in_process(tmp_path, **fields)
    assert over_http.to_json() == in_process.to_json()
    assert in_process.requested_by == REQUESTER and in_process.authorization_snapshot == GRANT
    if "timeouts" in fields:
        assert in_process.timeouts == WorkloadTimeouts(execution_ms=60_000, approval_ms=1000)


def test_a_submission_without_a_grant_is_refused(tmp_path: Path):
    with WorkloadStore.open(tmp_path / "w.db") as store:
        local = LocalClient(store, Scope("t", "app"), REQUESTER)
        with pytest.raises(WorkloadError) as refused:
            local.admit(**submission())
        assert refused.value.code == "WORKLOAD_UNAUTHORIZED"
        assert store.list("t", "app") == []


def test_a_local_submission_takes_the_same_defaults(tmp_path: Path):
    from feltdb.work.submission import SUBMISSION_DEFAULTS

    with WorkloadStore.open(tmp_path / "w.db") as store:
        local = LocalClient(store, Scope("t", "app"), REQUESTER, grant=GRANT)
        workload, created = local.admit(definition_id="send", input={"n": 1})
        assert created
        assert {name: getattr(workload, name) for name in SUBMISSION_DEFAULTS} == {
            **SUBMISSION_DEFAULTS,
            "capability_snapshot": frozenset(),
        }
        again, _ = local.admit(definition_id="send", input={"n": 1})
        assert again.workload_id != workload.workload_id  # a new random key each time


# ------------------------------------------------------------------ pages and maintenance


def test_pages_follow_cursors_to_the_end(tmp_path: Path):
    with WorkloadStore.open(tmp_path / "w.db") as store:
        local = LocalClient(store, Scope("t", "app"), REQUESTER, grant=GRANT)
        made = {local.create(**submission(f"k{n}", priority=n)).workload_id for n in range(5)}
        seen: list[str] = []
        cursor = None
        while True:
            page = local.list(limit=2, cursor=cursor)
            seen += [w.workload_id for w in page.items]
            if page.next_cursor is None:
                break
            cursor = page.next_cursor
        assert set(seen) == made and len(seen) == 5
        with pytest.raises(WorkloadError) as bad:
            local.list(cursor="not-a-cursor")
        assert bad.value.code == "WORKLOAD_INVALID"


def test_maintenance_runs_in_claim_next_only_when_asked(tmp_path: Path):
    now = [1_800_000_000]
    with WorkloadStore.open(tmp_path / "w.db") as store:

        def client(subject: Subject, **options: Any) -> LocalClient:
            return LocalClient(store, Scope("t", "app"), subject, clock=lambda: now[0], **options)

        def worker(name: str, **options: Any) -> LocalClient:
            return client(Subject.worker(name), **options)

        client(REQUESTER, grant=GRANT).create(**submission(capability_snapshot=[]))

        died = worker("w1").claim_next(lease_ms=1000)
        assert died is not None and died.worker_id == "worker:w1"
        now[0] += 5  # its lease ran out; nobody has recovered the work yet
        assert worker("w2").claim_next() is None
        resumed = worker("w2", maintenance_interval_s=1.0).claim_next()
        assert resumed is not None and resumed.workload_id == died.workload_id
        assert resumed.worker_id == "worker:w2"
