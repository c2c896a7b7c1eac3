"""The clients' batch calls (``admit_many``, ``claim_many``, ``complete_many``,
``heartbeat_many``): per item, the value or the refusal the single call gives, alike
through :class:`Client` and :class:`AsyncClient` (over the server) and :class:`LocalClient`
(on its store).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

import pytest
from support.client_kinds import Awaited
from support.client_kinds import Clients as ClientsOf
from support.server import WORK_CAPABILITY, Server, submission

from feltdb import Subject, WorkloadError, WorkloadState, WorkloadStore
from feltdb.auth.policy import CLAIM, READ, SUBMIT
from feltdb.auth.scope import Scope
from feltdb.client import (
    Client,
    ClientError,
    CompletionItem,
    HeartbeatItem,
    LocalClient,
    WorkloadClient,
)

REQUESTER = Subject.agent("a1")
WORKER = Subject.worker("w1")
HTTP_KINDS = ("http", "async")
Clients = Callable[[str], tuple[WorkloadClient, WorkloadClient]]
"""An application's requester and worker clients."""


@pytest.fixture
def behind(server: Server) -> Iterator[WorkloadStore]:
    with WorkloadStore.open(server.target) as store:
        yield store


@contextmanager
def over_http(server: Server, kind: str = "http") -> Iterator[Clients]:
    """Clients of ``kind``: ``"http"`` (:class:`Client`) or ``"async"`` (:class:`AsyncClient`,
    awaited)."""
    with ExitStack() as stack:
        made = ClientsOf(kind, server, stack)

        def clients(app: str) -> tuple[WorkloadClient, WorkloadClient]:
            requester = made(app, subject=REQUESTER, capabilities=[SUBMIT, READ])
            worker = made(app, subject=WORKER, capabilities=[CLAIM, WORK_CAPABILITY])
            return requester, worker

        yield clients


def in_process(server: Server, store: WorkloadStore) -> Clients:
    def clients(app: str) -> tuple[WorkloadClient, WorkloadClient]:
        grant = server.grant(app, subject=REQUESTER)
        scope = Scope.of_grant(grant)
        requester = LocalClient(store, scope, REQUESTER, grant=server.keyring.evidence(grant))
        worker = LocalClient(store, scope, WORKER, capabilities=[WORK_CAPABILITY])
        return requester, worker

    return clients


def outcome(answer: object) -> tuple[str, str | None]:
    if isinstance(answer, WorkloadError):
        return "refused", answer.code
    return "answered", None


def scenario(clients: Clients, app: str) -> list[list[Any]]:
    """Admissions, claims, completions and heartbeats, some items refused; every answer."""
    requester, worker = clients(app)
    requester_other, _ = clients(f"{app}-other")
    foreign = requester_other.submit(submission("foreign"))[0].workload_id
    admitted = requester.admit_many(
        [
            submission("a"),
            submission("a"),
            submission("b"),
            submission("c"),
            {"environment": "production"},  # not a submission
            submission("secret", input={"password": "hunter2"}),
        ]
    )
    claims = worker.claim_many(5, start=True, lease_ms=60_000)
    assert len(claims) == 3
    assert {c.workload_id for c in claims} == {
        a[0].workload_id for a in admitted if isinstance(a, tuple)
    }
    first, second, third = claims
    done = worker.complete_many(
        [
            CompletionItem(first.workload_id, first.claim_id, first.fencing_token, "r1", {"ok": 1}),
            CompletionItem(second.workload_id, second.claim_id, second.fencing_token + 1, "r2", 2),
            CompletionItem(foreign, first.claim_id, first.fencing_token, "r3", 3),
            {
                "workload_id": third.workload_id,
                "claim_id": third.claim_id,
                "fencing_token": third.fencing_token,
                "result_id": "r1",  # the first item's
                "output": 4,
            },
        ]
    )
    beats = worker.heartbeat_many(
        [HeartbeatItem.of(second, 90_000), HeartbeatItem.of(first), HeartbeatItem.of(third)]
    )
    assert requester.get(first.workload_id).state is WorkloadState.SUCCEEDED
    assert requester.get(second.workload_id).state is WorkloadState.RUNNING
    return [admitted, done, beats]


EXPECTED = [
    [("answered", None), ("answered", None), ("answered", None), ("answered", None),
     ("refused", "WORKLOAD_INVALID"), ("refused", "WORKLOAD_SECRET_REJECTED")],
    [("answered", None), ("refused", "WORKLOAD_STALE_FENCE"), ("refused", "WORKLOAD_NOT_FOUND"),
     ("refused", "WORKLOAD_RESULT_DUPLICATE")],
    [("answered", None), ("refused", "WORKLOAD_CLAIM_INVALID"), ("answered", None)],
]  # fmt: skip


