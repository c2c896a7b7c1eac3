"""The dashboard at ``/ui/`` over plain HTTP, as a browser without JavaScript uses it, against
the package's real ``feltdb serve`` of each backend (:mod:`support.server_fixtures`).

Each test seeds an application of its own (:func:`support.dashboard.seed`: 3 ``send``
succeeded, 2 ``report`` dead letters, 2 ``payout`` held for approval, 2 ``report`` READY
and a ``send`` whose input holds a script) and reads what its pages say, posts its forms,
and checks through the API what was done: a session on two servers, the approval inbox,
the dead letters and the audit, the overview's numbers, the workloads' filters.
"""

from __future__ import annotations

import html
import re
import ssl
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from support.dashboard import (
    APPROVER,
    REQUESTER,
    WORKER,
    Seeded,
    client,
    form_token,
    hold,
    ids_on,
    seed,
    signed_in,
    submission,
)
from support.server import Server, start_server, stop, wait_until_healthy

from feltdb import Subject
from feltdb.auth.verified import REVOCATION_BOUND_S
from feltdb.server.ui.viewer import COOKIE

TLS = ssl.create_default_context()
"""One TLS context for every client here (the servers are plain HTTP): a client then costs
no loading of certificates."""
OPS = Subject.human("ops")
"""Another approver, who decides through the API."""
ENDED_WITHIN_S = REVOCATION_BOUND_S + 0.5
"""How soon another server refuses a session ended or a grant revoked elsewhere."""


@pytest.fixture
def seeded(server: Server, app: str) -> Seeded:
    return seed(server, app)


@contextmanager
def session(
    server: Server, app: str, subject: Subject = APPROVER, **grant: Any
) -> Iterator[httpx.Client]:
    """A dashboard session of ``subject`` in ``app``, closed afterwards."""
    http = signed_in(server, server.token(app, subject=subject, **grant), verify=TLS)
    try:
        yield http
    finally:
        http.close()


@contextmanager
def browser(url: str, **options: Any) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=url, timeout=10, verify=TLS, **options) as http:
        yield http


def workload(server: Server, app: str, workload_id: str) -> dict[str, Any]:
    answer = httpx.get(
        f"{server.url}/v1/workloads/{workload_id}", headers=server.headers(app), verify=TLS
    )
    assert answer.status_code == 200, answer.text
    document: dict[str, Any] = answer.json()
    return document


def alert(page: str) -> str:
    """What the page's problem (``role="alert"``) says."""
    found = re.search(r'role="alert"[^>]*>([^<]*)<', page)
    assert found is not None, page
    return html.unescape(found.group(1))


def post(http: httpx.Client, path: str, **fields: Any) -> httpx.Response:
    """Post the form at ``path`` with the session's form token, without following."""
    csrf = form_token(http.get("/ui/").text)
    return http.post(path, data={"csrf": csrf, **fields}, follow_redirects=False)


# ------------------------------------------------------------------ two servers, one session


@contextmanager
def second_server(server: Server, home: Path) -> Iterator[str]:
    """Another ``feltdb serve`` of the same store and keyring as ``server``; its URL."""
    server.keyring.save(home / "keyring.json")
    process, url, log = start_server(
        home, "--db", server.target, "--keyring", str(home / "keyring.json")
    )
    try:
        wait_until_healthy(url, process, log)
        yield url
    finally:
        stop(process)


def refused_after(url: str, cookie: str, started: float) -> float:
    """Poll ``url``'s overview with ``cookie`` until it is refused; how long after
    ``started`` that was (the test fails past a few bounds).
    """
    with browser(url, headers={"Cookie": f"{COOKIE}={cookie}"}) as http:
        while time.monotonic() - started < 5 * ENDED_WITHIN_S:
            if http.get("/ui/").status_code == 303:
                return time.monotonic() - started
            time.sleep(0.05)
    pytest.fail(f"{url} still accepted the session {5 * ENDED_WITHIN_S}s after it ended")


