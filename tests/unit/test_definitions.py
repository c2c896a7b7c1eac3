"""Typed definitions alone: what a Definition accepts when made, the submission it builds,
and the input and output it checks, with pydantic models and msgspec Structs alike.
"""

from __future__ import annotations

import asyncio
import warnings
from typing import Any

import msgspec
import pytest
from pydantic import BaseModel, Field

import feltdb
from feltdb import Definition, WorkloadError, WorkloadRetryPolicy
from feltdb.records.workload import Workload

# ------------------------------------------------------------------ two model kinds


class AddressP(BaseModel):
    city: str


class EmailInP(BaseModel):
    to: str
    copies: int = 1
    address: AddressP | None = None


class EmailOutP(BaseModel):
    message_id: str


class AddressM(msgspec.Struct):
    city: str


class EmailInM(msgspec.Struct):
    to: str
    copies: int = 1
    address: AddressM | None = None


class EmailOutM(msgspec.Struct):
    message_id: str


KINDS = {
    "pydantic": (EmailInP, EmailOutP, AddressP),
    "msgspec": (EmailInM, EmailOutM, AddressM),
}


@pytest.fixture(params=sorted(KINDS))
def models(request: pytest.FixtureRequest) -> tuple[type[Any], type[Any], type[Any]]:
    return KINDS[request.param]


def refused(call: Any, *args: Any, **kwargs: Any) -> WorkloadError:
    with pytest.raises(WorkloadError) as caught:
        call(*args, **kwargs)
    assert caught.value.code == "WORKLOAD_INVALID"
    return caught.value


def test_definition_is_a_public_name():
    assert feltdb.Definition is Definition and "Definition" in feltdb.__all__


# ------------------------------------------------------------------ the submission


def test_the_submission_carries_the_input_as_json_and_the_definitions_fields(models):
    email_in, email_out, address = models
    send = Definition(
        "send-email", input=email_in, output=email_out, revision="v2",
        capabilities={"email:send"}, retry_policy={"max_attempts": 5}, priority=3,
    )  # fmt: skip

    value = email_in(to="ada@example.com", address=address(city="Paris"))
    fields = send.submission(value, key="k1").model_dump(mode="json", exclude_unset=True)

    assert fields == {
        "definition_id": "send-email",
        "definition_revision": "v2",
        "input": {"to": "ada@example.com", "copies": 1, "address": {"city": "Paris"}},
        "capability_snapshot": ["email:send"],
        "priority": 3,
        "retry_policy": WorkloadRetryPolicy(max_attempts=5).to_json(),
        "idempotency_key": "k1",
    }
    assert send.revision == "v2" and send.capabilities == {"email:send"}


def test_a_dict_of_the_fields_is_checked_and_completed_by_the_model(models):
    email_in, _, _ = models
    send = Definition("send-email", input=email_in)

    data = send.submission({"to": "ada@example.com"}, key="k").model_dump(mode="json")["input"]

    assert data == {"to": "ada@example.com", "copies": 1, "address": None}


def test_a_value_that_does_not_fit_is_refused_naming_each_field_by_path(models):
    email_in, _, _ = models
    send = Definition("send-email", input=email_in)

    missing = refused(send.submission, {"copies": 2}, key="k")
    nested = refused(send.submission, {"to": "a", "address": {"city": 5}}, key="k")

    assert missing.details == {"fields": ["input.to"]}
    assert f"does not match {email_in.__name__}" in missing.message
    assert "input.to: Field required" in missing.message
    assert nested.details == {"fields": ["input.address.city"]}


def test_an_unvalidated_instance_is_checked_too():
    # A msgspec Struct is not validated when made, nor is a model_construct'ed model: what
    # is admitted must be what the worker's model parses.
    for value, send in [
        (EmailInM(to=5), Definition("m", input=EmailInM)),  # type: ignore[arg-type]
        (EmailInP.model_construct(to=5), Definition("p", input=EmailInP)),
    ]:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            error = refused(send.submission, value, key="k")
        assert error.details == {"fields": ["input.to"]}


