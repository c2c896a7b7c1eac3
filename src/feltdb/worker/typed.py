"""Typed handlers: ``@worker.handler(definition)`` for a :class:`~feltdb.definitions.Definition`.

A typed handler is called as ``handler(ctx, value)`` (``async`` or not): ``ctx`` the
:class:`~feltdb.worker.Context`, as every handler gets, and ``value`` the workload's input
parsed into the definition's input model. What it returns is checked against the output
model (an instance of it, or a dict of its fields) and completed as its JSON.

Each fails the attempt as :class:`Permanent` would, naming each bad field:

- input that does not parse (work submitted untyped, or under an older model): kind
  ``invalid_input``, effect ``none``, before the handler is called: dead-lettered unless
  the retry policy lists the kind;
- output that does not match: kind ``invalid_output`` (as when the authority refuses an
  output), effect ``unknown``, since the handler ran: the authority decides a failure of
  unknown effect as ``worker_failure`` (:mod:`feltdb.work.retry`), retried by the default
  policy, as it must be when what a handler did is not known.

A handler that returns ``None`` once ``ctx.cancelled`` is set (it stopped early) is not
checked: what it returns then is not recorded.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar, cast

from feltdb.definitions import Definition
from feltdb.errors import WorkloadError
from feltdb.typed_models import Model
from feltdb.worker.context import Context
from feltdb.worker.failures import INVALID_OUTPUT_KIND, Permanent
from feltdb.worker.handlers import Handler

In = TypeVar("In", bound=Model)
Out = TypeVar("Out")

INVALID_INPUT_KIND = "invalid_input"
"""The kind reported when a workload's input does not parse into its definition's model."""

TypedHandler = Callable[[Context, In], Out | Awaitable[Out]]
"""A typed handler: ``def handler(ctx, value: In) -> Out`` (or ``async def``)."""


def handler_of(definition: str | Definition[Any, Any], function: Any) -> tuple[str, Handler]:
    """The definition id ``function`` is registered under, and the plain handler that
    runs it (``function`` itself for a definition id; see :func:`typed_handler`).
    """
    if isinstance(definition, str):
        return definition, function
    return definition.definition_id, typed_handler(definition, function)


def typed_handler(definition: Definition[In, Out], function: TypedHandler[In, Out]) -> Handler:
    """The plain handler (``handler(ctx)``) that runs ``function`` for ``definition``:
    the input parsed before, the output checked and encoded after; ``async`` when
    ``function`` is.
    """
    if inspect.iscoroutinefunction(function):

        @functools.wraps(function)
        async def run_async(ctx: Context) -> Any:
            running = cast(Awaitable[Out], function(ctx, parsed_input(definition, ctx)))
            return encoded_output(definition, ctx, await running)

        return run_async

    @functools.wraps(function)
    def run(ctx: Context) -> Any:
        return encoded_output(definition, ctx, function(ctx, parsed_input(definition, ctx)))

    return run


def parsed_input(definition: Definition[In, Any], ctx: Context) -> In:
    """``ctx.input`` as the definition's input model.

    Raises:
        Permanent: kind ``invalid_input``, effect ``none``, naming each bad field.
    """
    try:
        return definition.parse_input(ctx.input)
    except WorkloadError as error:
        raise Permanent(error.message, kind=INVALID_INPUT_KIND, effect="none") from None


def encoded_output(definition: Definition[Any, Any], ctx: Context, output: Any) -> Any:
    """``output`` as the workload's JSON output, checked against the output model.

    Raises:
        Permanent: kind ``invalid_output``, effect ``unknown``, naming each bad field.
    """
    if output is None and ctx.cancelled.is_set():
        return None
    try:
        return definition.encode_output(output)
    except WorkloadError as error:
        raise Permanent(error.message, kind=INVALID_OUTPUT_KIND, effect="unknown") from None
