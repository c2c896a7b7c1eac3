"""The server's verified-token cache (issue 12, point 3) never lets through what the full
check would refuse, but for the documented revocation bound.

A server remembers a token it verified for at most ``REVOCATION_BOUND_S`` (1 s, see
:mod:`feltdb.auth.verified`): a revocation committed elsewhere (the store written
directly, another server) refuses the token within that bound; one through the server's
own revoke route, at once. Expiry is checked on every request against its clock, and only
the exact token hits.

Against a real ``feltdb serve`` per backend (the package's ``server``), and against
in-process apps whose request clock and cache clock the test moves, where what is
compared is the answer of a server that never saw the token.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest
from fastapi import FastAPI
from support.attack import bearer
from support.server import Server, start_server, stop, wait_until_healthy

from feltdb import Grant, ResourceScope, ResourceScopeKind, Subject, WorkloadStore
from feltdb.auth.policy import ALL_CAPABILITIES, REVOKE, application_grant
from feltdb.auth.tokens import Keyring
from feltdb.auth.verified import (
    MAX_CACHED_TOKEN_CHARS,
    MAX_ENTRIES,
    REVOCATION_BOUND_S,
    VerifiedTokens,
)
from feltdb.server.app import create_app

MARGIN_S = 0.25
"""Added to the bound before a request that must be refused: the bound is the server's
promise, the margin only absorbs the test's own clock reads."""

REVOKER = {"subject": Subject.human("security"), "capabilities": [REVOKE]}


def lists(http: httpx.Client, token: str) -> httpx.Response:
    return http.get("/v1/workloads", params={"limit": 1}, headers=bearer(token))


def revoked_refusal(answer: httpx.Response, grant: Grant) -> None:
    assert answer.status_code == 403, answer.text
    assert answer.json()["error"]["code"] == "WORKLOAD_UNAUTHORIZED"
    assert answer.json()["error"]["details"] == {"grant_id": grant.id}


def warm(http: httpx.Client, token: str) -> None:
    """Requests under ``token``: verified once, then (within the bound) remembered."""
    for _ in range(3):
        assert lists(http, token).status_code == 200


def one_byte_changed(token: str, position: int) -> str:
    """``token`` with the character at ``position`` replaced by another base64url one."""
    replacement = "A" if token[position] != "A" else "B"
    return token[:position] + replacement + token[position + 1 :]


# --- against a real server ----------------------------------------------------------------


def test_a_grant_revoked_in_the_store_by_another_process_is_refused_within_the_bound(
    server: Server, http: httpx.Client, app: str
):
    grant = server.grant(app)
    token = server.keyring.sign(grant)
    warm(http, token)
    with WorkloadStore.open(server.target) as store:  # behind the server's back
        assert store.grants.revoke(
            grant.id, "human:ops", int(time.time()), tenant_id="t", application_id=app
        )
    time.sleep(REVOCATION_BOUND_S + MARGIN_S)
    for _ in range(3):
        revoked_refusal(lists(http, token), grant)
    # Another grant of the application, as warm, is untouched.
    other = server.token(app)
    warm(http, other)


def test_a_grant_revoked_through_the_server_is_refused_at_once(
    server: Server, http: httpx.Client, app: str
):
    grant = server.grant(app)
    token = server.keyring.sign(grant)
    warm(http, token)
    answer = http.post(f"/v1/grants/{grant.id}/revoke", headers=server.headers(app, **REVOKER))
    assert answer.json()["revoked"] is True, answer.text
    # The very next request, well within the bound: refused.
    revoked_refusal(lists(http, token), grant)
    # Revoking again (already revoked) changes nothing, and still refuses at once.
    again = http.post(f"/v1/grants/{grant.id}/revoke", headers=server.headers(app, **REVOKER))
    assert again.json()["revoked"] is False, again.text
    revoked_refusal(lists(http, token), grant)


@pytest.fixture
def second_server(server: Server, tmp_path: Path) -> Iterator[str]:
    """Another ``feltdb serve`` on the same store and keyring: its URL."""
    home = tmp_path
    keyring = server.log.parent / "keyring.json"
    process, url, log = start_server(home, "--db", server.target, "--keyring", str(keyring))
    try:
        wait_until_healthy(url, process, log)
        yield url
    finally:
        stop(process)


def test_a_grant_revoked_through_another_server_is_refused_within_the_bound(
    server: Server, http: httpx.Client, app: str, second_server: str
):
    grant = server.grant(app)
    token = server.keyring.sign(grant)
    with httpx.Client(base_url=second_server, timeout=15.0) as other:
        warm(other, token)
        warm(http, token)
        answer = http.post(f"/v1/grants/{grant.id}/revoke", headers=server.headers(app, **REVOKER))
        assert answer.json()["revoked"] is True, answer.text
        revoked_refusal(lists(http, token), grant)  # at once, on the server that revoked
        time.sleep(REVOCATION_BOUND_S + MARGIN_S)
        revoked_refusal(lists(other, token), grant)  # within the bound, on the other


