"""From refusals to HTTP answers: one table, one body shape, one set of handlers.

Every error the server answers has the body ``{"error": {"code", "message", "details"}}``,
``code`` being one of :class:`~feltdb.errors.ErrorCode`. The status comes from
:data:`STATUS_BY_CODE` alone, with two exceptions that depend on *how* a request failed,
not on the code:

- ``401`` for ``WORKLOAD_UNAUTHORIZED`` when the request carries no bearer token, or one
  that cannot be decoded (:class:`Unauthenticated`); a decoded token that fails
  verification (signature, key, expiry, status) or does not cover the request is ``403``.
- ``413`` for a body over :data:`MAX_BODY_BYTES` (code ``WORKLOAD_INVALID``).

Decisions worth stating: ``WORKLOAD_SECRET_REJECTED`` is ``422`` (the request's content is
refused, like any invalid input: resending it unchanged can never succeed);
``WORKLOAD_NOT_YET_ELIGIBLE`` is ``425 Too Early`` with ``Retry-After`` (seconds until the
``eligible_at`` its details name); a refusal whose details hold ``retry_after_s`` (a busy
audit verification's ``503``, an admission quota's ``429``, ``WORKLOAD_QUOTA_EXCEEDED``)
says it in ``Retry-After`` too; ``WORKLOAD_CONFLICT`` is
``409`` (another writer won: re-read and decide again).

An unexpected exception is logged with its traceback on the server and answered ``500``
with a generic body that reveals nothing of it. Where the store is (a file path, a database
URL) is the operator's to know, not a client's: an answer says it is withheld
(:func:`as_told_to_clients`), and the server's log keeps the whole message of a ``503``.
"""

from __future__ import annotations

import copy
import enum
import logging
from collections.abc import Callable
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from feltdb.errors import ErrorCode, WorkloadError
from feltdb.server.logs import loggable_path

log = logging.getLogger("feltdb.server")

MAX_BODY_BYTES = 1024 * 1024
"""The largest request body the server reads (1 MiB); a larger one is answered 413 and
changes nothing."""

_C = ErrorCode

STATUS_BY_CODE: dict[ErrorCode, int] = {
    _C.WORKLOAD_NOT_FOUND: 404,
    _C.WORKLOAD_INVALID: 422,
    _C.WORKLOAD_SECRET_REJECTED: 422,
    _C.WORKLOAD_UNAUTHORIZED: 403,
    _C.WORKLOAD_APPROVER_NOT_PERMITTED: 403,
    _C.WORKLOAD_CAPABILITY_DENIED: 403,
    _C.WORKLOAD_NOT_YET_ELIGIBLE: 425,
    _C.WORKLOAD_QUOTA_EXCEEDED: 429,
    _C.WORKLOAD_STORAGE_FAILURE: 503,
    _C.WORKLOAD_CONFLICT: 409,
    _C.WORKLOAD_STALE_FENCE: 409,
    _C.WORKLOAD_CLAIM_INVALID: 409,
    _C.WORKLOAD_LEASE_EXPIRED: 409,
    _C.IDEMPOTENCY_KEY_REUSED: 409,
    _C.WORKLOAD_TRANSITION_DENIED: 409,
    _C.WORKLOAD_RESULT_CONFLICT: 409,
    _C.WORKLOAD_RESULT_DUPLICATE: 409,
    _C.WORKLOAD_APPROVAL_DECIDED: 409,
    _C.WORKLOAD_APPROVAL_NOT_ACTIONABLE: 409,
    _C.WORKLOAD_APPROVAL_STALE: 409,
    _C.WORKLOAD_APPROVAL_PENDING: 409,
    _C.WORKLOAD_APPROVAL_NOT_REQUIRED: 409,
    _C.WORKLOAD_NOT_READY: 409,
    _C.WORKLOAD_ATTEMPTS_EXHAUSTED: 409,
    _C.WORKLOAD_RETRY_EXHAUSTED: 409,
    _C.WORKLOAD_TIMED_OUT: 409,
    _C.WORKLOAD_REJECTED: 409,
    _C.WORKLOAD_MIGRATION_CONFLICT: 409,
}
"""The HTTP status of each error code (see the module docstring for the two exceptions)."""


class RouteCode(enum.StrEnum):
    """Codes of answers about the URL itself, not about work: so a wrong URL (``…/v1`` for
    the server's root, another service on the port) is told apart from missing work.
    """

    NOT_FOUND = "NOT_FOUND"
    """No route of this API has this path."""
    METHOD_NOT_ALLOWED = "METHOD_NOT_ALLOWED"
    """The path is a route of this API, but not for this method (``Allow`` says which)."""
    SERVER_BUSY = "SERVER_BUSY"
    """The server holds as many connections as it may (``503``, ``Retry-After``): this one
    was closed before anything was read from it (:mod:`feltdb.server.connections`)."""


