"""The token a worker keeps (:mod:`feltdb.worker.tokens`): when it warns of the expiry, and
what it takes from its token file, on a clock of the test's own."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest
from support.factories import make_grant

from feltdb import Subject
from feltdb.auth.tokens import Keyring
from feltdb.client import Client
from feltdb.errors import ErrorCode, WorkloadError
from feltdb.fields import instant_text
from feltdb.worker.tokens import FILE_CHECK_S, TokenKeeper, notice_at, read_token, until

KEYRING = Keyring.generate()
T0 = 1_800_000_000
"""The test clock's start, in unix seconds."""


def token(lifetime: int = 3600, issued_at: int = T0, **overrides: object) -> str:
    """A token of worker ``w1`` in ``default``/``default``, issued at ``issued_at``."""
    fields: dict[str, object] = {
        "subject": Subject.worker("w1"),
        "tenant_id": "default",
        "application_id": "default",
        "capabilities": {"workload:claim", "email:send"},
        "issued_at": issued_at,
        "expires_at": issued_at + lifetime,
        **overrides,
    }
    return KEYRING.sign(make_grant(**fields))


class Keeping:
    """A keeper on a clock the test moves, recording the tokens it hands the client."""

    def __init__(self, first: str, path: Path | None) -> None:
        self.now = float(T0)
        self.used: list[str] = []
        self.keeper = TokenKeeper(first, path, self.used.append, clock=lambda: self.now)

    def at(self, seconds: float) -> None:
        """Move the clock to ``T0 + seconds`` and tend the token."""
        self.now = T0 + seconds
        self.keeper.tend()


def write(path: Path, text: str) -> None:
    """Replace ``path`` by a rename, as a rotation should (never seen half-written)."""
    beside = path.with_suffix(".new")
    beside.write_text(text)
    os.replace(beside, path)


def warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]


@pytest.fixture(autouse=True)
def _capture(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="feltdb.worker")


# ------------------------------------------------------------------ when it warns


@pytest.mark.parametrize(
    ("lifetime", "notice"),
    [(3600, 360), (60, 300), (30 * 86400, 3 * 86400), (3, 300)],
)
def test_the_notice_is_a_tenth_of_the_lifetime_or_five_minutes_whichever_is_more(
    lifetime: int, notice: int
) -> None:
    grant = make_grant(issued_at=T0, expires_at=T0 + lifetime)
    assert notice_at(grant) == T0 + lifetime - notice


@pytest.mark.parametrize(
    ("seconds", "said"),
    [(3598, "in 59m 58s"), (30 * 86400, "in 30d 0h"), (90061, "in 1d 1h"), (3, "in 3s"),
     (0, "in 0s"), (-65, "1m 5s ago")],
)  # fmt: skip
def test_how_far_an_instant_is_is_said_in_its_two_largest_units(seconds: int, said: str) -> None:
    assert until(T0 + seconds, T0) == said