@pytest.mark.multiprocess
def test_a_session_opened_on_one_server_holds_on_another_and_ends_on_both(
    server: Server, app: str, seeded: Seeded, tmp_path: Path
):
    leaver = server.grant(app, subject=Subject.human("leaver"))
    with second_server(server, tmp_path) as other, session(server, app) as ada:
        ada_cookie = ada.cookies[COOKIE]
        with browser(server.url) as anonymous:
            page = anonymous.get("/ui/login")
            anonymous.post(
                "/ui/login",
                data={"csrf": form_token(page.text), "token": server.keyring.sign(leaver)},
            )
            leaver_cookie = anonymous.cookies[COOKIE]
        # Both cookies work on the other server, and so do the forms of its pages.
        for cookie, who in ((ada_cookie, "human:ada"), (leaver_cookie, "human:leaver")):
            with browser(other, headers={"Cookie": f"{COOKIE}={cookie}"}) as there:
                inbox = there.get("/ui/approvals")
                assert inbox.status_code == 200, inbox.text
                assert f"{who} · t/{app}" in inbox.text
                assert sorted(ids_on(inbox.text, seeded.held)) == sorted(seeded.held)
        with browser(other, headers={"Cookie": f"{COOKIE}={ada_cookie}"}) as there:
            verified = there.post(
                "/ui/audit/verify", data={"csrf": form_token(ada.get("/ui/").text)}
            )
            assert verified.status_code == 200 and "Verified" in verified.text
        # Ada signs out on this server; the leaver's grant is revoked through it.
        started = time.monotonic()
        out = post(ada, "/ui/logout")
        assert out.status_code == 303 and out.headers["location"] == "/ui/login?signed_out"
        revoked = httpx.post(
            f"{server.url}/v1/grants/{leaver.id}/revoke", headers=server.headers(app), verify=TLS
        )
        assert revoked.status_code == 200, revoked.text
        assert ada.get("/ui/", follow_redirects=False).status_code == 303  # here: at once
        # There: within the bound of its remembered sessions.
        assert refused_after(other, ada_cookie, started) < ENDED_WITHIN_S
        assert refused_after(other, leaver_cookie, started) < ENDED_WITHIN_S
        with browser(other, headers={"Cookie": f"{COOKIE}={ada_cookie}"}) as there:
            assert there.post("/ui/logout", data={"csrf": "x"}).status_code == 401


# ------------------------------------------------------------------ the approval inbox


def input_hashes_on(html: str) -> dict[str, str]:
    """The input hash each workload's decision forms on the inbox page are bound to."""
    found: dict[str, str] = {}
    for article in re.findall(r'<article class="approval".*?</article>', html, re.S):
        workload_id = re.search(r'data-workload="([^"]+)"', article)
        hashes = set(re.findall(r'name="input_hash" value="([0-9a-f]{64})"', article))
        assert workload_id is not None and len(hashes) == 1, article
        found[workload_id.group(1)] = hashes.pop()
    return found


def test_approving_one_and_rejecting_another_with_a_reason(
    server: Server, app: str, seeded: Seeded
):
    first, second = seeded.held
    with session(server, app) as ada:
        inbox = ada.get("/ui/approvals").text
        hashes = input_hashes_on(inbox)
        assert set(hashes) == {first, second}
        for workload_id in (first, second):
            assert hashes[workload_id] == workload(server, app, workload_id)["input_hash"]
        assert "mallory@example.com" in inbox and "9000" in inbox  # the input reviewed

        approved = post(
            ada, f"/ui/approvals/{first}/decision", outcome="approved", input_hash=hashes[first]
        )
        assert approved.status_code == 303, approved.text
        assert approved.headers["location"] == f"/ui/approvals?decided={first}&outcome=approved"
        after = ada.get(approved.headers["location"]).text
        assert f'id="decided">{first} was approved by human:ada at ' in after
        assert list(input_hashes_on(after)) == [second]

        for blank in ({}, {"reason": ""}, {"reason": "   "}):
            refused = post(
                ada, f"/ui/approvals/{second}/decision",
                outcome="rejected", input_hash=hashes[second], **blank,
            )  # fmt: skip
            assert refused.status_code == 422, refused.text
            assert alert(refused.text) == f"{second} was not rejected: say why."
            assert workload(server, app, second)["state"] == "AWAITING_APPROVAL"
            assert "decision" not in workload(server, app, second)["approval"]

        rejected = post(
            ada, f"/ui/approvals/{second}/decision",
            outcome="rejected", input_hash=hashes[second], reason="9000 is over the limit",
        )  # fmt: skip
        assert rejected.status_code == 303, rejected.text
        assert 'id="empty">Nothing awaits approval.' in ada.get("/ui/approvals").text

    decided = workload(server, app, first)
    assert decided["state"] == "READY"
    assert decided["approval"]["decision"]["outcome"] == "approved"
    assert decided["approval"]["decision"]["decided_by"] == {"kind": "human", "id": "ada"}
    refused = workload(server, app, second)
    assert refused["state"] == "REJECTED"
    assert refused["approval"]["decision"]["reason"] == "9000 is over the limit"
    # A worker is handed the approved work, and only it.
    with client(server, WORKER, app) as worker:
        claim = worker.claim_next(definitions=["payout"])
        assert claim is not None and claim.workload_id == first
        assert worker.claim_next(definitions=["payout"]) is None