class Unauthenticated(WorkloadError):
    """``WORKLOAD_UNAUTHORIZED`` answered ``401``: no bearer token, or an undecodable one."""

    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.WORKLOAD_UNAUTHORIZED, message)


class ErrorDetail(BaseModel):
    """What was refused: a stable code, a message for people, and structured details."""

    model_config = ConfigDict(extra="forbid")

    code: ErrorCode | RouteCode
    message: str
    details: dict[str, Any] | None


class ErrorBody(BaseModel):
    """The body of every error answer (``4xx`` and ``503``)."""

    model_config = ConfigDict(extra="forbid")

    error: ErrorDetail


ERROR_DESCRIPTIONS: dict[int, str] = {
    401: "No bearer token, or one that cannot be decoded (WORKLOAD_UNAUTHORIZED)",
    403: "The token does not verify, was revoked, or does not cover this request",
    404: "No such workload in the token's tenant and application (WORKLOAD_NOT_FOUND), or"
    " no such route (NOT_FOUND)",
    409: "The request conflicts with the workload's committed state",
    413: "The request body is over the 1 MiB limit (WORKLOAD_INVALID)",
    422: "The request is invalid (WORKLOAD_INVALID, WORKLOAD_SECRET_REJECTED)",
    425: "The workload is not yet eligible; Retry-After says when (WORKLOAD_NOT_YET_ELIGIBLE)",
    429: "An admission quota of the tenant or the grant refused the work; Retry-After says"
    " when to try again (WORKLOAD_QUOTA_EXCEEDED)",
    503: "The store could not be read or written (WORKLOAD_STORAGE_FAILURE)",
}
"""The error statuses the server answers, as the OpenAPI describes them."""

_ERROR_HEADERS: dict[int, dict[str, Any]] = {
    401: {"WWW-Authenticate": {"description": "Bearer", "required": True,
                               "schema": {"type": "string"}}},
    425: {"Retry-After": {"description": "Seconds until the work is eligible", "required": True,
                          "schema": {"type": "string"}}},
    429: {"Retry-After": {"description": "Seconds after which an admission may be admitted",
                          "required": True, "schema": {"type": "string"}}},
    503: {"Retry-After": {"description": "Seconds after which to ask again, when known (a"
                          " verification of the audit chain already running)",
                          "required": False, "schema": {"type": "string"}}},
}  # fmt: skip


def error_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """The OpenAPI ``responses`` entries of the error ``statuses`` a route may answer, each
    with the :class:`ErrorBody` schema (for FastAPI's ``responses=``).
    """
    answers: dict[int | str, dict[str, Any]] = {}
    for status in statuses:
        answer: dict[str, Any] = {"model": ErrorBody, "description": ERROR_DESCRIPTIONS[status]}
        if status in _ERROR_HEADERS:
            answer["headers"] = _ERROR_HEADERS[status]
        answers[status] = answer
    return answers


def error_body(code: str, message: str, details: dict[str, Any] | None = None) -> dict[str, Any]:
    """The JSON body of every error answer."""
    return {"error": {"code": code, "message": message, "details": details}}


def status_for(error: WorkloadError) -> int:
    """The HTTP status that answers ``error``."""
    if isinstance(error, Unauthenticated):
        return 401
    return STATUS_BY_CODE[ErrorCode[error.code]]


def error_response(error: WorkloadError, now: int) -> JSONResponse:
    """The answer to ``error``, with ``Retry-After`` for work that is not yet eligible (or
    details naming ``retry_after_s``) and ``WWW-Authenticate`` for a missing or undecodable
    token.
    """
    status = status_for(error)
    headers: dict[str, str] = {}
    if status == 401:
        headers["WWW-Authenticate"] = "Bearer"
    details = error.details or {}
    if error.code == ErrorCode.WORKLOAD_NOT_YET_ELIGIBLE:
        eligible_at = details.get("eligible_at")
        wait = eligible_at - now if isinstance(eligible_at, int) else 1
        headers["Retry-After"] = str(max(1, wait))
    elif isinstance(retry_after := details.get("retry_after_s"), int):
        headers["Retry-After"] = str(max(1, retry_after))
    return JSONResponse(
        error_body(error.code, error.message, error.details), status_code=status, headers=headers
    )


def _validation_details(error: RequestValidationError) -> tuple[str, dict[str, Any]]:
    fields: list[str] = []
    problems: list[str] = []
    for item in error.errors():
        loc = [str(part) for part in item.get("loc", ())]
        if loc and loc[0] == "body":
            loc = loc[1:]
        path = ".".join(loc) or "body"
        if item.get("type") == "json_invalid":
            path = "body"
        if path not in fields:
            fields.append(path)
        problems.append(f"{path}: {item.get('msg', 'invalid')}")
    return "invalid request: " + "; ".join(problems), {"fields": fields}


STORE_NAMED_AS = "[location withheld]"
"""What an answer says in place of the store's location."""


