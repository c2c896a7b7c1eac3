"""Calling a handler: a sync one on the attempt's thread, an ``async`` one on the worker's
one event loop (a thread of its own, started on first use), while the attempt's thread
waits for it.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import inspect
import logging
import threading
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

from feltdb.tracing import current
from feltdb.worker.attempt import Attempt
from feltdb.worker.context import Context

if TYPE_CHECKING:
    from feltdb.tracing import Span

log = logging.getLogger("feltdb.worker")

Handler = Callable[[Context], Any]
"""A handler: ``def handler(ctx) -> output`` or ``async def handler(ctx) -> output``."""

T = TypeVar("T")


class HandlerLoop:
    """The event loop of a worker's ``async`` handlers, and the calling of any handler."""

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lock = threading.Lock()
        self._is_async: dict[Handler, bool] = {}  # asked once a handler, not per attempt

    def invoke(self, handler: Handler, ctx: Context, attempt: Attempt) -> Any:
        """``handler(ctx)``'s output (an ``async`` handler's awaited; cancelled at once
        when the attempt already was asked to stop).
        """
        if not self._awaits(handler):
            return handler(ctx)
        coroutine: Awaitable[Any] = handler(ctx)
        awaited = _awaited(coroutine, attempt.span)
        future = asyncio.run_coroutine_threadsafe(awaited, self._event_loop())
        attempt.future = future
        if attempt.cancel_requested.is_set() or attempt.lost.is_set():
            future.cancel()
        return future.result()

    def _awaits(self, handler: Handler) -> bool:
        """Whether ``handler`` is ``async`` (asked once a handler, not once an attempt)."""
        try:
            known = self._is_async.get(handler)
        except TypeError:  # a callable object that cannot be hashed: asked each time
            return inspect.iscoroutinefunction(handler)
        if known is None:
            known = self._is_async[handler] = inspect.iscoroutinefunction(handler)
        return known

    def _event_loop(self) -> asyncio.AbstractEventLoop:
        """The worker's one event loop for ``async`` handlers, started on first use."""
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                threading.Thread(
                    target=loop.run_forever, name="feltdb-async-handlers", daemon=True
                ).start()
                self._loop = loop
            return self._loop

    def close(self) -> None:
        """Cancel what still runs on the async handlers' loop (handlers abandoned at
        shutdown), then stop and close it; the next run starts a new one.
        """
        with self._lock:
            loop, self._loop = self._loop, None
        if loop is None:
            return
        with contextlib.suppress(concurrent.futures.TimeoutError, RuntimeError):
            asyncio.run_coroutine_threadsafe(_cancel_all(), loop).result(timeout=5)
        loop.call_soon_threadsafe(loop.stop)
        for _ in range(100):  # up to 5 s for run_forever to return
            if not loop.is_running():
                loop.close()
                return
            time.sleep(0.05)
        log.warning("an async handler ignores cancellation; its event loop is left running")


async def _awaited(coroutine: Awaitable[T], span: Span | None = None) -> T:
    with current(span):  # the attempt's run span, when tracing (a task has its own context)
        return await coroutine


async def _cancel_all() -> None:
    """Cancel every other task of the running loop and wait for them to end."""
    tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