def test_a_decision_made_elsewhere_first_or_contradicting_one_is_answered_409_naming_the_decider(
    server: Server, app: str, seeded: Seeded
):
    first, second = seeded.held
    with session(server, app) as ada:
        hashes = input_hashes_on(ada.get("/ui/approvals").text)  # the page ada reviews
        # Ops decides the first through the API while ada reads.
        with client(server, OPS, app) as ops:
            ops.decide(first, "approved", None, hashes[first])
        decided_at = workload(server, app, first)["approval"]["decision"]["decided_at"]
        for outcome, reason in (("approved", None), ("rejected", "looks wrong")):
            fields = {"outcome": outcome, "input_hash": hashes[first]}
            answer = post(ada, f"/ui/approvals/{first}/decision", **fields, reason=reason or "")
            assert answer.status_code == 409, (outcome, answer.text)
            said = alert(answer.text)
            assert f"{first} was already approved by human:ops at " in said
            assert said.endswith("your decision was not recorded.")
        decision = workload(server, app, first)["approval"]["decision"]
        assert decision["decided_by"] == {"kind": "human", "id": "ops"}
        assert decision["decided_at"] == decided_at

        # Ada approves the second; her post again replays her decision (nothing new), and
        # the contrary decision after it is refused, naming her.
        fields = {"outcome": "approved", "input_hash": hashes[second]}
        assert post(ada, f"/ui/approvals/{second}/decision", **fields).status_code == 303
        decided = workload(server, app, second)["approval"]["decision"]
        again = post(ada, f"/ui/approvals/{second}/decision", **fields)
        assert again.status_code == 303
        assert workload(server, app, second)["approval"]["decision"] == decided
        contrary = post(
            ada, f"/ui/approvals/{second}/decision",
            outcome="rejected", input_hash=hashes[second], reason="changed my mind",
        )  # fmt: skip
        assert contrary.status_code == 409, contrary.text
        assert f"{second} was already approved by human:ada at " in alert(contrary.text)
        assert workload(server, app, second)["approval"]["decision"] == decided


def test_a_decision_on_input_other_than_the_page_showed_decides_nothing(
    server: Server, app: str, seeded: Seeded
):
    held = seeded.held[0]
    with session(server, app) as ada:
        stale = post(ada, f"/ui/approvals/{held}/decision", outcome="approved", input_hash="0" * 64)
    assert stale.status_code == 409, stale.text
    assert alert(stale.text) == (
        f"{held}'s input is not the input this page showed: nothing was decided. Review it again."
    )
    assert "decision" not in workload(server, app, held)["approval"]


def test_a_decision_after_the_approval_expired_decides_nothing(
    server: Server, app: str, seeded: Seeded
):
    with client(server, REQUESTER, app) as requester:
        admitted, _ = requester.submit(
            submission(
                "hurry", "payout", {"amount": 1}, approval={}, timeouts={"approval_ms": 1000}
            )
        )
    held = admitted.workload_id
    with session(server, app) as ada:
        input_hash = input_hashes_on(ada.get("/ui/approvals").text)[held]
        # The deadline falls a second after admission (in whole seconds): wait for it.
        time.sleep(max(0.0, admitted.created_at + 1.05 - time.time()))
        late = post(
            ada, f"/ui/approvals/{held}/decision", outcome="approved", input_hash=input_hash
        )
    assert late.status_code == 409, late.text
    # Whether the maintenance pass or the decision found it past its deadline, the page
    # says the approval expired.
    assert held in alert(late.text) and "expired" in alert(late.text), alert(late.text)
    assert "decision" not in workload(server, app, held)["approval"]


# ------------------------------------------------------------------ dead letters and the audit

AUDIT_ROW = re.compile(
    r'<tr><td class="num">(\d+)</td><td>[^<]*</td><td>([^<]*)</td>\s*'
    r'<td>(?:<a href="[^"]*">([^<]*)</a>)?</td>\s*<td>([^<]*)</td>'
)


def audit_rows(html: str) -> list[tuple[int, str, str, str]]:
    """The audit table's rows: revision, what, workload (or ``""``), actor."""
    return [(int(r), what, work, actor) for r, what, work, actor in AUDIT_ROW.findall(html)]


