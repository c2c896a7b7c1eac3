"""``/healthz``, ``/readyz`` and ``/metrics``: no token, outside ``/v1``.

The probes are answered on the event loop, never in the worker threads that the API's
routes share (40 of them), so requests that keep every worker thread busy (slow lists, a
store whose write lock is held) never keep a health check waiting. ``/healthz`` says the
process answers; ``/readyz`` says the store can commit now: a write transaction opened and
committed empty (:meth:`~feltdb.storage.readiness.Readiness.ready`) on a thread of its own,
answered ``503`` when it fails or takes over :data:`READY_TIMEOUT_S`, and, while such a
check is still waiting for the store, ``503`` at once without starting another.
"""

from __future__ import annotations

import asyncio
import threading

from fastapi import FastAPI
from fastapi.responses import JSONResponse, Response

from feltdb.errors import WorkloadError
from feltdb.server.errors import as_told_to_clients
from feltdb.server.metrics import Metrics
from feltdb.work.store import WorkloadStore

READY_TIMEOUT_S = 2.0
"""How long ``/readyz`` waits for the store to commit before it answers ``503``."""


class ReadinessCheck:
    """At most one readiness check of ``store`` at a time, each on a daemon thread of its
    own (a check stuck on the store's lock never holds up the process's exit).
    """

    def __init__(self, store: WorkloadStore) -> None:
        self._store = store
        self._pending: asyncio.Future[int] | None = None

    async def check(self) -> int | str:
        """The store's revision once it committed, or why it is not ready."""
        if self._pending is not None and not self._pending.done():
            return "the last readiness check is still waiting for the store to commit"
        loop = asyncio.get_running_loop()
        pending: asyncio.Future[int] = loop.create_future()
        # Read once settled, so a failure that came after the probe stopped waiting is
        # not reported again as never retrieved.
        pending.add_done_callback(lambda done: done.cancelled() or done.exception())
        self._pending = pending
        threading.Thread(
            target=self._run, args=(loop, pending), name="feltdb-readyz", daemon=True
        ).start()
        try:
            return await asyncio.wait_for(asyncio.shield(pending), READY_TIMEOUT_S)
        except TimeoutError:
            return f"the store did not commit within {READY_TIMEOUT_S:g} s"
        except WorkloadError as error:
            return as_told_to_clients(error, self._store.db.target).message

    def _run(self, loop: asyncio.AbstractEventLoop, pending: asyncio.Future[int]) -> None:
        try:
            revision = self._store.db.ready()
        except BaseException as error:  # handed to the waiting probe
            loop.call_soon_threadsafe(_settle, pending, None, error)
        else:
            loop.call_soon_threadsafe(_settle, pending, revision, None)


def _settle(
    pending: asyncio.Future[int], revision: int | None, error: BaseException | None
) -> None:
    if pending.done():
        return
    if error is not None:
        pending.set_exception(error)
    else:
        assert revision is not None
        pending.set_result(revision)


def add_probes(app: FastAPI, store: WorkloadStore, metrics: Metrics) -> None:
    """Serve ``/healthz``, ``/readyz`` and ``/metrics`` for ``store`` and ``metrics``."""
    readiness = ReadinessCheck(store)

    @app.get("/healthz", summary="The process is up")
    async def healthz() -> JSONResponse:
        return JSONResponse({"status": "ok"})

    @app.get(
        "/readyz",
        summary="The store can commit now",
        responses={503: {"description": "It cannot (the reason says why)"}},
    )
    async def readyz() -> JSONResponse:
        found = await readiness.check()
        if isinstance(found, str):
            return JSONResponse({"status": "unavailable", "reason": found}, status_code=503)
        return JSONResponse({"status": "ready", "revision": found})

    @app.get("/metrics", summary="Prometheus metrics (no token)", include_in_schema=False)
    def prometheus() -> Response:
        body, content_type = metrics.render()
        return Response(body, media_type=content_type)