def test_a_cached_token_is_refused_from_the_second_it_expires(
    server: Server, http: httpx.Client, app: str
):
    now = int(time.time())
    expires_at = now + 2
    token = server.token(app, issued_at=now - 60, lifetime=expires_at - (now - 60))
    accepted = 0
    refused = 0
    while time.time() < expires_at + REVOCATION_BOUND_S / 2:
        sent_at = time.time()
        answer = lists(http, token)
        if sent_at >= expires_at:  # the server's clock reads at least expires_at
            assert answer.status_code == 403, answer.text
            assert answer.json()["error"]["message"] == "grant has expired"
            refused += 1
        else:
            accepted += answer.status_code == 200
    assert accepted and refused  # it was warm, up to the second it expired


def test_a_token_changed_in_one_byte_is_never_served_from_the_cache(
    server: Server, http: httpx.Client, app: str
):
    token = server.token(app)
    warm(http, token)
    # Every 32nd character, the prefix's and the signature's included, but the last: its
    # low bits are base64 padding, so some changes to it decode to the same bytes.
    for position in [*range(0, len(token) - 1, 32), len(token) - 2]:
        changed = one_byte_changed(token, position)
        answer = lists(http, changed)
        assert answer.status_code in (401, 403), (position, answer.text)
    assert lists(http, token).status_code == 200


# --- in-process apps: the clocks are the test's -------------------------------------------


class Clock:
    """A clock the test sets: the request clock (unix seconds) or the cache's monotonic."""

    def __init__(self, at: float) -> None:
        self.at = at

    def __call__(self) -> Any:
        return self.at


NOW = 1_000_000


class InProcess:
    """An app over a store in ``tmp_path``, its request clock and cache clock the test's."""

    def __init__(
        self,
        path: Path,
        keyring: Keyring,
        *,
        max_entries: int = MAX_ENTRIES,
        bound_s: float = REVOCATION_BOUND_S,
    ) -> None:
        self.store = WorkloadStore.open(str(path))
        self.keyring = keyring
        self.clock = Clock(NOW)
        self.monotonic = Clock(5_000.0)
        self.app: FastAPI = create_app(
            self.store, keyring, clock=self.clock, maintenance_interval_s=None
        )
        cache = VerifiedTokens[Any](
            bound_s=bound_s, max_entries=max_entries, monotonic=self.monotonic
        )
        self.app.state.server = dataclasses.replace(self.app.state.server, verified=cache)

    @property
    def cache(self) -> VerifiedTokens[Any]:
        verified: VerifiedTokens[Any] = self.app.state.server.verified
        return verified

    def lists(self, *tokens: str) -> list[tuple[int, Any]]:
        """``GET /v1/workloads`` under each token in turn: (status, JSON) each."""

        async def run() -> list[tuple[int, Any]]:
            transport = httpx.ASGITransport(app=self.app)
            async with httpx.AsyncClient(transport=transport, base_url="http://app") as client:
                answers = []
                for token in tokens:
                    answer = await client.get("/v1/workloads", headers=bearer(token))
                    answers.append((answer.status_code, answer.json()))
                return answers

        return asyncio.run(run())

    def close(self) -> None:
        self.store.close()


@pytest.fixture
def keyring() -> Keyring:
    return Keyring.generate()


@pytest.fixture
def served(tmp_path: Path, keyring: Keyring) -> Iterator[InProcess]:
    app = InProcess(tmp_path / "served.db", keyring)
    yield app
    app.close()


@pytest.fixture
def cold(tmp_path: Path, keyring: Keyring) -> Iterator[InProcess]:
    """Another app on the same keyring that never saw any token: the answer without a
    cache."""
    app = InProcess(tmp_path / "cold.db", keyring, bound_s=0.0)  # never served from memory
    yield app
    app.close()


def admin_grant(*, lifetime: int = 3600, grant_id: str | None = None) -> Grant:
    return application_grant(
        Subject.human("ada"),
        "t",
        "app",
        ALL_CAPABILITIES,
        issued_at=NOW - 60,
        expires_at=NOW - 60 + lifetime,
        grant_id=grant_id,
    )


