"""The application factory: a FastAPI app over one store and one keyring.

:func:`create_app` holds no module-level state: everything a request needs is the
:class:`~feltdb.server.routes.ServerState` of the app it builds (``app.state.server``), so
tests may build as many apps as they like. The app's lifespan starts and stops the
maintenance loop (:class:`~feltdb.server.maintenance.Maintenance`).

Blocking store calls run in the threadpool (plain ``def`` endpoints; the store is
thread-safe); the long-poll of ``POST /v1/claims`` waits on the event loop, not on a
thread.

The app acts through a store of its own over the given store's database, and subscribes to
its commits (``WorkloadStore.observe``): :class:`~feltdb.server.metrics.Metrics` counts
them, and :class:`~feltdb.server.wakeup.Wakeup` wakes long-polls for those that may have
made work claimable; on PostgreSQL it also wakes them for the hints the database's other
processes announce (:class:`~feltdb.storage.base.Wakeups`). So an app's counters are its
own commits' (its routes' and its maintenance loop's), whatever else shares the store.
``GET /metrics`` (no token) answers them (see :mod:`feltdb.server.metrics`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager

from fastapi import FastAPI

from feltdb import __version__
from feltdb.auth.tokens import Keyring
from feltdb.server.docs import add_docs
from feltdb.server.errors import MAX_BODY_BYTES, BodyLimit, install_error_handlers
from feltdb.server.limits import SIGN_INS_PER_CLIENT, SignInLimits
from feltdb.server.maintenance import Maintenance
from feltdb.server.metrics import Metrics, RequestMetrics
from feltdb.server.openapi import declare_lease_cap
from feltdb.server.probes import add_probes
from feltdb.server.routes import ServerState, build_router
from feltdb.server.ui import add_ui
from feltdb.server.wakeup import Wakeup
from feltdb.work.retention import RetentionPolicy
from feltdb.work.store import WorkloadStore

log = logging.getLogger("feltdb.server")

DESCRIPTION = (
    "A durable workload authority over HTTP. Every /v1 route needs "
    "`Authorization: Bearer <token>`; errors answer "
    '`{"error": {"code", "message", "details"}}`. Request bodies are limited to '
    f"{MAX_BODY_BYTES} bytes."
)


def wall_clock() -> int:
    """The current unix second: the server's clock unless a test gives another."""
    return int(time.time())


def create_app(
    store: WorkloadStore,
    keyring: Keyring,
    *,
    clock: Callable[[], int] | None = None,
    maintenance_interval_s: float | None = 1.0,
    sign_ins_per_client: int = SIGN_INS_PER_CLIENT,
    retention: RetentionPolicy | None = None,
) -> FastAPI:
    """The HTTP API over ``store``, trusting tokens signed by ``keyring``.

    Args:
        store: the authority every route calls (through a store of the app's own over
            its database); not closed by the app.
        keyring: verifies bearer tokens.
        clock: the unix-seconds clock every operation uses (default: the wall clock).
        maintenance_interval_s: how often the lifespan's maintenance loop runs; ``None``
            runs none (tests call :meth:`Maintenance.run_once` themselves).
        sign_ins_per_client: dashboard sign-ins a minute one client address may make
            (:mod:`feltdb.server.limits`).
        retention: the maintenance loop prunes finished work past this policy's ages
            (``None``: it prunes nothing).
    """
    now = clock if clock is not None else wall_clock
    # The app's own store: its observers see this app's commits, and only them.
    own = WorkloadStore(store.db, max_lease_ms=store.max_lease_ms)
    wakeup = Wakeup()
    metrics = Metrics()
    metrics.bind(own)
    own.observe(metrics.observe)
    own.observe(wakeup.on_commit)
    maintenance = Maintenance(own, now, retention)
    app = FastAPI(
        title="feltdb",
        version=__version__,
        description=DESCRIPTION,
        docs_url=None,  # served from local files instead (server/docs.py), not a CDN
        redoc_url=None,
        lifespan=_lifespan(maintenance, wakeup, maintenance_interval_s, _hints(own, wakeup)),
    )
    limits = SignInLimits.allowing(sign_ins_per_client)
    app.state.server = ServerState(own, keyring, now, wakeup, sign_ins=limits)
    app.state.store = own
    app.state.maintenance = maintenance
    app.state.wakeup = wakeup
    app.state.metrics = metrics
    install_error_handlers(app, now)
    app.add_middleware(BodyLimit, limit=MAX_BODY_BYTES)
    # Added last, so outermost: it times (and logs) every answer, 413s included.
    app.add_middleware(RequestMetrics, metrics=metrics)
    app.include_router(build_router())
    declare_lease_cap(app, store.max_lease_ms)
    add_probes(app, own, metrics)
    add_docs(app)
    add_ui(app)
    return app


def _hints(store: WorkloadStore, wakeup: Wakeup) -> Callable[[], Callable[[], None]] | None:
    """How the lifespan subscribes the long-polls to the wake-up hints of the other
    processes of ``store``'s database (``None``: it has none); the function it answers
    subscribes, and answers the function that unsubscribes.
    """
    hints = store.db.wakeups
    if hints is None:
        return None
    return lambda: hints.subscribe(wakeup.notify)


def _lifespan(
    maintenance: Maintenance,
    wakeup: Wakeup,
    interval_s: float | None,
    subscribe_hints: Callable[[], Callable[[], None]] | None,
) -> Callable[[FastAPI], AbstractAsyncContextManager[None]]:
    """The app's lifespan: wake-ups bound to its loop (and to the database's hints), the
    maintenance loop running.
    """

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        wakeup.bind(asyncio.get_running_loop())
        unsubscribe = subscribe_hints() if subscribe_hints is not None else None
        if interval_s is not None:
            maintenance.start(interval_s)
        try:
            yield
        finally:
            if unsubscribe is not None:
                unsubscribe()
            # The pass in progress (if any) finishes in a worker thread; joining it here
            # blocks the loop for at most one pass.
            await asyncio.to_thread(maintenance.stop)
            wakeup.unbind()

    return lifespan
