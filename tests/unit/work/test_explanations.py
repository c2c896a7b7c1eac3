"""Why work ended, in one plain sentence (issue 25, point 2): an expired approval was told
four ways, none plain; every reason code now has a sentence, in one table."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from support.factories import CAPABILITIES, make_request

from feltdb import ApprovalPolicy, WorkloadState, WorkloadStore, WorkloadTimeouts
from feltdb.work import retry
from feltdb.work.explanations import REASONS, ended_because, span_text
from feltdb.work.summaries import summary_of


@pytest.fixture
def store(tmp_path):
    with WorkloadStore.open(tmp_path / "w.db") as opened:
        yield opened


def test_an_expired_approval_is_one_sentence_with_times_in_words(store):
    held = store.create(
        make_request(
            approval=ApprovalPolicy(), timeouts=WorkloadTimeouts(approval_ms=600_000),
            created_at=1_796_316_000,
        )
    )  # fmt: skip
    store.enforce_deadlines(now=1_796_316_700)
    ended = store.get(held.workload_id)
    assert ended.state is WorkloadState.DEAD_LETTER
    said = ended_because(ended)
    assert said == (
        "approval expired at 2026-12-03 16:50:00 UTC, 10 min after it was asked, undecided;"
        " not retried: another attempt cannot meet a deadline of the work itself (overall,"
        " queue or approval)"
    )
    assert not re.search(r"\b1796316\d{3}\b", said), "no raw epoch"
    assert summary_of(ended).ended_because == said


def test_a_failure_names_the_failure_and_the_policy_decision(store):
    work = store.create(make_request(retry_policy={"max_attempts": 1}))
    claim = store.claim(work.workload_id, "w", CAPABILITIES, now=20)
    store.start(work.workload_id, claim.claim_id, "w", claim.fencing_token, now=21)
    store.fail(work.workload_id, claim.claim_id, "w", claim.fencing_token, "permanent",
               "card declined", now=22)  # fmt: skip
    assert ended_because(store.get(work.workload_id)) == (
        "its last attempt failed: permanent: card declined; not retried: its retry policy"
        " does not retry failures of this kind"
    )


def test_work_still_going_has_no_ending(store):
    assert ended_because(store.create(make_request())) is None


def test_every_reason_a_retry_decision_records_has_a_sentence():
    source = Path(retry.__file__).read_text()
    recorded = set(re.findall(r'"([a-z_]+_not_retryable|attempt_budget_exhausted)"', source))
    assert recorded and recorded <= REASONS.keys(), recorded - REASONS.keys()


@pytest.mark.parametrize(
    ("seconds", "said"),
    [(45, "45 s"), (600, "10 min"), (630, "10 min 30 s"), (7500, "2 h 5 min"), (90_000, "1 d 1 h")],
)
def test_spans_are_said_in_words(seconds: int, said: str):
    assert span_text(seconds) == said
