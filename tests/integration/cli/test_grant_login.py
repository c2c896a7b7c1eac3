"""``feltdb grant issue --login``: a one-time sign-in link to the dashboard instead of a
token, run in process (:func:`support.cli.invoke`), and the link used against a real
``feltdb serve`` (this package's server, :mod:`tests.integration.cli.conftest`).
"""

from __future__ import annotations

import re
import time
from pathlib import Path

import httpx
import pytest
from support.cli import invoke
from support.dashboard import form_token
from support.server import Server

from feltdb import Subject
from feltdb.auth.policy import ALL_CAPABILITIES, APPROVE, READ
from feltdb.auth.sessions import TICKET_LIFETIME_S, verify_ticket
from feltdb.auth.tokens import Keyring
from feltdb.errors import WorkloadError
from feltdb.server.ui.viewer import COOKIE

LINK = re.compile(r"(?P<server>.+)/ui/login#ticket=(?P<ticket>fgl1\.[A-Za-z0-9_-]+)")
GRANT_ID = re.compile(r"\bgrant (grant_[0-9a-f]{24})\b")


@pytest.fixture
def keyring_file(tmp_path: Path) -> Path:
    path = tmp_path / "keyring.json"
    made = invoke("keys", "new", "--out", str(path))
    assert made.exit_code == 0, made.output
    return path


def issued_link(*args: str) -> tuple[str, str, str]:
    """Run ``feltdb grant issue ARGS``; the server its one line names, the ticket, and the
    grant id its standard error names.
    """
    result = invoke("grant", "issue", *args)
    assert result.exit_code == 0, (result.stdout, result.stderr, result.exception)
    lines = result.stdout.splitlines()
    assert len(lines) == 1, result.stdout
    link = LINK.fullmatch(lines[0])
    assert link is not None, lines[0]
    named = GRANT_ID.search(result.stderr)
    assert named is not None, result.stderr
    assert "fgt2." not in result.stdout and "fgt2." not in result.stderr  # no token printed
    assert link.group("ticket") not in result.stderr
    return link.group("server"), link.group("ticket"), named.group(1)


def test_an_admin_login_link_is_one_line_on_stdout_naming_its_grant_on_stderr(
    keyring_file: Path,
):
    before = int(time.time())
    where, ticket, grant_id = issued_link(
        "--admin", "--login", "--server", "http://127.0.0.1:8123", "--keyring", str(keyring_file)
    )
    assert where == "http://127.0.0.1:8123"
    verified = verify_ticket(Keyring.load(keyring_file), ticket, int(time.time()))
    grant = verified.grant
    assert grant.id == grant_id
    assert grant.subject == Subject.human("admin")
    assert (grant.tenant_id, grant.application_id) == ("default", "default")
    assert grant.capabilities == ALL_CAPABILITIES
    assert before <= grant.issued_at <= int(time.time())
    assert grant.expires_at - grant.issued_at == 86400  # an admin's day
    assert verified.expires_at == grant.issued_at + TICKET_LIFETIME_S  # the link: 10 minutes


def test_a_login_link_carries_the_grant_asked_for(keyring_file: Path):
    where, ticket, grant_id = issued_link(
        "--login", "--server", "https://feltdb.example/", "--keyring", str(keyring_file),
        "--subject", "human:ada", "--tenant", "t", "--application", "shop",
        "--capability", READ, "--capability", APPROVE, "--definition", "payout",
        "--lifetime", "120",
    )  # fmt: skip
    assert where == "https://feltdb.example"  # the server's trailing slash is not doubled
    verified = verify_ticket(Keyring.load(keyring_file), ticket, int(time.time()))
    grant = verified.grant
    assert grant.id == grant_id
    assert grant.subject == Subject.human("ada")
    assert (grant.tenant_id, grant.application_id) == ("t", "shop")
    assert grant.capabilities == {READ, APPROVE}
    assert grant.constraints.definitions == {"payout"}
    assert [r.uri for r in grant.resources] == ["flow://shop/*"]
    assert grant.expires_at - grant.issued_at == 120
    assert verified.expires_at == grant.expires_at  # the grant ends before the link would


def test_a_login_link_points_at_the_default_server_unless_told(keyring_file: Path):
    where, _, _ = issued_link("--admin", "--login", "--keyring", str(keyring_file))
    assert where == "http://127.0.0.1:8700"


def test_a_login_link_verifies_with_its_keyring_only(keyring_file: Path, tmp_path: Path):
    _, ticket, _ = issued_link("--admin", "--login", "--keyring", str(keyring_file))
    with pytest.raises(WorkloadError, match="signature does not verify"):
        verify_ticket(Keyring.generate(Keyring.load(keyring_file).active), ticket, int(time.time()))
    with pytest.raises(WorkloadError, match="expired"):
        verify_ticket(Keyring.load(keyring_file), ticket, int(time.time()) + TICKET_LIFETIME_S)


def test_without_login_the_command_still_prints_a_token(keyring_file: Path):
    result = invoke("grant", "issue", "--admin", "--keyring", str(keyring_file))
    assert result.exit_code == 0, result.stderr
    assert result.stdout.startswith("fgt2.") and "/ui/login" not in result.stdout


def test_the_printed_link_signs_a_browser_in_once(server: Server, tmp_path: Path):
    keyring = tmp_path / "server-keyring.json"
    server.keyring.save(keyring)
    application = "login-link"
    where, ticket, _ = issued_link(
        "--login", "--server", server.url, "--keyring", str(keyring), "--subject", "human:ada",
        "--tenant", "t", "--application", application, "--capability", READ,
    )  # fmt: skip
    assert where == server.url

    def sign_in(http: httpx.Client) -> httpx.Response:
        # What the page's script does with the link's fragment: post it as the ticket.
        page = http.get("/ui/login")
        assert page.status_code == 200
        return http.post("/ui/login", data={"csrf": form_token(page.text), "ticket": ticket})

    with httpx.Client(base_url=where, timeout=10) as browser:
        answer = sign_in(browser)
        assert answer.status_code == 303 and answer.headers["location"] == "/ui/"
        assert COOKIE in browser.cookies
        overview = browser.get("/ui/")
        assert overview.status_code == 200
        assert f"human:ada · t/{application}" in overview.text
    with httpx.Client(base_url=where, timeout=10) as another:
        again = sign_in(another)
        assert again.status_code == 401
        assert "used already" in again.text
        assert COOKIE not in another.cookies