def as_told_to_clients(error: WorkloadError, store_target: str) -> WorkloadError:
    """``error`` as a client reads it: the store's location (``store_target``, a file
    path or a database URL without its password) replaced by :data:`STORE_NAMED_AS`
    wherever its message or a text of its details says it. A ``503`` is logged whole first.
    """
    if error.code == ErrorCode.WORKLOAD_STORAGE_FAILURE.value:
        log.warning("store failure: %s", error.message)
    if not store_target:
        return error

    def told(value: Any) -> Any:
        return value.replace(store_target, STORE_NAMED_AS) if isinstance(value, str) else value

    details = None if error.details is None else {k: told(v) for k, v in error.details.items()}
    message = told(error.message)
    if message == error.message and details == error.details:
        return error
    answered = copy.copy(error)  # of the same class: an Unauthenticated stays a 401
    answered.message, answered.details = message, details
    answered.args = (f"{answered.code}: {message}",)
    return answered


def install_error_handlers(app: FastAPI, clock: Callable[[], int]) -> None:
    """Register the handlers that give every error answer the one body shape."""

    async def on_workload_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, WorkloadError)
        return error_response(as_told_to_clients(exc, store_target(request)), clock())

    async def on_validation_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        message, details = _validation_details(exc)
        return JSONResponse(error_body(ErrorCode.WORKLOAD_INVALID, message, details), 422)

    async def on_http_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, StarletteHTTPException)
        if exc.status_code == 400:
            # FastAPI's answer to a body its JSON parser gave up on (nested past the
            # parser's recursion limit, not UTF-8): malformed JSON like any other, 422.
            return JSONResponse(
                error_body(
                    ErrorCode.WORKLOAD_INVALID,
                    f"invalid request: body: not JSON this server can read ({exc.detail})",
                    {"fields": ["body"]},
                ),
                422,
            )
        code: str = {404: RouteCode.NOT_FOUND, 405: RouteCode.METHOD_NOT_ALLOWED}.get(
            exc.status_code, ErrorCode.WORKLOAD_INVALID
        )
        headers = dict(exc.headers or {})
        if exc.status_code == 405:
            # Starlette names the methods of the first route whose path matched; a path
            # served by several routes (GET and POST /v1/workloads) allows all of theirs.
            headers["Allow"] = ", ".join(sorted(_allowed_methods(request)))
        return JSONResponse(error_body(code, str(exc.detail)), exc.status_code, headers=headers)

    async def on_unexpected(request: Request, exc: Exception) -> JSONResponse:
        log.error(
            "unexpected error answering %s %s",
            request.method,
            loggable_path(request.scope),
            exc_info=exc,
        )
        return JSONResponse(
            error_body("INTERNAL_ERROR", "the server could not answer this request"), 500
        )

    app.add_exception_handler(WorkloadError, on_workload_error)
    app.add_exception_handler(RequestValidationError, on_validation_error)
    app.add_exception_handler(StarletteHTTPException, on_http_error)
    app.add_exception_handler(Exception, on_unexpected)


def store_target(request: Request) -> str:
    """Where the store of the app answering ``request`` is (empty before it is set)."""
    state = getattr(request.app.state, "server", None)
    return "" if state is None else str(state.store.db.target)


class BodyLimit:
    """ASGI middleware refusing request bodies over ``limit`` bytes with 413.

    A declared ``Content-Length`` over the limit is refused before anything is read; a
    streamed body is counted as it arrives and refused once it passes the limit (FastAPI
    reads the whole body before the endpoint runs, so nothing has been done yet).
    """

    def __init__(self, app: ASGIApp, limit: int = MAX_BODY_BYTES) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:  # noqa: D102
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = _content_length(scope)
        if declared is not None and declared > self.limit:
            response = JSONResponse(error_body(*self._refusal()), status_code=413)
            await response(scope, receive, send)
            return
        received = 0

        async def counting() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.limit:
                    # Re-raised by FastAPI's body reader; on_http_error shapes the answer.
                    raise StarletteHTTPException(413, self._refusal()[1])
            return message

        await self.app(scope, counting, send)

    def _refusal(self) -> tuple[str, str]:
        return (
            ErrorCode.WORKLOAD_INVALID.value,
            f"the request body is larger than the limit of {self.limit} bytes",
        )


def _allowed_methods(request: Request) -> set[str]:
    """Every method a route of the app serves at the request's path (routes of included
    routers too: FastAPI groups those under one entry).
    """
    allowed: set[str] = set()
    pending = list(request.app.router.routes)
    while pending:
        route = pending.pop()
        included = getattr(route, "original_router", None)
        if included is not None:
            pending.extend(included.routes)
            continue
        methods = getattr(route, "methods", None)
        if methods and route.matches(request.scope)[0] is not Match.NONE:
            allowed |= set(methods)
    return allowed


def _content_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None
