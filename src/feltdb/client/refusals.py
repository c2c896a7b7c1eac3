"""How the HTTP client says a refusal: :class:`ClientError`.

A refusal comes back as a :class:`ClientError`, a :class:`~feltdb.errors.WorkloadError`
with the server's ``code``, ``message`` and ``details`` and the HTTP ``status``, so code
written against the store catches the same codes here. Two cases have no refusal body to
map:

- the server could not be reached, or the connection failed or timed out before an answer:
  ``WORKLOAD_STORAGE_FAILURE`` naming the URL, with ``status`` ``None`` (nothing is known
  of whether the request was applied: resend it; every write of the API is idempotent or
  fenced);
- an answer that is not the server's error body (a ``500``, a proxy's page, a code this
  client does not know): ``WORKLOAD_STORAGE_FAILURE`` naming the URL and the status, with
  ``details`` ``{"url", "status", "code"}`` (``code`` the server's, if any).

A request refused before it is sent (a submission the model refuses, a body that is not
JSON, a URL that is not one) is ``WORKLOAD_INVALID`` with ``status`` ``None``.
"""

from __future__ import annotations

from typing import Any

import httpx

from feltdb.errors import ErrorCode, WorkloadError


class ClientError(WorkloadError):
    """A :class:`~feltdb.errors.WorkloadError` raised by :class:`Client`.

    Attributes:
        status: the HTTP status that answered, ``None`` when no answer arrived.
        retry_after: the answer's ``Retry-After`` in seconds (``WORKLOAD_NOT_YET_ELIGIBLE``
            is answered ``425`` with one, ``WORKLOAD_QUOTA_EXCEEDED`` ``429``), else
            ``None``.
    """

    def __init__(
        self,
        code: ErrorCode | str,
        message: str | None = None,
        details: dict[str, Any] | None = None,
        *,
        status: int | None = None,
        retry_after: int | None = None,
    ) -> None:
        super().__init__(code, message, details)
        self.status = status
        self.retry_after = retry_after

    def __reduce__(self) -> tuple[Any, ...]:
        return (
            _rebuild,
            (self.code, self.message, self.details, self.status, self.retry_after),
        )


def _rebuild(
    code: str,
    message: str,
    details: dict[str, Any] | None,
    status: int | None,
    retry_after: int | None,
) -> ClientError:
    return ClientError(code, message, details, status=status, retry_after=retry_after)


def server_url(url: str) -> str:
    """``url`` as the root of a server (``http://host:port``, no trailing slash).

    Raises:
        ClientError: ``WORKLOAD_INVALID`` naming what is wrong with it.
    """
    try:
        parsed = httpx.URL(url)
        parsed.port  # noqa: B018 (a port that is not a number fails here, not later)
    except (httpx.InvalidURL, ValueError, TypeError) as error:
        raise ClientError(ErrorCode.WORKLOAD_INVALID, f"not a URL: {url!r} ({error})") from None
    if parsed.scheme not in ("http", "https") or not parsed.host:
        raise ClientError(
            ErrorCode.WORKLOAD_INVALID,
            f"not a server URL: {url!r} (give http://HOST:PORT or https://HOST:PORT)",
        )
    return url.rstrip("/")


def unanswered(error: httpx.TransportError, url: str, where: str) -> ClientError:
    """The refusal of a request to ``where`` that no answer came back to: a server that
    cannot be reached (nothing was sent) is said as such, naming ``url``.
    """
    if isinstance(error, httpx.ConnectError):
        return ClientError(
            ErrorCode.WORKLOAD_STORAGE_FAILURE,
            f"cannot reach the feltdb server at {url}: {error} (is `feltdb serve` running"
            " there? the URL is --url or FELTDB_URL)",
            {"url": where, "unreachable": True},
        )
    return ClientError(
        ErrorCode.WORKLOAD_STORAGE_FAILURE,
        f"no answer from the feltdb server at {where}: {type(error).__name__}: {error}",
        {"url": where},
    )


def refusal(answer: httpx.Response, where: str) -> ClientError:
    """The :class:`ClientError` an unsuccessful answer stands for."""
    status = answer.status_code
    retry_after = _retry_after(answer.headers.get("Retry-After"))
    code: Any = None
    try:
        document = answer.json()
        error = document["error"]
        code, message, details = error["code"], error["message"], error.get("details")
        if isinstance(code, str) and code in ErrorCode.__members__ and isinstance(message, str):
            return ClientError(
                code,
                message,
                details if isinstance(details, dict) else None,
                status=status,
                retry_after=retry_after,
            )
    except (ValueError, KeyError, TypeError):
        pass
    # Not an answer of the authority: no feltdb error body, or a route the server lacks (a
    # URL with a path in it, say, or another service on the port).
    return ClientError(
        ErrorCode.WORKLOAD_STORAGE_FAILURE,
        f"no feltdb API at {where}: it answered {status} "
        + (f"({code})" if isinstance(code, str) else "without a feltdb error body")
        + "; is the URL the server's root (http://HOST:PORT)?",
        {"url": where, "status": status, "code": code if isinstance(code, str) else None},
        status=status,
        retry_after=retry_after,
    )


def _retry_after(value: str | None) -> int | None:
    if value is None:
        return None
    try:
        return int(value)
    except ValueError:
        return None