def test_another_model_or_a_plain_value_is_refused_by_name():
    send = Definition("send-email", input=EmailInP)

    for value, named in [(EmailInM(to="a"), "EmailInM"), ("ada", "str"), (None, "NoneType")]:
        error = refused(send.submission, value, key="k")
        assert error.details == {"fields": ["input"]}
        assert f"instance of EmailInP or a dict of its fields, not {named}" in error.message


def test_a_call_gives_its_own_fields_over_the_definitions():
    send = Definition("send-email", input=EmailInP, priority=1, environment="staging")

    fields = send.submission(
        {"to": "a"}, key="k", priority=9, not_before=100, concurrency_key="c",
        concurrency_limit=2, capabilities=["x:y"],
    ).model_dump(mode="json", exclude_unset=True)  # fmt: skip

    assert fields["priority"] == 9 and fields["environment"] == "staging"
    assert fields["not_before"] == 100 and fields["capability_snapshot"] == ["x:y"]
    assert (fields["concurrency_key"], fields["concurrency_limit"]) == ("c", 2)


def test_a_call_cannot_change_what_the_definition_is():
    send = Definition("send-email", input=EmailInP)

    for option in ("revision", "definition_id", "input", "idempotency_key", "bogus"):
        error = refused(send.submission, {"to": "a"}, key="k", **{option: "x"})
        assert error.details == {"fields": [option]}
    bad = refused(send.submission, {"to": "a"}, key="k", priority="high")
    assert bad.details == {"fields": ["priority"]}


# ------------------------------------------------------------------ made once, checked once


@pytest.mark.parametrize(
    ("arguments", "field"),
    [
        ({"definition_id": ""}, "definition_id"),
        ({"definition_id": "x\x00"}, "definition_id"),
        ({"input": dict}, "input"),
        ({"input": EmailInP(to="a")}, "input"),
        ({"output": int}, "output"),
        ({"capabilities": ["email:send", "bad\x00"]}, "capabilities"),
        ({"capabilities": "email:send"}, "capabilities"),
        ({"capabilities": ["x" * 300]}, "capabilities"),
        ({"revision": " "}, "revision"),
        ({"environment": ""}, "environment"),
        ({"retry_policy": {"max_attempts": -1}}, "retry_policy.max_attempts"),
        ({"timeouts": {"execution_ms": "soon"}}, "timeouts.execution_ms"),
        ({"priority": 2**40}, "priority"),
        ({"approval": {"approver_kinds": 3}}, "approval.approver_kinds"),
        ({"not_before": 5}, "not_before"),
        ({"max_attempts": 5}, "max_attempts"),
    ],
)
def test_a_bad_argument_is_refused_when_the_definition_is_made(arguments, field):
    given: dict[str, Any] = {"definition_id": "send-email", "input": EmailInP, **arguments}

    error = refused(Definition, given.pop("definition_id"), **given)

    assert error.details == {"fields": [field]}, error.message
    assert field in error.message


def test_a_definition_is_frozen():
    send = Definition("send-email", input=EmailInP)

    with pytest.raises(AttributeError, match="frozen"):
        send.definition_id = "other"  # type: ignore[misc]
    with pytest.raises(TypeError):
        send.fields["priority"] = 3  # type: ignore[index]
    assert repr(send) == "Definition('send-email', input=EmailInP, output=None, revision='1')"


# ------------------------------------------------------------------ outputs


def test_an_output_is_checked_against_its_model_and_encoded(models):
    _, email_out, _ = models
    send = Definition("send-email", input=EmailInP, output=email_out)

    assert send.encode_output(email_out(message_id="m1")) == {"message_id": "m1"}
    assert send.encode_output({"message_id": "m1"}) == {"message_id": "m1"}
    error = refused(send.encode_output, {"sent": 1})
    assert error.details == {"fields": ["output.message_id"]}
    assert refused(send.encode_output, None).details == {"fields": ["output"]}


