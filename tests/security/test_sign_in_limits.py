"""Sign-ins are limited (issue 24, point 9): 300 sign-ins with one token in 2.5 s once left
300 sessions and 300 audit entries. Each client address, and each grant, may sign in a
bounded number of times a minute (``429`` with ``Retry-After`` beyond), and a grant holds a
bounded number of open sessions.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from support.dashboard import form_token
from support.factories import SIGNER, make_grant
from support.server import Server, serve

from feltdb import Subject, WorkloadStore
from feltdb.auth.policy import READ
from feltdb.server.limits import SIGN_INS_PER_GRANT, RateLimit
from feltdb.server.ui import sessions

PER_CLIENT = 5


@pytest.fixture
def guarded(new_target: Callable[..., str], backend: str, tmp_path: Path) -> Iterator[Server]:
    """A server letting one client address sign in 5 times a minute."""
    args = ("--sign-ins-per-client", str(PER_CLIENT))
    yield from serve(tmp_path, new_target("signins"), *args, backend=backend)


@pytest.fixture
def roomy(new_target: Callable[..., str], backend: str, tmp_path: Path) -> Iterator[Server]:
    """A server letting one client address sign in as often as the tests do."""
    yield from serve(tmp_path, new_target("signins"), backend=backend)


def _sign_in(server: Server, token: str) -> httpx.Response:
    with httpx.Client(base_url=server.url, timeout=10) as http:
        page = http.get("/ui/login")
        return http.post("/ui/login", data={"csrf": form_token(page.text), "token": token})


def _sessions_and_sign_ins(server: Server) -> tuple[int, int]:
    """How many sessions the store holds, and how many sign-ins its audit recorded."""
    with WorkloadStore.open(server.target) as store:
        rows = store.db.list_rows(sessions.SESSIONS_COLLECTION)
        logged = store.db.committed_transactions_after(0)
    signed = [t for t in logged if (t.audit or {}).get("kind") == "ui.signed_in"]
    return len(rows), len(signed)


def test_one_address_signs_in_a_bounded_number_of_times(guarded: Server) -> None:
    answers = [_sign_in(guarded, guarded.token("app", capabilities=[READ])) for _ in range(8)]
    statuses = [answer.status_code for answer in answers]
    assert statuses == [303] * PER_CLIENT + [429] * 3, statuses
    refused = answers[-1]
    assert int(refused.headers["Retry-After"]) >= 1
    assert "Too many sign-ins from this address" in refused.text
    assert _sessions_and_sign_ins(guarded) == (PER_CLIENT, PER_CLIENT), "refusals open nothing"


def test_one_grant_signs_in_a_bounded_number_of_times(roomy: Server) -> None:
    token = roomy.token("app", capabilities=[READ])
    statuses = [_sign_in(roomy, token).status_code for _ in range(SIGN_INS_PER_GRANT + 3)]
    assert statuses == [303] * SIGN_INS_PER_GRANT + [429] * 3, statuses
    refused = _sign_in(roomy, token)
    assert "Too many sign-ins with this grant" in refused.text
    # Another grant is not held back by this one.
    assert _sign_in(roomy, roomy.token("app", capabilities=[READ])).status_code == 303
    assert _sessions_and_sign_ins(roomy) == (SIGN_INS_PER_GRANT + 1, SIGN_INS_PER_GRANT + 1)


def test_a_grant_holds_a_bounded_number_of_open_sessions(
    new_target: Callable[..., str],
) -> None:
    with WorkloadStore.open(new_target("sessions")) as store:
        _fill_sessions(store)


def _fill_sessions(store: WorkloadStore) -> None:
    grant = make_grant(
        id="g-many", subject=Subject.human("ada"), capabilities={READ}, expires_at=999_999
    )
    evidence = SIGNER.sign(grant)
    cap = sessions.MAX_SESSIONS_PER_GRANT
    for n in range(cap):
        sessions.open_session(store.db, f"s{n}", evidence, 100 + n)
    # One more ends the oldest: a lost cookie never locks the grant out.
    sessions.open_session(store.db, "one-more", evidence, 200)
    assert sessions.session_of(store.db, "one-more", 200) is not None
    assert sessions.session_of(store.db, "s0", 200) is None
    assert all(sessions.session_of(store.db, f"s{n}", 200) for n in range(1, cap))
    assert len(store.db.list_rows(sessions.SESSIONS_COLLECTION)) == cap
    # Sessions past their end, not yet pruned, make no one wait.
    later = 200 + sessions.SESSION_LIFETIME_S + 1
    sessions.open_session(store.db, "next-day", evidence, later)
    assert sessions.session_of(store.db, "next-day", later) is not None
    assert len(store.db.list_rows(sessions.SESSIONS_COLLECTION)) == cap + 1
    signed_out = [
        t for t in store.db.committed_transactions_after(0)
        if (t.audit or {}).get("kind") == "ui.signed_out"
    ]  # fmt: skip
    assert len(signed_out) == 1, "the ending of the oldest is in the audit"


def test_a_bucket_refills_and_forgets_the_least_recent_keys() -> None:
    now = [0.0]
    limit = RateLimit(2, 2, max_keys=3, clock=lambda: now[0])
    assert [limit.take("a") for _ in range(3)] == [0, 0, 30]
    now[0] += 30
    assert limit.take("a") == 0
    for key in "bcd":
        limit.take(key)
    assert len(limit) == 3