def test_dead_letters_retried_many_at_once_and_the_audit_that_records_it(
    server: Server, app: str, seeded: Seeded
):
    first, second = seeded.dead
    with session(server, app) as ada:
        listed = ada.get("/ui/dead-letters").text
        for workload_id in seeded.dead:
            assert f'name="workload_id" value="{workload_id}"' in listed
        assert "the mail relay refused the message" in listed  # why each died
        # and what the failed attempt did (the worker said: nothing)
        assert listed.count("Effect of the last attempt: <strong>none</strong>") == 2

        reasonless = post(ada, "/ui/dead-letters/retry", workload_id=seeded.dead)
        assert reasonless.status_code == 422, reasonless.text
        assert all(workload(server, app, w)["state"] == "DEAD_LETTER" for w in seeded.dead)

        retried = post(
            ada, "/ui/dead-letters/retry", workload_id=seeded.dead, reason="relay is back"
        )
        assert retried.status_code == 200, retried.text
        outcomes = re.search(
            r'<section class="notice" role="status" id="outcomes">.*?</section>', retried.text, re.S
        )
        assert outcomes is not None
        assert f"{first}: re-armed" in outcomes.group(
            0
        ) and f"{second}: re-armed" in outcomes.group(0)
        assert 'id="empty">No dead letters.' in retried.text
        for workload_id in seeded.dead:
            after = workload(server, app, workload_id)
            assert after["state"] == "READY"
            assert after["execution_history"][-1]["actor"] == "human:ada"

        rows = audit_rows(ada.get("/ui/audit").text)
        revisions = [revision for revision, *_ in rows]
        assert revisions == sorted(revisions, reverse=True)  # newest first
        assert rows[0][1:] == ("retry", second, "human:ada")
        assert rows[1][1:] == ("retry", first, "human:ada")
        # This application's commits, and only them: the seed's 25, ada's sign-in, 2 retries.
        assert len(rows) == 28
        assert rows[2][1:] == ("ui.signed_in", "", "human:ada")

        of_first = audit_rows(ada.get("/ui/audit", params={"workload": first}).text)
        assert [what for _, what, _, _ in of_first] == ["retry", "fail", "start", "claim", "admit"]
        assert {work for _, _, work, _ in of_first} == {first}

        by_ada = audit_rows(ada.get("/ui/audit", params={"subject": "human:ada"}).text)
        assert [(what, work) for _, what, work, _ in by_ada][:2] == [
            ("retry", second),
            ("retry", first),
        ]
        assert {actor for *_, actor in by_ada} == {"human:ada"}
        by_worker = audit_rows(ada.get("/ui/audit", params={"subject": "worker:w1"}).text)
        assert by_worker and {actor for *_, actor in by_worker} == {"worker:w1"}

        verified = post(ada, "/ui/audit/verify")
        assert verified.status_code == 200
        assert "<strong>Verified:</strong> the chain holds" in verified.text


# ------------------------------------------------------------------ the overview and the lists

COUNTS_ROW = re.compile(r'<tr><th scope="row"><a [^>]*>([^<]+)</a></th>(.*?)</tr>', re.S)
CELL = re.compile(r'<td class="num">(?:<a [^>]*>)?(\d+)(?:</a>)?</td>')


def counts_on(html: str) -> tuple[list[str], dict[str, list[int]]]:
    """The overview's table: its state columns, and each definition's numbers (the last
    is the total).
    """
    head = re.search(r'<table id="counts">.*?<thead>(.*?)</thead>', html, re.S)
    assert head is not None, html
    states = re.findall(r'<th scope="col" class="num">([^<]+)</th>', head.group(1))
    rows = {name: [int(n) for n in CELL.findall(cells)] for name, cells in COUNTS_ROW.findall(html)}
    return states, rows