def test_without_an_output_model_any_json_passes():
    send = Definition("send-email", input=EmailInP)

    assert send.encode_output({"anything": [1, 2]}) == {"anything": [1, 2]}
    assert send.encode_output(None) is None


def workload_with(definition_id: str, output: Any) -> Workload:
    return msgspec.convert(
        {
            "workload_id": "wl_1", "definition_id": definition_id,
            "result": {"result_id": "r", "output": output},
        },
        type=_Shape,
    )  # type: ignore[return-value]  # fmt: skip


class _Result(msgspec.Struct):
    result_id: str
    output: Any


class _Shape(msgspec.Struct):
    """The three fields of a workload ``output_of`` reads."""

    workload_id: str
    definition_id: str
    result: _Result | None


def test_output_of_parses_a_result_and_refuses_another_definitions_work(models):
    _, email_out, _ = models
    send = Definition("send-email", input=EmailInP, output=email_out)

    assert send.output_of(workload_with("send-email", {"message_id": "m"})) == email_out(
        message_id="m"
    )
    assert refused(send.output_of, workload_with("other", {})).details == {
        "fields": ["definition_id"]
    }
    bad = refused(send.output_of, workload_with("send-email", {"id": 1}))
    assert bad.details == {"fields": ["output.message_id"]}


# ------------------------------------------------------------------ targets


class AsyncClient:
    """Stands for an async client: its ``submit`` is a coroutine function."""

    def __init__(self) -> None:
        self.sent: list[Any] = []

    async def submit(self, submission: Any) -> tuple[Any, bool]:
        self.sent.append(submission)
        return "admitted", True


def test_an_async_client_takes_submit_async_and_sync_submit_sends_nothing():
    send = Definition("send-email", input=EmailInP)
    client = AsyncClient()

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a coroutine never awaited would warn
        error = refused(send.submit, client, {"to": "a"}, key="k")  # type: ignore[arg-type]
    answer = asyncio.run(send.submit_async(client, {"to": "a"}, key="k"))

    assert "submit_async" in error.message and error.details == {"fields": ["target"]}
    assert answer == ("admitted", True) and len(client.sent) == 1
    assert client.sent[0].input == {"to": "a", "copies": 1, "address": None}


def test_a_bad_input_reaches_no_client():
    send = Definition("send-email", input=EmailInP)
    client = AsyncClient()

    refused(asyncio.run, send.submit_async(client, {"to": 1}, key="k"))

    assert client.sent == []


def test_a_store_needs_the_grant_the_submission_is_made_under():
    class Store:
        def admit(self, request: Any) -> Any:
            raise AssertionError("nothing is admitted without a grant")

    send = Definition("send-email", input=EmailInP)

    error = refused(send.submit, Store(), {"to": "a"}, key="k")  # type: ignore[arg-type]

    assert error.details == {"fields": ["grant"]}


# ------------------------------------------------------------------ names and numbers


class SenderP(BaseModel):
    from_: str = Field(alias="from")
    ratio: float | None = None


class SenderM(msgspec.Struct, rename={"from_": "from"}):
    from_: str
    ratio: float | None = None


@pytest.mark.parametrize("sender", [SenderP, SenderM])
def test_fields_renamed_by_the_model_are_stored_and_read_by_their_json_names(sender):
    send = Definition("send", input=sender, output=sender)
    given = sender(**{"from": "ada"}) if sender is SenderP else sender(from_="ada")

    for value in (given, {"from": "ada"}):
        stored = send.submission(value, key="k").model_dump(mode="json")["input"]
        assert stored == {"from": "ada", "ratio": None}
        assert send.parse_input(stored).from_ == "ada"  # what the worker's handler gets
    assert send.encode_output(given) == {"from": "ada", "ratio": None}


@pytest.mark.parametrize("sender", [SenderP, SenderM])
@pytest.mark.parametrize("number", [float("nan"), float("inf")])
def test_a_number_json_cannot_hold_is_refused_not_stored_as_null(sender, number):
    send = Definition("send", input=sender)

    error = refused(send.submission, {"from": "ada", "ratio": number}, key="k")

    assert "must be JSON" in error.message
