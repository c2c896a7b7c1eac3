"""Typed definitions on each backend: a submission is checked against the input model
before admission (a bad one admits nothing and writes nothing), replays under its key,
and reaches the store directly (with a grant) or through a local client alike.
"""

from __future__ import annotations

import msgspec
import pytest
from pydantic import BaseModel
from support.factories import SIGNER, make_grant

from feltdb import Definition, Subject, WorkloadError, WorkloadState, WorkloadStore
from feltdb.auth.scope import Scope
from feltdb.client import LocalClient

NOW = 1_000
REQUESTER = Subject.agent("a1")
GRANT = SIGNER.sign(make_grant(subject=REQUESTER))
STORE_ONLY = {"grant": GRANT, "now": NOW}
"""What a submission to a store names (a client has its own credential and clock)."""


class EmailIn(BaseModel):
    to: str
    copies: int = 1


class EmailOut(BaseModel):
    message_id: str


class InvoiceIn(msgspec.Struct):
    invoice: int


SEND = Definition(
    "send-email", input=EmailIn, output=EmailOut, revision="v3",
    capabilities={"email:send"}, retry_policy={"max_attempts": 5}, priority=4,
)  # fmt: skip
INVOICE = Definition("send-invoice", input=InvoiceIn)


@pytest.fixture
def client(store: WorkloadStore) -> LocalClient:
    return LocalClient(store, Scope("t", "app"), REQUESTER, grant=GRANT, clock=lambda: NOW)


def written(store: WorkloadStore) -> int:
    """How many transactions the store committed (admissions, their audit)."""
    return len(store.db.committed_transactions_after(0))


def test_a_store_admits_the_definitions_work_under_the_grant(store):
    workload, created = SEND.submit(store, EmailIn(to="ada@example.com"), key="k1", grant=GRANT,
                                    now=NOW)  # fmt: skip

    assert created
    stored = store.get(workload.workload_id)
    assert stored.input == {"to": "ada@example.com", "copies": 1}
    assert (stored.tenant_id, stored.application_id) == ("t", "app")
    assert stored.requested_by == REQUESTER and stored.authorization_snapshot == GRANT
    assert (stored.definition_id, stored.definition_revision) == ("send-email", "v3")
    assert stored.capability_snapshot == {"email:send"} and stored.priority == 4
    assert stored.retry_policy.max_attempts == 5 and stored.created_at == NOW
    assert stored.state is WorkloadState.READY


def test_a_client_admits_it_as_its_caller(store, client):
    workload, created = INVOICE.submit(client, InvoiceIn(invoice=42), key="invoice-42")
    with pytest.raises(WorkloadError) as refused:
        INVOICE.submit(client, InvoiceIn(invoice=43), key="invoice-43", grant=GRANT)

    assert created and store.get(workload.workload_id).input == {"invoice": 42}
    assert store.get(workload.workload_id).requested_by == REQUESTER
    assert refused.value.details == {"fields": ["grant"]} and len(store.list("t", "app")) == 1


@pytest.mark.parametrize("through", ["store", "client"])
def test_a_bad_input_admits_nothing_and_writes_nothing(store, client, through):
    before = written(store)
    target, extra = (store, STORE_ONLY) if through == "store" else (client, {})

    with pytest.raises(WorkloadError) as refused:
        SEND.submit(target, {"to": ["not", "a", "string"]}, key="k1", **extra)

    assert refused.value.code == "WORKLOAD_INVALID"
    assert refused.value.details == {"fields": ["input.to"]}
    assert store.list("t", "app") == [] and written(store) == before
    # The key is still free: the same key with a good input admits.
    _, created = SEND.submit(target, {"to": "ada@example.com"}, key="k1", **extra)
    assert created


@pytest.mark.parametrize("through", ["store", "client"])
def test_the_same_key_replays_and_another_input_under_it_is_refused(store, client, through):
    target, extra = (store, STORE_ONLY) if through == "store" else (client, {})
    first, created = SEND.submit(target, EmailIn(to="ada@example.com"), key="k", **extra)
    after_first = written(store)

    again, replayed = SEND.submit(target, {"to": "ada@example.com"}, key="k", **extra)
    with pytest.raises(WorkloadError) as reused:
        SEND.submit(target, EmailIn(to="bob@example.com"), key="k", **extra)

    assert created and not replayed and again.workload_id == first.workload_id
    assert reused.value.code == "IDEMPOTENCY_KEY_REUSED"
    assert len(store.list("t", "app")) == 1 and written(store) == after_first


def test_requests_of_a_definition_admit_together(store):
    requests = [
        INVOICE.request(InvoiceIn(invoice=n), key=f"i{n}", grant=GRANT, now=NOW) for n in (1, 2)
    ]

    answers = store.admit_many(requests)

    assert [created for _, created in answers] == [True, True]  # type: ignore[misc]
    assert sorted(w.input["invoice"] for w in store.list("t", "app")) == [1, 2]


def test_the_grant_names_the_requester_tenant_and_application(store):
    narrowed = SIGNER.sign(make_grant(subject=REQUESTER, tenant_id="t2"))
    other = SIGNER.sign(make_grant(subject=Subject.agent("someone-else")))

    for grant in (narrowed, other):
        workload, _ = INVOICE.submit(store, {"invoice": 1}, key=f"k-{grant.grant.tenant_id}",
                                     grant=grant, now=NOW)  # fmt: skip
        assert workload.tenant_id == grant.grant.tenant_id
        assert workload.requested_by == grant.grant.subject
