"""The application factory: a FastAPI app over one store and one keyring.

:func:`create_app` holds no module-level state: everything a request needs is captured by
the app it builds, so tests may build as many apps as they like. The app's lifespan starts
and stops the maintenance loop (:class:`~feltdb.server.maintenance.Maintenance`).

Blocking store calls run in the threadpool (plain ``def`` endpoints; the store is
thread-safe); the long-poll of ``POST /v1/claims`` waits on the event loop, not on a
thread.

``GET /metrics`` (no token) answers the app's Prometheus counters (see
:mod:`feltdb.server.metrics`); the routes and the maintenance loop call the store through
:class:`~feltdb.server.metrics.MeteredStore`, which counts their outcomes.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from fastapi import FastAPI
from fastapi.responses import JSONResponse, Response

from feltdb import __version__
from feltdb.auth import Grant, Subject
from feltdb.auth.policy import ALL_CAPABILITIES, application_grant
from feltdb.auth.tokens import Keyring
from feltdb.server.api import Context, Wakeup, build_router
from feltdb.server.errors import MAX_BODY_BYTES, BodyLimit, install_error_handlers
from feltdb.server.maintenance import Maintenance
from feltdb.server.metrics import MeteredStore, Metrics, RequestMetrics
from feltdb.storage import sqlite_path
from feltdb.work.store import WorkloadStore

log = logging.getLogger("feltdb.server")

ADMIN_TOKEN_LIFETIME_S = 30 * 24 * 3600


def wall_clock() -> int:
    """The current unix second: the server's clock unless a test gives another."""
    return int(time.time())


def create_app(
    store: WorkloadStore,
    keyring: Keyring,
    *,
    clock: Callable[[], int] | None = None,
    maintenance_interval_s: float | None = 1.0,
) -> FastAPI:
    """The HTTP API over ``store``, trusting tokens signed by ``keyring``.

    Args:
        store: the authority every route calls; not closed by the app.
        keyring: verifies bearer tokens.
        clock: the unix-seconds clock every operation uses (default: the wall clock).
        maintenance_interval_s: how often the lifespan's maintenance loop runs; ``None``
            runs none (tests call :meth:`Maintenance.run_once` themselves).
    """
    now = clock if clock is not None else wall_clock
    wakeup = Wakeup()
    metrics = Metrics()
    metered = MeteredStore(store, metrics)
    maintenance = Maintenance(metered, now, on_change=wakeup.notify)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        wakeup.bind(asyncio.get_running_loop())
        if maintenance_interval_s is not None:
            maintenance.start(maintenance_interval_s)
        try:
            yield
        finally:
            # The pass in progress (if any) finishes in a worker thread; joining it here
            # blocks the loop for at most one pass.
            await asyncio.to_thread(maintenance.stop)
            wakeup.unbind()

    app = FastAPI(
        title="feltdb",
        version=__version__,
        description="A durable workload authority over HTTP. Every /v1 route needs "
        "`Authorization: Bearer <token>`; errors answer "
        '`{"error": {"code", "message", "details"}}`. Request bodies are limited to '
        f"{MAX_BODY_BYTES} bytes.",
        lifespan=lifespan,
    )
    app.state.store = store
    app.state.maintenance = maintenance
    app.state.wakeup = wakeup
    app.state.metrics = metrics
    install_error_handlers(app, now)
    app.add_middleware(BodyLimit, limit=MAX_BODY_BYTES)
    # Added last, so outermost: it times (and logs) every answer, 413s included.
    app.add_middleware(RequestMetrics, metrics=metrics)
    app.include_router(build_router(Context(metered, keyring, now, wakeup)))
    declare_lease_cap(app, store.max_lease_ms)

    @app.get("/healthz", summary="The process is up")
    def healthz() -> JSONResponse:
        return JSONResponse({"status": "ok"})

    @app.get("/readyz", summary="The store answers", responses={503: {"description": "not"}})
    def readyz() -> JSONResponse:
        try:
            revision = store.db.current_revision()
        except Exception as error:
            log.warning("readiness check failed: %s", error)
            return JSONResponse({"status": "unavailable"}, status_code=503)
        return JSONResponse({"status": "ready", "revision": revision})

    @app.get("/metrics", summary="Prometheus metrics (no token)", include_in_schema=False)
    def prometheus() -> Response:
        body, content_type = metrics.render()
        return Response(body, media_type=content_type)

    return app


LEASE_FIELDS = ("lease_ms", "extend_ms")
"""The request fields bounded by the store's lease cap."""


def declare_lease_cap(app: FastAPI, max_lease_ms: int) -> None:
    """Make ``app``'s OpenAPI schema say this server's lease cap: the ``maximum`` of every
    lease field is ``max_lease_ms`` (it is the store's setting, so the body models, shared
    by every app, cannot carry it).
    """
    generate = app.openapi

    def openapi() -> dict[str, Any]:
        schema = generate()  # built once, then cached by FastAPI; the edit is idempotent
        for component in schema.get("components", {}).get("schemas", {}).values():
            for name in LEASE_FIELDS:
                field = component.get("properties", {}).get(name)
                if isinstance(field, dict):
                    field["maximum"] = max_lease_ms
        return schema

    app.openapi = openapi  # type: ignore[method-assign]


def admin_grant(now: int) -> Grant:
    """The development admin grant of a first start: every capability on every workload
    of tenant ``default``, application ``default``, for 30 days.
    """
    return application_grant(
        Subject.human("admin"),
        "default",
        "default",
        ALL_CAPABILITIES,
        issued_at=now,
        expires_at=now + ADMIN_TOKEN_LIFETIME_S,
        grant_id=f"admin-{secrets.token_hex(6)}",
    )


KEYRING_ENV = "FELTDB_KEYRING"
"""The environment variable that may hold the server's keyring (its JSON)."""


def default_keyring_path(db: str) -> Path:
    """Where the keyring of a server on ``db`` lives by default: ``feltdb-keyring.json``
    beside an embedded store's file, else in the current directory.
    """
    path = sqlite_path(db)
    return (path.parent if path is not None else Path()) / "feltdb-keyring.json"


def load_or_create_keyring(path: Path, now: int) -> tuple[Keyring, str | None]:
    """The keyring at ``path``; when there is none, a new one saved there, with an admin
    token signed by it (see :func:`admin_grant`), returned as the second item.
    """
    if path.exists():
        return Keyring.load(path), None
    keyring = Keyring.generate()
    path.parent.mkdir(parents=True, exist_ok=True)
    keyring.save(path)
    return keyring, keyring.sign(admin_grant(now))
