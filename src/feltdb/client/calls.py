"""The HTTP clients' calls, written once without I/O (sans-IO) for both clients.

Each call of :class:`~feltdb.client.Client` and :class:`~feltdb.client.AsyncClient` is a
generator, its :data:`Steps`: it builds each request it needs as a :class:`Request`, yields
it, is sent back the server's :class:`Answer`, and returns the record the call answers. The
two clients differ only in how a request is carried: :class:`Blocking` runs the steps over
an :class:`httpx.Client`, :class:`Awaiting` awaits each over an :class:`httpx.AsyncClient`.
Both carry a request the same way (:mod:`feltdb.client.carrying`): the same refusals, the
same ``WORKLOAD_STORAGE_FAILURE`` for an answer that is not a JSON object.

:func:`operation` makes a generator method of a mixin a method of both clients: on a
``Client`` it answers the record, on an ``AsyncClient`` it is a coroutine function
answering it, with the generator's name, parameters and docstring (``help()`` shows them).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Coroutine, Generator, Mapping
from dataclasses import dataclass
from typing import Any, Concatenate, Generic, ParamSpec, TypeVar, overload

P = ParamSpec("P")
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Request:
    """One request of a call: ``method`` on ``path`` (under the server's root), a JSON
    ``body`` and query ``params`` if any.

    ``wait_ms`` is how long the server may hold it (a long-poll): the client waits that
    much longer than its ``timeout``. ``document``: the answer must be a JSON object (else
    it is a ``WORKLOAD_STORAGE_FAILURE``); ``none_on_204``: a ``204`` answers nothing.
    """

    method: str
    path: str
    body: Mapping[str, Any] | None = None
    params: Mapping[str, Any] | None = None
    wait_ms: int = 0
    document: bool = True
    none_on_204: bool = False


@dataclass(frozen=True, slots=True)
class Answer:
    """A successful answer: its status and, when the request asked for one, its JSON
    object (``None`` for a ``204`` asked ``none_on_204``, or an answer not asked for).
    """

    status: int
    document: dict[str, Any] | None


Steps = Generator[Request, Answer, T]
"""A call: the requests it yields, each sent back its answer, and what it returns."""


def ask(
    method: str,
    path: str,
    body: Mapping[str, Any] | None = None,
    *,
    params: Mapping[str, Any] | None = None,
    wait_ms: int = 0,
) -> Steps[dict[str, Any]]:
    """Make one request; its answer's JSON object (read by ``yield from``)."""
    answer = yield Request(method, path, body, params, wait_ms)
    assert answer.document is not None  # a request asking a document is answered one
    return answer.document


def send(method: str, path: str, body: Mapping[str, Any] | None = None) -> Steps[None]:
    """One request whose answer carries nothing the call needs (a ``204``, say)."""
    yield Request(method, path, body, document=False)


class Blocking:
    """A client that carries each request and waits for its answer (``Client``)."""

    def _exchange(self, request: Request) -> Answer:
        raise NotImplementedError  # the client's carrier

    def _run(self, steps: Steps[T]) -> T:
        """Carry each request of ``steps`` in turn; what they return."""
        try:
            request = next(steps)
            while True:
                request = steps.send(self._exchange(request))
        except StopIteration as done:
            result: T = done.value
            return result
        finally:
            steps.close()


class Awaiting:
    """A client that awaits each request's answer (``AsyncClient``)."""

    async def _exchange(self, request: Request) -> Answer:
        raise NotImplementedError  # the client's carrier

    async def _run(self, steps: Steps[T]) -> T:
        """Await each request of ``steps`` in turn; what they return."""
        try:
            request = next(steps)
            while True:
                request = steps.send(await self._exchange(request))
        except StopIteration as done:
            result: T = done.value
            return result
        finally:
            steps.close()


class Operation(Generic[P, T]):
    """A call of both clients, defined once as a generator method (see :func:`operation`).

    Read on a ``Blocking`` client it is a method answering ``T``; on an ``Awaiting`` one a
    coroutine method; on either class, the plain function (what ``help()`` and
    :func:`inspect.signature` read).
    """

    def __init__(self, steps: Callable[Concatenate[Any, P], Steps[T]]) -> None:
        self.steps = steps
        self.blocking = _method(steps, awaiting=False)
        self.awaiting = _method(steps, awaiting=True)

    @overload
    def __get__(self, instance: None, owner: type[Any]) -> Callable[..., Any]: ...
    @overload
    def __get__(self, instance: Blocking, owner: type[Any]) -> Callable[P, T]: ...
    @overload
    def __get__(
        self, instance: Awaiting, owner: type[Any]
    ) -> Callable[P, Coroutine[Any, Any, T]]: ...
    def __get__(self, instance: object, owner: type[Any]) -> Any:
        method = self.awaiting if issubclass(owner, Awaiting) else self.blocking
        return method if instance is None else method.__get__(instance, owner)


def operation(steps: Callable[Concatenate[Any, P], Steps[T]]) -> Operation[P, T]:
    """``steps`` (a generator method of a mixin) as a method of both clients."""
    return Operation(steps)


def _method(steps: Callable[..., Steps[Any]], *, awaiting: bool) -> Callable[..., Any]:
    """The function a client's class shows for ``steps``: its name, docstring and
    parameters, answering what the steps return (``Steps[X]`` becomes ``X``).
    """
    if awaiting:

        async def method(self: Awaiting, /, *args: Any, **kwargs: Any) -> Any:
            return await self._run(steps(self, *args, **kwargs))

    else:

        def method(self: Blocking, /, *args: Any, **kwargs: Any) -> Any:  # type: ignore[misc]
            return self._run(steps(self, *args, **kwargs))

    functools.update_wrapper(method, steps)
    del method.__wrapped__  # type: ignore[attr-defined]  # its own signature, not the steps'
    signature = inspect.signature(steps)
    answered = _answered(signature.return_annotation)
    method.__signature__ = signature.replace(return_annotation=answered)  # type: ignore[attr-defined]
    method.__annotations__ = {**steps.__annotations__, "return": answered}
    return method


def _answered(annotation: Any) -> Any:
    # Annotations are strings here (postponed evaluation): "Steps[X]" reads as "X".
    text = str(annotation)
    if text.startswith("Steps[") and text.endswith("]"):
        return text[len("Steps[") : -1]
    return annotation


def shaped_as(
    method: Callable[Concatenate[Any, P], Any],
) -> Callable[[Callable[..., Steps[T]]], Callable[Concatenate[Any, P], Steps[T]]]:
    """Declare a generator method's parameters and docstring as ``method``'s (a method
    :class:`~feltdb.client.protocol.WorkloadClient` defines), so they are written once.
    """

    def shape(steps: Callable[..., Steps[T]]) -> Callable[Concatenate[Any, P], Steps[T]]:
        steps.__signature__ = inspect.signature(method)  # type: ignore[attr-defined]
        steps.__doc__ = method.__doc__
        steps.__annotations__ = dict(method.__annotations__)
        return steps

    return shape