def test_the_overview_counts_the_seed_and_charts_its_last_hour(
    server: Server, app: str, seeded: Seeded
):
    with session(server, app) as ada:
        page = ada.get("/ui/").text
    states, rows = counts_on(page)
    assert states == ["ready", "succeeded", "dead letter", "awaiting approval", "all"]
    assert rows == {
        "payout": [0, 0, 0, 2, 2],
        "report": [2, 0, 2, 0, 4],
        "send": [1, 3, 0, 0, 4],
    }
    waiting = re.search(r'<ul id="oldest-ready">(.*?)</ul>', page, re.S)
    assert waiting is not None
    assert "<strong>report</strong>: 2 ready" in waiting.group(1)
    assert "<strong>send</strong>: 1 ready" in waiting.group(1)
    assert "payout" not in waiting.group(1)
    recent = page.split('id="recent-dead"', 1)[1]
    assert sorted(ids_on(recent, seeded.dead)) == sorted(seeded.dead)
    assert ids_on(recent, [*seeded.held, *seeded.ready, *seeded.succeeded]) == []
    # The chart: the 3 completions (and the 2 failures) of the seed, all in the last hour.
    assert "In all, <strong>3</strong> completed and <strong>2</strong> failed." in page
    completed = [int(n) for n in re.findall(r"<title>\d\d:\d\d UTC: (\d+) completed</title>", page)]
    failed = [int(n) for n in re.findall(r"<title>\d\d:\d\d UTC: (\d+) failed</title>", page)]
    assert sum(completed) == 3 and sum(failed) == 2
    assert page.count('<rect class="done"') == len(completed)


def test_the_workloads_table_filters_by_state_definition_and_text(
    server: Server, app: str, seeded: Seeded
):
    everything = [*seeded.succeeded, *seeded.dead, *seeded.held, *seeded.ready, seeded.script]

    def listed(**query: str) -> list[str]:
        page = ada.get("/ui/workloads", params=query)
        assert page.status_code == 200, page.text
        return sorted(ids_on(page.text, everything))

    with session(server, app) as ada:
        assert listed() == sorted(everything)
        assert listed(state="DEAD_LETTER") == sorted(seeded.dead)
        assert listed(state="READY", definition="report") == sorted(seeded.ready)
        assert listed(definition="payout") == sorted(seeded.held)
        assert listed(q="nightly") == sorted(seeded.dead)  # idempotency keys nightly-0, -1
        assert listed(q=seeded.held[1][-10:]) == [seeded.held[1]]  # a part of an id
        assert listed(q="no-such-thing") == []
        kept = ada.get("/ui/workloads", params={"state": "READY", "definition": "report"}).text
        assert '<option value="READY" selected>' in kept
        assert 'name="definition" value="report"' in kept


def test_a_workload_is_cancelled_and_a_dead_letter_retried_from_its_page(
    server: Server, app: str, seeded: Seeded
):
    ready, dead = seeded.ready[0], seeded.dead[0]
    with session(server, app) as ada:
        page = ada.get(f"/ui/workloads/{ready}").text
        assert f'action="/ui/workloads/{ready}/cancel"' in page
        cancelled = post(ada, f"/ui/workloads/{ready}/cancel")
        assert cancelled.status_code == 303
        assert cancelled.headers["location"] == f"/ui/workloads/{ready}?done=cancelled"
        after = ada.get(cancelled.headers["location"]).text
        assert '<p class="notice" role="status">Cancelled.</p>' in after
        assert f'action="/ui/workloads/{ready}/cancel"' not in after
        assert workload(server, app, ready)["state"] == "CANCELLED"

        assert f'action="/ui/workloads/{dead}/retry"' in ada.get(f"/ui/workloads/{dead}").text
        reasonless = post(ada, f"/ui/workloads/{dead}/retry")
        assert reasonless.status_code == 422
        assert workload(server, app, dead)["state"] == "DEAD_LETTER"
        retried = post(ada, f"/ui/workloads/{dead}/retry", reason="the relay is back")
        assert retried.status_code == 303
        assert retried.headers["location"] == f"/ui/workloads/{dead}?done=retried"
        assert "Re-armed: it is READY" in ada.get(retried.headers["location"]).text
        assert workload(server, app, dead)["state"] == "READY"


def test_a_page_asked_for_signed_out_is_shown_after_sign_in(
    server: Server, app: str, seeded: Seeded
):
    asked = "/ui/workloads?state=READY&definition=report"
    with browser(server.url) as http:
        away = http.get(asked)
        assert away.status_code == 303
        login = http.get(away.headers["location"])
        assert 'name="next" value="/ui/workloads?state=READY&amp;definition=report"' in login.text
        answer = http.post(
            "/ui/login",
            data={
                "csrf": form_token(login.text),
                "token": server.token(app, subject=APPROVER),
                "next": asked,
            },
        )
        assert answer.status_code == 303 and answer.headers["location"] == asked
        page = http.get(asked, follow_redirects=False)
    assert page.status_code == 200
    assert sorted(ids_on(page.text, seeded.ready)) == sorted(seeded.ready)