def test_the_start_names_the_expiry_and_how_to_rotate_and_the_notice_comes_once(
    caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    path = tmp_path / "token"
    path.write_text(token())
    keeping = Keeping(path.read_text(), path)
    keeping.keeper.announce()
    [start] = warnings(caplog)
    assert f"expires at {instant_text(T0 + 3600)} (in 1h 0m)" in start
    mint = "feltdb grant issue --worker w1 --capability email:send"
    assert f"write a new one ({mint}) to {path}" in start
    keeping.at(3600 - 361)
    assert len(warnings(caplog)) == 1  # not yet: the notice is a tenth of an hour
    keeping.at(3600 - 360)
    keeping.at(3600 - 100)
    [_, notice] = warnings(caplog)
    assert f"expires at {instant_text(T0 + 3600)} (in 6m 0s)" in notice


def test_a_token_without_a_file_is_told_how_to_become_one(caplog: pytest.LogCaptureFixture) -> None:
    elsewhere = token(tenant_id="acme", application_id="billing")
    Keeping(elsewhere, None).keeper.announce()
    [start] = warnings(caplog)
    assert "without a restart, give it as a file (--token-file" in start
    assert (
        "(feltdb grant issue --worker w1 --tenant acme --application billing --capability" in start
    )


def test_a_token_inside_its_notice_at_start_is_not_warned_of_twice(
    caplog: pytest.LogCaptureFixture,
) -> None:
    keeping = Keeping(token(lifetime=3), None)
    keeping.keeper.announce()
    keeping.at(1)
    keeping.at(5)
    [start] = warnings(caplog)
    assert "(in 3s)" in start


# ------------------------------------------------------------------ what it takes from its file


def test_a_new_token_in_the_file_is_taken_once_the_file_is_looked_at_again(
    caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    path = tmp_path / "token"
    first, second = token(lifetime=3), token(lifetime=7200)
    path.write_text(first)
    keeping = Keeping(first, path)
    write(path, second + "\n")
    keeping.at(FILE_CHECK_S / 2)
    assert keeping.used == []  # not looked at yet
    keeping.at(FILE_CHECK_S)
    assert keeping.used == [second] and keeping.keeper.token == second
    assert keeping.keeper.grant.expires_at == T0 + 7200
    assert any("took the new token" in r.getMessage() for r in caplog.records)
    keeping.at(FILE_CHECK_S * 3)
    assert keeping.used == [second]  # the same file: not taken again


@pytest.mark.parametrize(
    ("content", "said"),
    [
        ("", "does not start with 'fgt2.'"),
        ("fgt2.@@@", "not base64url"),
        (token(subject=Subject.worker("w2")), "worker:w2's in default/default, not worker:w1's"),
        (token(tenant_id="other"), "in other/default"),
        (token(lifetime=10, issued_at=T0 - 100), f"it expired at {instant_text(T0 - 90)}"),
    ],
)
def test_a_file_without_a_usable_token_is_said_once_and_the_token_kept(
    caplog: pytest.LogCaptureFixture, tmp_path: Path, content: str, said: str
) -> None:
    path = tmp_path / "token"
    first = token()
    path.write_text(first)
    keeping = Keeping(first, path)
    write(path, content)
    for second in range(1, 6):
        keeping.at(second * FILE_CHECK_S)
    [kept] = warnings(caplog)
    assert "keeps its token" in kept and said in kept
    assert keeping.used == [] and keeping.keeper.token == first
    better = token(lifetime=7200)
    write(path, better)
    keeping.at(10 * FILE_CHECK_S)
    assert keeping.used == [better]


def test_a_file_gone_is_said_once_and_taken_again_when_it_comes_back(
    caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    path = tmp_path / "token"
    first = token()
    path.write_text(first)
    keeping = Keeping(first, path)
    path.unlink()
    keeping.at(FILE_CHECK_S)
    keeping.at(2 * FILE_CHECK_S)
    [gone] = warnings(caplog)
    assert f"cannot read the token file {path}" in gone
    second = token(lifetime=7200)
    write(path, second)
    keeping.at(3 * FILE_CHECK_S)
    assert keeping.used == [second]


def test_reading_a_token_file_names_it_in_each_refusal(tmp_path: Path) -> None:
    path = tmp_path / "token"
    with pytest.raises(WorkloadError) as missing:
        read_token(path)
    assert missing.value.code == ErrorCode.WORKLOAD_INVALID and str(path) in missing.value.message
    path.write_text("not a token")
    with pytest.raises(WorkloadError) as malformed:
        read_token(path)
    assert malformed.value.code == ErrorCode.WORKLOAD_UNAUTHORIZED
    assert malformed.value.message.startswith(f"the token file {path}: ")
    path.write_text(f"\n  {token()}  \n")
    assert read_token(path) == token()


def test_the_client_sends_the_token_it_is_told_to_use() -> None:
    first, second = token(), token(subject=Subject.worker("w9"))
    with Client("http://127.0.0.1:9", first) as client:
        client.use_token(second)
        sent = client._http.build_request("GET", "/v1/workloads").headers
        assert sent["Authorization"] == f"Bearer {second}"
        assert sent["Accept"] == "application/json"
        assert client.subject == Subject.worker("w9")


def test_the_command_said_mints_a_token_like_the_one_held(caplog: pytest.LogCaptureFixture) -> None:
    service = token(subject=Subject.service("mailer"), capabilities={"workload:claim"})
    Keeping(service, None).keeper.announce()
    [start] = warnings(caplog)
    mint = "feltdb grant issue --subject service:mailer --tenant default --application default"
    assert f"({mint} --capability workload:claim)" in start
