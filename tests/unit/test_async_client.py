"""``feltdb.client.AsyncClient`` mirrors ``feltdb.client.Client``: every public method,
with the same signature and docstring, a coroutine function (so a call added to one and not
the other fails here); and both carry a request alike (the same request sent, the same
timeout, ``204`` and ``Retry-After`` read the same), checked against a mock transport.
"""

from __future__ import annotations

import asyncio
import inspect
import json
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from feltdb.client import AsyncClient, Client, ClientError
from feltdb.client.calls import Answer, Awaiting, Blocking, Request, Steps, ask, operation

NOT_AWAITED = {"use_token": "it sends nothing: the next request carries the new token"}
"""Client's public methods that stay plain on AsyncClient, and why."""


def public_methods(cls: type) -> dict[str, Any]:
    return {
        name: getattr(cls, name)
        for name in dir(cls)
        if not name.startswith("_") and inspect.isfunction(getattr(cls, name))
    }


def test_every_public_method_of_client_is_awaitable_on_the_async_client():
    mirrored, plain = public_methods(Client), public_methods(AsyncClient)
    assert len(mirrored) >= 50  # the protocol's calls: batches, limits, schedules...
    assert set(plain) - set(mirrored) == {"aclose"}
    assert set(mirrored) <= set(plain), set(mirrored) - set(plain)
    for name, method in mirrored.items():
        twin = plain[name]
        assert inspect.signature(twin) == inspect.signature(method), name
        assert inspect.iscoroutinefunction(twin) is (name not in NOT_AWAITED), name
        assert inspect.getdoc(twin), name  # help() says what it does
        if name != "close":  # the one call each client carries out itself
            assert inspect.getdoc(twin) == inspect.getdoc(method), name
    assert isinstance(Client.subject, property) and isinstance(AsyncClient.subject, property)
    assert inspect.iscoroutinefunction(AsyncClient.__aenter__)
    assert inspect.iscoroutinefunction(AsyncClient.__aexit__)
    assert inspect.iscoroutinefunction(AsyncClient.aclose)


def test_a_shared_call_shows_its_own_signature_and_docstring():
    signature = inspect.signature(AsyncClient.admit)
    assert "definition_id" in signature.parameters and "idempotency_key" in signature.parameters
    assert signature.return_annotation == "tuple[Workload, bool]"
    assert str(inspect.signature(Client.get)) == "(self, workload_id: 'str') -> 'Workload'"
    assert "The committed workload." in (AsyncClient.get.__doc__ or "")


Handler = Callable[[httpx.Request], httpx.Response]


def over(handler: Handler, kind: str) -> Callable[[str, Any], Any]:
    """Call ``method(**arguments)`` of a client of ``kind`` whose requests ``handler``
    answers (its own pool replaced by one on a mock transport).
    """

    def call(method: str, arguments: Any) -> Any:
        if kind == "http":
            with Client("http://authority.invalid", "token", timeout=7.0) as felt:
                felt._http = httpx.Client(
                    base_url=felt.url, transport=httpx.MockTransport(handler), timeout=7.0
                )
                return getattr(felt, method)(**arguments)

        async def run() -> Any:
            async with AsyncClient("http://authority.invalid", token="token", timeout=7.0) as felt:
                felt._http = httpx.AsyncClient(
                    base_url=felt.url, transport=httpx.MockTransport(handler), timeout=7.0
                )
                return await getattr(felt, method)(**arguments)

        return asyncio.run(run())

    return call


