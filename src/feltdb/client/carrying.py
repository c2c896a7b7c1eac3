"""How both HTTP clients carry a :class:`~feltdb.client.calls.Request`: what is sent, and
what an answer means. :class:`Carrier` holds the parts the clients share (the URL, the
timeout, the token); the clients add only the sending itself, blocking or awaited.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import httpx

from feltdb.auth.tokens import decode_token
from feltdb.client.calls import Answer, Request
from feltdb.client.refusals import ClientError, refusal, server_url, unanswered
from feltdb.errors import ErrorCode
from feltdb.tracing import inject_headers

if TYPE_CHECKING:
    from feltdb.auth import Subject


def _sendable(token: str) -> str:
    """``token``, if a header can carry it: not empty, no spaces nor control characters
    (else the request would fail as if the server could not be reached).
    """
    if not isinstance(token, str) or not token or not token.isprintable() or " " in token:
        raise ClientError(
            ErrorCode.WORKLOAD_INVALID,
            "the token is empty or holds spaces or control characters (read from a file? "
            "strip its end of line)",
        )
    return token


class Carrier:
    """The server at ``url`` (its root) and the grant ``token`` carries, for a client whose
    ``_http`` (an :class:`httpx.Client` or :class:`httpx.AsyncClient`) sends.
    """

    _http: httpx.Client | httpx.AsyncClient

    def __init__(self, url: str, token: str, *, timeout: float = 30.0) -> None:
        """Talk to the server at ``url`` (its root: ``http://host:port``) with ``token``.

        Raises:
            ClientError: ``WORKLOAD_INVALID`` for a URL that is not an ``http``/``https``
                URL with a host and a valid port, or a token that cannot be one.
        """
        self.url = server_url(url)
        self.timeout = timeout
        self._token = _sendable(token)
        self._http = self._open(
            base_url=self.url,
            timeout=timeout,
            headers={"Authorization": f"Bearer {token}", "Accept": "application/json"},
        )

    def _open(self, **options: Any) -> httpx.Client | httpx.AsyncClient:
        raise NotImplementedError  # the client's connection pool, opened with ``options``

    def use_token(self, token: str) -> None:
        """Send ``token`` from the next request on (a rotated token)."""
        token = _sendable(token)
        headers = self._http.headers.copy()
        headers["Authorization"] = f"Bearer {token}"
        self._http.headers = headers  # whole: another thread's request takes one or the other
        self._token = token

    @property
    def subject(self) -> Subject:
        """The subject of the token's grant, read from the token (the server verifies it).

        Raises:
            WorkloadError: ``WORKLOAD_UNAUTHORIZED`` for a token that is not one.
        """
        subject: Subject = decode_token(self._token).grant.subject
        return subject

    def _outgoing(self, request: Request) -> dict[str, Any]:
        """``request`` as the keywords of ``_http.request``.

        Raises:
            ClientError: ``WORKLOAD_INVALID`` (nothing is sent) for a body that is not JSON.
        """
        try:
            content = None if request.body is None else json.dumps(request.body, allow_nan=False)
        except (ValueError, TypeError) as error:
            raise ClientError(
                ErrorCode.WORKLOAD_INVALID,
                f"the request is not JSON (NaN, infinity and non-JSON types are not): {error}",
            ) from None
        return {
            "method": request.method,
            "url": request.path,
            "content": content,
            # The current span's context, when tracing is on (feltdb.tracing).
            "headers": inject_headers({"Content-Type": "application/json"} if content else {}),
            "params": request.params,
            "timeout": self.timeout + request.wait_ms / 1000,
        }

    def _unanswered(self, error: httpx.TransportError, request: Request) -> ClientError:
        """The refusal of ``request`` when no answer came back."""
        return unanswered(error, self.url, f"{self.url}{request.path}")

    def _answer(self, answer: httpx.Response, request: Request) -> Answer:
        """What ``answer`` to ``request`` means: the server's refusal raised, the JSON
        object it carries (``None`` when the request asked none, or for a ``204`` it
        allows), or a ``WORKLOAD_STORAGE_FAILURE`` naming the URL and status for a body
        that is not a JSON object.
        """
        where = f"{self.url}{request.path}"
        if not answer.is_success:
            raise refusal(answer, where)
        if not request.document or (answer.status_code == 204 and request.none_on_204):
            return Answer(answer.status_code, None)
        try:
            document = answer.json()
        except ValueError:
            document = None
        if not isinstance(document, dict):
            raise ClientError(
                ErrorCode.WORKLOAD_STORAGE_FAILURE,
                f"the feltdb server at {where} answered {answer.status_code} "
                "with a body that is not a JSON object",
                {"url": where, "status": answer.status_code, "code": None},
                status=answer.status_code,
            )
        return Answer(answer.status_code, document)
