"""Typed handlers in the worker runtime, on each backend: ``@worker.handler(definition)``
hands the handler its parsed input, completes with its checked output, and fails an attempt
whose input or output does not fit its model, naming the fields; untyped handlers beside
them are unchanged.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import msgspec
import pytest
from pydantic import BaseModel
from support.factories import SIGNER, make_grant, make_request

from feltdb import Definition, Subject, WorkloadError, WorkloadState, WorkloadStore
from feltdb.records.workload import Workload
from feltdb.worker import Context, Worker

REQUESTER = Subject.agent("a1")
GRANT = SIGNER.sign(make_grant(subject=REQUESTER))
ONCE = {"max_attempts": 1}


class EmailIn(BaseModel):
    to: str


class EmailOut(BaseModel):
    message_id: str


class InvoiceIn(msgspec.Struct, frozen=True):
    invoice: int
    currency: str = "EUR"


class InvoiceOut(msgspec.Struct, frozen=True):
    total: int
    currency: str


SEND = Definition(
    "send-email", input=EmailIn, output=EmailOut, capabilities={"email:send"},
    retry_policy=ONCE,
)  # fmt: skip
INVOICE = Definition(
    "send-invoice", input=InvoiceIn, output=InvoiceOut, capabilities={"email:send"},
    retry_policy=ONCE,
)  # fmt: skip


@pytest.fixture
def store(new_target: Callable[..., str]) -> Iterator[WorkloadStore]:
    with WorkloadStore.open(new_target()) as opened:
        yield opened


@pytest.fixture
def worker(store: WorkloadStore) -> Worker:
    return Worker(
        store=store, tenant="t", application="app", capabilities={"email:send"}, name="w1"
    )


def submit(store: WorkloadStore, definition: Definition[Any, Any], value: Any, key: str) -> str:
    workload, created = definition.submit(store, value, key=key, grant=GRANT)
    assert created
    return workload.workload_id


def failure(workload: Workload) -> dict[str, Any]:
    failed = [e for e in workload.execution_history if e.to is WorkloadState.FAILED]
    assert len(failed) == 1
    return failed[0].evidence


def test_a_sync_handler_gets_its_parsed_input_and_completes_with_its_model(store, worker):
    seen: list[Any] = []

    @worker.handler(SEND)
    def send(ctx: Context, email: EmailIn) -> EmailOut:
        seen.append((ctx.definition_id, email))
        return EmailOut(message_id=f"<{email.to}>")

    workload_id = submit(store, SEND, EmailIn(to="ada@example.com"), "k1")
    assert worker.drain() == 1

    done = store.get(workload_id)
    assert seen == [("send-email", EmailIn(to="ada@example.com"))]
    assert done.state is WorkloadState.SUCCEEDED
    assert done.result is not None and done.result.output == {"message_id": "<ada@example.com>"}
    assert SEND.output_of(done) == EmailOut(message_id="<ada@example.com>")


def test_an_async_handler_with_msgspec_models_and_a_dict_output(store, worker):
    @worker.handler(INVOICE)
    async def invoice(ctx: Context, value: InvoiceIn) -> InvoiceOut:
        assert isinstance(value, InvoiceIn)
        return InvoiceOut(total=value.invoice * 2, currency=value.currency)

    @worker.handler(SEND)
    def send(ctx: Context, email: EmailIn) -> Any:
        return {"message_id": "m-1"}  # a dict of the model's fields will do

    ids = [submit(store, INVOICE, InvoiceIn(invoice=21), "i")]
    ids.append(submit(store, SEND, {"to": "a"}, "s"))
    assert worker.drain() == 2

    invoiced, sent = (store.get(i) for i in ids)
    assert INVOICE.output_of(invoiced) == InvoiceOut(total=42, currency="EUR")
    assert sent.result is not None and sent.result.output == {"message_id": "m-1"}


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_an_output_that_does_not_match_fails_naming_the_field(store, worker, asynchronous):
    if asynchronous:

        @worker.handler(SEND)
        async def send_async(ctx: Context, email: EmailIn) -> Any:
            return {"message_id": 7}

    else:

        @worker.handler(SEND)
        def send(ctx: Context, email: EmailIn) -> Any:
            return {"sent": True}

    workload_id = submit(store, SEND, EmailIn(to="ada@example.com"), "k1")
    assert worker.drain() == 1

    failed = store.get(workload_id)
    assert failed.state is WorkloadState.DEAD_LETTER and failed.result is None
    assert failed.last_failure is not None
    assert failed.last_failure.startswith("invalid_output: output does not match EmailOut: ")
    assert "output.message_id" in failed.last_failure
    assert failure(failed)["failure_kind"] == "invalid_output"
    assert failure(failed)["effect"] == "unknown"  # the handler ran: it may have acted


def test_an_input_that_does_not_parse_fails_before_the_handler_runs(store, worker):
    called: list[Any] = []

    @worker.handler(SEND)
    def send(ctx: Context, email: EmailIn) -> EmailOut:
        called.append(email)
        return EmailOut(message_id="m")

    # Submitted untyped (another client, an older model): the worker's model decides.
    request = make_request(
        definition_id="send-email", input={"recipient": "ada"}, created_at=int(time.time()),
        retry_policy=ONCE,
    )  # fmt: skip
    workload_id = store.create(request).workload_id
    assert worker.drain() == 1

    failed = store.get(workload_id)
    assert called == [] and failed.state is WorkloadState.DEAD_LETTER
    assert failed.last_failure == (
        "invalid_input: input does not match EmailIn: input.to: Field required"
    )
    assert failure(failed)["failure_kind"] == "invalid_input"
    assert failure(failed)["effect"] == "none"


def test_typed_and_untyped_handlers_serve_side_by_side(store, worker):
    @worker.handler(SEND)
    def send(ctx: Context, email: EmailIn) -> EmailOut:
        return EmailOut(message_id="typed")

    @worker.handler("send")
    def plain(ctx: Context) -> Any:
        return {"input": ctx.input}

    typed = submit(store, SEND, {"to": "a"}, "typed")
    untyped = store.create(make_request(created_at=int(time.time()))).workload_id
    assert worker.drain() == 2

    for workload_id, output in [(typed, {"message_id": "typed"}), (untyped, {"input": {"id": 1}})]:
        result = store.get(workload_id).result
        assert result is not None and result.output == output


def test_a_definition_is_served_once(worker):
    worker.handler("send-email")(lambda ctx: None)

    with pytest.raises(WorkloadError) as twice:
        worker.handler(SEND)(lambda ctx, email: None)

    assert twice.value.code == "WORKLOAD_INVALID" and "'send-email'" in twice.value.message


def test_the_testing_environment_runs_typed_work():
    from feltdb.testing import WorkerTestEnvironment

    worker = Worker(capabilities={"email:send"}, name="tester")

    @worker.handler(SEND)
    def send(ctx: Context, email: EmailIn) -> EmailOut:
        return EmailOut(message_id=email.to.upper())

    with WorkerTestEnvironment() as env:
        requester = env.client(Subject.service("api"), grant=True)
        workload, _ = SEND.submit(requester, EmailIn(to="ada"), key="k")
        assert env.run(worker) == 1
        assert SEND.output_of(env.get(workload.workload_id)) == EmailOut(message_id="ADA")