def test_a_revocation_written_elsewhere_is_in_force_once_the_bound_has_passed(
    served: InProcess,
):
    grant = admin_grant()
    token = served.keyring.sign(grant)
    assert served.lists(token) == [(200, {"items": [], "next_cursor": None})]
    served.store.grants.revoke(grant.id, "human:ops", NOW, tenant_id="t", application_id="app")
    # Within the bound the check of a moment ago stands: this is the documented bound.
    served.monotonic.at += REVOCATION_BOUND_S / 2
    assert served.lists(token)[0][0] == 200
    served.monotonic.at += REVOCATION_BOUND_S / 2
    status, body = served.lists(token)[0]
    assert (status, body["error"]["details"]) == (403, {"grant_id": grant.id})
    assert len(served.cache) == 0


def test_a_check_under_way_when_a_revocation_commits_stores_nothing(served: InProcess):
    grant = admin_grant()
    token = served.keyring.sign(grant)
    check = served.cache.begin()  # a request read "not revoked"…
    served.app.state.server.forget_grant(grant.id, tenant_id="t", application_id="app")
    served.cache.put(token, grant, "caller", check)  # …and would store it after the revoke
    assert len(served.cache) == 0
    assert served.cache.get(token, NOW) is None


@pytest.mark.parametrize(
    ("moved_to", "message"),
    [(NOW + 60, "grant has expired"), (NOW + 3600, "grant has expired")],
    ids=["at expiry", "past expiry"],
)
def test_a_cached_token_past_its_expiry_is_refused_exactly_as_without_the_cache(
    served: InProcess, cold: InProcess, moved_to: int, message: str
):
    token = served.keyring.sign(admin_grant(lifetime=120))  # expires at NOW + 60
    assert served.lists(token)[0][0] == 200
    served.clock.at = cold.clock.at = moved_to  # the cache's own clock has not moved
    answer = served.lists(token)
    assert answer == cold.lists(token)
    assert answer[0][0] == 403 and answer[0][1]["error"]["message"] == message
    assert len(served.cache) == 0


def test_a_cached_token_before_its_validity_is_refused_exactly_as_without_the_cache(
    served: InProcess, cold: InProcess
):
    token = served.keyring.sign(admin_grant())  # valid from NOW - 60
    assert served.lists(token)[0][0] == 200
    served.clock.at = cold.clock.at = NOW - 61  # the request clock went back
    answer = served.lists(token)
    assert answer == cold.lists(token)
    assert answer[0][1]["error"]["message"] == "grant is not valid yet"


def test_every_one_byte_change_answers_as_on_a_server_that_never_saw_the_token(
    served: InProcess, cold: InProcess
):
    token = served.keyring.sign(admin_grant())
    assert served.lists(token)[0][0] == 200
    # Every character of the prefix and of the last 64 (the signature's), every fourth
    # of the rest.
    positions = sorted({*range(6), *range(5, len(token), 4), *range(len(token) - 64, len(token))})
    changed = [one_byte_changed(token, p) for p in positions]
    answers = served.lists(*changed)
    assert answers == cold.lists(*changed)
    # Every one is refused but, perhaps, a change of the last character that only touches
    # its base64 padding bits: that decodes to the very token, verified in full as before.
    assert all(status in (401, 403) for status, _ in answers[:-1])
    assert served.lists(token)[0][0] == 200


def test_the_cache_holds_at_most_its_bound_of_tokens(tmp_path: Path, keyring: Keyring):
    app = InProcess(tmp_path / "bounded.db", keyring, max_entries=8)
    try:
        tokens = [keyring.sign(admin_grant(grant_id=f"g-{n}")) for n in range(30)]
        assert {status for status, _ in app.lists(*tokens)} == {200}
        assert len(app.cache) == 8
        # The evicted ones are verified again, in full; the bound still holds.
        assert {status for status, _ in app.lists(*tokens[:10])} == {200}
        assert len(app.cache) == 8
        # A token longer than MAX_CACHED_TOKEN_CHARS is verified every time, never kept.
        app.cache.clear()
        big = msgspec.structs.replace(
            admin_grant(),
            resources=[
                ResourceScope(kind=ResourceScopeKind.WORKLOAD, uri=f"flow://app/w{n:04d}/*")
                for n in range(1000)
            ]
            + admin_grant().resources,
        )
        long_token = keyring.sign(big)
        assert len(long_token) > MAX_CACHED_TOKEN_CHARS
        assert app.lists(long_token)[0][0] == 200
        assert len(app.cache) == 0
    finally:
        app.close()


def test_the_default_bound_is_ten_thousand_tokens():
    cache = VerifiedTokens[int](monotonic=lambda: 0.0)
    grant = admin_grant()
    for n in range(MAX_ENTRIES + 50):
        cache.put(f"token-{n}", grant, n, cache.begin())
    assert len(cache) == MAX_ENTRIES == 10_000
    assert cache.get("token-0", NOW) is None  # the oldest went first
    assert cache.get(f"token-{MAX_ENTRIES + 49}", NOW) == MAX_ENTRIES + 49