def test_both_clients_answer_every_item_as_the_single_calls_do(
    server: Server, behind: WorkloadStore, app: str
) -> None:
    remotes = []
    for kind in HTTP_KINDS:
        with over_http(server, kind) as http_clients:
            remotes.append(scenario(http_clients, f"{app}-{kind}"))
    local = scenario(in_process(server, behind), f"{app}-local")
    for answers in (*remotes, local):
        assert [[outcome(a) for a in batch] for batch in answers] == EXPECTED
    for remote in remotes:
        admitted = remote[0]
        assert [a[1] for a in admitted[:4]] == [True, False, True, True]
        # Over HTTP each refusal carries its item's status: none for the submission refused
        # before it was sent, the server's for the others.
        statuses = [a.status for batch in remote for a in batch if isinstance(a, ClientError)]
        assert statuses == [None, 422, 409, 404, 409, 409]
        assert remote[2][0].expires_at - remote[2][0].last_heartbeat == 90


@pytest.mark.parametrize("kind", HTTP_KINDS)
def test_a_whole_batch_refusal_is_raised(server: Server, app: str, kind: str) -> None:
    token = server.token(app, subject=WORKER, capabilities=[SUBMIT])
    with (Client if kind == "http" else Awaited)(server.url, token) as felt:
        with pytest.raises(ClientError) as refused:
            felt.claim_many(2)
        assert (refused.value.code, refused.value.status) == ("WORKLOAD_UNAUTHORIZED", 403)
        with pytest.raises(ClientError) as invalid:
            felt.heartbeat_many([HeartbeatItem("w", "c", 1)] * 1025)
        assert (invalid.value.code, invalid.value.status) == ("WORKLOAD_INVALID", 422)


def work_and_renewals(clients: Clients, app: str, behind: WorkloadStore) -> None:
    """A claim carries the workload as its commit left it (started); a renewal says when
    cancellation was requested; a long-poll for work answers work admitted meanwhile.
    """
    requester, worker = clients(app)
    admitted, _ = requester.submit(submission("k-work", input={"to": "ada"}))
    [work] = worker.claim_work(5, lease_ms=60_000)
    assert work.claim.workload_id == admitted.workload_id
    assert work.workload.state is WorkloadState.RUNNING
    assert work.workload.input == {"to": "ada"} and work.workload.current_claim == work.claim
    beat = HeartbeatItem.of(work.claim, 60_000)
    [renewed] = worker.renew_leases([beat])
    assert not isinstance(renewed, WorkloadError) and not renewed.cancellation_requested
    behind.cancel(admitted.workload_id, "human:ops")
    [renewed] = worker.renew_leases([beat])
    assert not isinstance(renewed, WorkloadError) and renewed.cancellation_requested
    assert renewed.claim.claim_id == work.claim.claim_id
    assert worker.claim_work(5, wait_ms=300) == []
    later = threading.Timer(0.3, lambda: requester.submit(submission("k-later")))
    later.start()
    try:
        [arrived] = worker.claim_work(5, wait_ms=20_000)
    finally:
        later.join()
    assert arrived.workload.idempotency_key == "k-later"


def test_both_clients_claim_work_with_its_workload_and_renewals_say_cancel(
    server: Server, behind: WorkloadStore, app: str
) -> None:
    for kind in HTTP_KINDS:
        with over_http(server, kind) as http_clients:
            work_and_renewals(http_clients, f"{app}-{kind}", behind)
    work_and_renewals(in_process(server, behind), f"{app}-local", behind)


@pytest.mark.parametrize("kind", HTTP_KINDS)
def test_a_long_poll_for_work_outlasts_the_clients_request_timeout(
    server: Server, app: str, kind: str
) -> None:
    """``claim_work(wait_ms=…)`` waits on the server: the client's bound on the request
    grows by ``wait_ms``, as ``claim_next``'s does, or work arriving late in the wait would
    be claimed for a client that already gave up.
    """
    with over_http(server) as clients:
        requester, _ = clients(app)
        token = server.token(app, subject=WORKER, capabilities=[CLAIM, WORK_CAPABILITY])
        impatient_client = Client if kind == "http" else Awaited
        with impatient_client(server.url, token, timeout=1.0) as impatient:
            later = threading.Timer(1.5, lambda: requester.submit(submission("k-late")))
            later.start()
            try:
                [arrived] = impatient.claim_work(5, wait_ms=10_000)
            finally:
                later.join()
    assert arrived.workload.idempotency_key == "k-late"
