"""``feltdb.client.Client`` and ``AsyncClient`` against a real server process (both
backends): what only an HTTP client does (tokens, statuses, Retry-After, the transport's
failures, the URL). What every client does alike is tests/integration/client/
test_client_contract.py's.
"""

from __future__ import annotations

import http.server
import pickle
import threading
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

import pytest
from support.client_kinds import Awaited, Clients
from support.server import WORK_CAPABILITY, Server, free_port, submission

from feltdb import Subject, WorkloadError
from feltdb.auth.policy import CANCEL, CLAIM, READ, REVOKE, SUBMIT
from feltdb.client import Client, ClientError

REQUESTER = {"subject": Subject.agent("a1"), "capabilities": [SUBMIT, READ, CANCEL]}
WORKER = {"subject": Subject.worker("w1"), "capabilities": [CLAIM, WORK_CAPABILITY]}
HTTP_KINDS = ("http", "async")


@pytest.fixture(params=HTTP_KINDS)
def kind(request: pytest.FixtureRequest) -> str:
    """Which HTTP client: :class:`Client`, or :class:`AsyncClient` awaited."""
    kind: str = request.param
    return kind


@pytest.fixture
def clients(kind: str, server: Server) -> Iterator[Clients]:
    with ExitStack() as stack:
        yield Clients(kind, server, stack)


def bare(kind: str, url: str, token: str) -> Any:
    """A client of ``kind`` for ``url``, whatever answers there."""
    return Client(url, token, timeout=5.0) if kind == "http" else Awaited(url, token, timeout=5.0)


def test_refusals_carry_the_servers_status(clients: Clients, app: str):
    requester = clients(app, **REQUESTER)
    # A submission the model refuses is refused before it is sent (no status)...
    with pytest.raises(ClientError) as invalid:
        requester.admit(**submission(key="two", priority=10**20))
    assert (invalid.value.code, invalid.value.status) == ("WORKLOAD_INVALID", None)
    assert "priority" in invalid.value.message
    # The requester's grant holds no workload:claim.
    with pytest.raises(ClientError) as denied:
        requester.claim_next()
    assert (denied.value.code, denied.value.status) == ("WORKLOAD_UNAUTHORIZED", 403)

    with bare(clients.kind, clients.server.url, "not-a-token") as stranger:
        with pytest.raises(ClientError) as unknown:
            stranger.get("anything")
    assert (unknown.value.code, unknown.value.status) == ("WORKLOAD_UNAUTHORIZED", 401)


def test_work_not_yet_eligible_is_refused_with_retry_after(clients: Clients, app: str):
    later = clients(app, **REQUESTER).create(**submission(not_before=4_000_000_000))
    with pytest.raises(ClientError) as early:
        clients(app, **WORKER).claim(later.workload_id)
    assert (early.value.code, early.value.status) == ("WORKLOAD_NOT_YET_ELIGIBLE", 425)
    assert early.value.retry_after is not None and early.value.retry_after > 0


def test_a_client_error_survives_pickling(clients: Clients, app: str):
    with pytest.raises(ClientError) as missing:
        clients(app, **REQUESTER).get("gone")
    copy = pickle.loads(pickle.dumps(missing.value))
    assert isinstance(copy, ClientError)
    assert (copy.code, copy.message, copy.details, copy.status) == (
        missing.value.code,
        missing.value.message,
        missing.value.details,
        404,
    )


@pytest.mark.parametrize("kind", HTTP_KINDS)
@pytest.mark.parametrize("token", ["", "fgt2.abc\n", "fgt2 abc", "\tfgt2"])
def test_a_token_no_header_can_carry_is_refused_when_the_client_is_made(kind: str, token: str):
    # Not a "cannot reach the server" on the first call: a token file read with its end of
    # line is the usual cause, and the refusal says so.
    with pytest.raises(ClientError) as refused:
        bare(kind, "http://127.0.0.1:9", token)
    assert refused.value.code == "WORKLOAD_INVALID" and "end of line" in refused.value.message
    with bare(kind, "http://127.0.0.1:9", "fgt2.abc") as client, pytest.raises(ClientError):
        client.use_token("fgt2.abc\n")


@pytest.mark.parametrize("kind", HTTP_KINDS)
def test_an_unreachable_server_is_a_storage_failure_naming_the_url(kind: str):
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    with bare(kind, url, "token") as felt, pytest.raises(ClientError) as down:
        felt.get("w")
    assert down.value.code == "WORKLOAD_STORAGE_FAILURE"
    assert down.value.status is None
    # Nothing was sent: the refusal says the server cannot be reached (details mark it).
    assert down.value.details == {"url": f"{url}/v1/workloads/w", "unreachable": True}
    assert down.value.message.startswith(f"cannot reach the feltdb server at {url}:")


@contextmanager
def proxy_page() -> Iterator[str]:
    """A real HTTP endpoint that answers every request ``200`` with an HTML page, as a
    misconfigured proxy in front of the server would.
    """

    class Page(http.server.BaseHTTPRequestHandler):
        def _answer(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            body = b"<html>gateway</html>"
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = _answer

        def log_message(self, *args: Any) -> None:
            pass

    with http.server.ThreadingHTTPServer(("127.0.0.1", 0), Page) as httpd:
        thread = threading.Thread(target=httpd.serve_forever, daemon=True)
        thread.start()
        try:
            yield f"http://127.0.0.1:{httpd.server_address[1]}"
        finally:
            httpd.shutdown()


@pytest.mark.parametrize("kind", HTTP_KINDS)
def test_a_success_answer_that_is_not_a_json_object_is_a_storage_failure(kind: str):
    with proxy_page() as url, bare(kind, url, "token") as felt:
        calls = {
            "/v1/workloads": lambda: felt.admit(**submission("k")),
            "/v1/claims": lambda: felt.claim_next(),
            "/v1/workloads/w": lambda: felt.get("w"),
        }
        for path, call in calls.items():
            with pytest.raises(ClientError) as odd:
                call()
            assert odd.value.code == "WORKLOAD_STORAGE_FAILURE", path
            assert odd.value.status == 200
            assert odd.value.details == {"url": f"{url}{path}", "status": 200, "code": None}


def test_a_workload_id_never_becomes_a_query_or_a_fragment(clients: Clients, app: str):
    with pytest.raises(ClientError) as missing:
        clients(app, **REQUESTER).get("a?state=READY#b")
    assert missing.value.code == "WORKLOAD_NOT_FOUND"
    assert missing.value.details == {"workload_id": "a?state=READY#b"}


def test_a_revoked_grant_is_refused_from_the_next_request_on(clients: Clients, app: str):
    victim = clients.server.grant(app, **REQUESTER)
    requester = clients.of(victim)
    requester.create(**submission())
    security = clients(app, subject=Subject.human("sec"), capabilities=[REVOKE])
    assert security.revoke_grant(victim.id) is True
    with pytest.raises(WorkloadError) as refused:
        requester.create(**submission())
    assert isinstance(refused.value, ClientError)
    assert (refused.value.code, refused.value.status) == ("WORKLOAD_UNAUTHORIZED", 403)
