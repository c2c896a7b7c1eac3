"""An expired approval, told plainly (issue 25, point 2), through real ``feltdb``
processes at 80 columns: one sentence in ``dead`` and ``show``, the approval deadline in
``show`` and ``inbox``, and never a raw epoch."""

from __future__ import annotations

import re
import time
from pathlib import Path

from test_newcomer import feltdb, submit

from feltdb import WorkloadStore


def flat(text: str) -> str:
    return " ".join(text.replace("│", " ").split())


def test_an_expired_approval_is_one_sentence_in_dead_and_show(tmp_path: Path):
    db = ["--db", str(tmp_path / "work.db")]
    held = submit(db, "refund", "--approval", "--approval-timeout-ms", "600000")
    waiting = feltdb("show", held["workload_id"], *db, columns=80)
    assert "approval deadline" in waiting.stdout, waiting.stdout
    inbox = feltdb("inbox", *db, columns=80)
    assert "expires" in inbox.stdout, inbox.stdout
    assert "in 9m" in inbox.stdout or "in 10m" in inbox.stdout, inbox.stdout
    assert all(len(line) <= 80 for line in inbox.stdout.splitlines()), inbox.stdout
    with WorkloadStore.open(db[1]) as store:
        store.enforce_deadlines(now=int(time.time()) + 700)
    dead = flat(feltdb("dead", *db, columns=80).stdout)
    assert "approval expired at" in dead and "10 min after it was asked" in dead, dead
    shown = feltdb("show", held["workload_id"], *db, columns=80).stdout
    assert "approval expired at" in flat(shown) and "why it ended" in shown
    deadline_at = str(held["created_at"] + 600)
    for output in (dead, shown):
        assert not re.search(rf"(?<![\d-]){deadline_at}(?!\d)", output), "a raw epoch shown"