@pytest.mark.parametrize("kind", ["http", "async"])
def test_a_long_poll_waits_longer_and_a_204_answers_none(kind: str):
    seen: list[tuple[str, dict[str, Any], float]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        timeout = request.extensions["timeout"]["read"]
        seen.append((request.url.path, json.loads(request.content), timeout))
        return httpx.Response(204)

    call = over(handler, kind)
    assert call("claim_next", {"wait_ms": 2_500, "capabilities": ["b", "a"]}) is None
    assert seen == [
        ("/v1/claims", {"lease_ms": 30_000, "wait_ms": 2_500, "capabilities": ["a", "b"]}, 9.5)
    ]


@pytest.mark.parametrize("kind", ["http", "async"])
def test_a_refusal_carries_the_servers_code_status_and_retry_after(kind: str):
    def handler(request: httpx.Request) -> httpx.Response:
        body = {"error": {"code": "WORKLOAD_NOT_YET_ELIGIBLE", "message": "not yet"}}
        return httpx.Response(425, json=body, headers={"Retry-After": "12"})

    with pytest.raises(ClientError) as early:
        over(handler, kind)("claim", {"workload_id": "a/b"})
    assert (early.value.code, early.value.status, early.value.retry_after) == (
        "WORKLOAD_NOT_YET_ELIGIBLE",
        425,
        12,
    )
    assert early.value.message == "not yet"


@pytest.mark.parametrize("kind", ["http", "async"])
def test_a_body_that_is_not_json_is_refused_before_it_is_sent(kind: str):
    def handler(request: httpx.Request) -> httpx.Response:
        raise AssertionError("nothing is sent")

    with pytest.raises(ClientError) as invalid:
        over(handler, kind)("checkpoint", {
            "workload_id": "w", "claim_id": "c", "fencing_token": 1, "state": float("nan"),
        })  # fmt: skip
    assert (invalid.value.code, invalid.value.status) == ("WORKLOAD_INVALID", None)


class Scripted:
    """Answers each request with the next of ``answers`` (an :class:`Answer`, or an error
    raised as a carrier raises a refusal), and keeps what it was asked.
    """

    def __init__(self, answers: list[Answer | Exception]) -> None:
        self.answers = answers
        self.asked: list[Request] = []

    def answer(self, request: Request) -> Answer:
        self.asked.append(request)
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer


class Steps2:
    """A call of two requests, the second built from the first's answer."""

    @operation
    def twice(self, name: str, *, count: int = 1) -> Steps[list[Any]]:
        """Read ``name``, then what it points at."""
        first = yield from ask("GET", f"/v1/{name}", params={"count": count})
        second = yield Request("POST", f"/v1/{first['next']}", {"n": count}, none_on_204=True)
        return [first["next"], second.document]


class BlockingSteps(Blocking, Steps2):
    def __init__(self, script: Scripted) -> None:
        self.script = script

    def _exchange(self, request: Request) -> Answer:
        return self.script.answer(request)


class AwaitingSteps(Awaiting, Steps2):
    def __init__(self, script: Scripted) -> None:
        self.script = script

    async def _exchange(self, request: Request) -> Answer:
        await asyncio.sleep(0)  # a real await between the requests
        return self.script.answer(request)


def driven(kind: str, script: Scripted) -> Any:
    if kind == "http":
        return BlockingSteps(script).twice("a", count=3)
    return asyncio.run(AwaitingSteps(script).twice("a", count=3))


@pytest.mark.parametrize("kind", ["http", "async"])
def test_a_call_of_several_requests_runs_alike_blocking_and_awaited(kind: str):
    script = Scripted([Answer(200, {"next": "b"}), Answer(204, None)])
    assert driven(kind, script) == ["b", None]
    assert script.asked == [
        Request("GET", "/v1/a", params={"count": 3}),
        Request("POST", "/v1/b", {"n": 3}, none_on_204=True),
    ]
    refused = ClientError("WORKLOAD_NOT_FOUND", "b is gone", status=404)
    script = Scripted([Answer(200, {"next": "b"}), refused])
    with pytest.raises(ClientError) as raised:
        driven(kind, script)
    assert raised.value is refused and len(script.asked) == 2
    assert inspect.iscoroutinefunction(AwaitingSteps.twice)
    assert str(inspect.signature(AwaitingSteps.twice)) == str(
        inspect.signature(BlockingSteps.twice)
    ) == "(self, name: 'str', *, count: 'int' = 1) -> 'list[Any]'"  # fmt: skip