def test_the_inbox_offers_no_decision_its_viewer_may_not_make(
    server: Server, app: str, seeded: Seeded
):
    # Ada asked for this payout herself: the requester may never decide its own work.
    with client(server, APPROVER, app) as own:
        mine = hold(own, "self-approval", {"amount": 5})
    with session(server, app) as ada:
        inbox = ada.get("/ui/approvals").text
        articles = dict(
            re.findall(
                r'<article class="approval"[^>]*data-workload="([^"]+)"(.*?)</article>', inbox, re.S
            )
        )
        assert "you asked for it" in articles[mine] and ">Approve<" not in articles[mine]
        assert ">Approve<" in articles[seeded.held[0]]  # the others' she may decide
        other = ada.get(f"/ui/workloads/{seeded.held[1]}").text
        assert "Decide it in the approval inbox" in other
        assert "Decide it in the approval inbox" not in ada.get(f"/ui/workloads/{mine}").text
        forged = post(
            ada, f"/ui/approvals/{mine}/decision", outcome="approved",
            input_hash=workload(server, app, mine)["input_hash"],
        )  # fmt: skip
    assert forged.status_code == 403 and "its own work" in alert(forged.text), forged.text
    assert "decision" not in workload(server, app, mine)["approval"]


def test_the_inbox_shows_the_start_of_a_long_input_and_where_to_read_it_whole(
    server: Server, app: str
):
    long_input = {"lines": [f"refund line {n:04d}" for n in range(400)]}
    with client(server, REQUESTER, app) as requester:
        held = hold(requester, "long-refund", long_input)
    with session(server, app) as ada:
        inbox = ada.get("/ui/approvals").text
        whole = ada.get(f"/ui/workloads/{held}").text
    (article,) = re.findall(
        rf'<article class="approval"[^>]*data-workload="{held}"(.*?)</article>', inbox, re.S
    )
    assert "refund line 0000" in article and "refund line 0399" not in article
    assert re.search(rf'first 500 of \d+ characters: <a href="/ui/workloads/{held}">', article)
    assert "refund line 0399" in whole  # the workload's own page shows all of it
    assert workload(server, app, held)["input_hash"] in article  # what is decided on


def test_the_workloads_table_tells_ready_work_that_waits_for_another(server: Server, app: str):
    with client(server, REQUESTER, app) as requester:
        first, _ = requester.submit(submission("extract-1", "extract", {}))
        second, _ = requester.submit(
            submission("load-1", "load", {}, dependencies=[{"workload_id": first.workload_id}])
        )
    with session(server, app) as ada:
        table = ada.get("/ui/workloads", params={"definition": "load"}).text
    (row,) = re.findall(
        rf'<tr>\s*<td><a href="/ui/workloads/{second.workload_id}">.*?</tr>', table, re.S
    )
    assert "waits for" in row and first.workload_id in row and "succeeded" in row


def test_an_expired_approval_is_told_plainly_on_its_pages(server: Server, app: str):
    with client(server, REQUESTER, app) as requester:
        held, _ = requester.submit(
            submission("short-wait", "payout", {"n": 1}, approval={},
                       timeouts={"approval_ms": 1000})
        )  # fmt: skip
    # The server's maintenance times it out within its interval; wait for it.
    deadline = time.monotonic() + 30
    while workload(server, app, held.workload_id)["state"] != "DEAD_LETTER":
        assert time.monotonic() < deadline, "the approval never expired"
        time.sleep(0.2)
    with session(server, app) as ada:
        page = ada.get(f"/ui/workloads/{held.workload_id}").text
        dead = ada.get("/ui/dead-letters").text
    ended = re.search(r'<dd id="ended">([^<]*)</dd>', page)
    assert ended is not None and html.unescape(ended.group(1)).startswith("approval expired at "), (
        page
    )
    assert "after it was asked, undecided" in ended.group(1)
    fell = str(held.created_at + 1)
    assert f"<dd>{fell}</dd>" not in page, "the deadline shown as raw seconds"
    assert "approval expired at" in dead


def test_an_approver_lands_on_the_inbox_not_on_an_overview_of_refusals(
    server: Server, app: str, seeded: Seeded
):
    from feltdb.auth.policy import APPROVE

    with session(server, app, capabilities={APPROVE}) as approver:
        landed = approver.get("/ui/")
    assert landed.url.path == "/ui/approvals"
    assert "Approval inbox" in landed.text and "Your grant does not" not in landed.text
    with session(server, app) as everyone:
        assert everyone.get("/ui/").url.path == "/ui/"
