"""``feltdb audit prune-log`` and ``feltdb audit check-export`` through a real ``feltdb``
process at 80 columns, on a store file.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from support.finished import finish_many
from test_newcomer import feltdb

from feltdb import WorkloadStore


def head_of(db: str) -> int:
    verified = feltdb("audit", "verify", "--db", db, columns=80)
    assert verified.returncode == 0, verified.stderr
    found = re.search(r"head: (\d+):[0-9a-f]{64}", verified.stdout)
    assert found is not None, verified.stdout
    return int(found[1])


def test_prune_log_exports_deletes_and_verify_says_how_far(tmp_path: Path) -> None:
    db = str(tmp_path / "w.db")
    with WorkloadStore.open(db) as store:
        finish_many(store, 8, 100)
        logged = len(store.db.committed_transactions_after(0))
    head = head_of(db)
    export = tmp_path / "log-1.jsonl"

    pruned = feltdb(
        "audit", "prune-log", "--db", db, "--through", str(head), "--export", str(export),
        columns=80,
    )  # fmt: skip

    assert pruned.returncode == 0, pruned.stderr
    assert all(len(line) <= 80 for line in pruned.stdout.splitlines()), pruned.stdout
    assert pruned.stdout.splitlines()[0] == f"pruned the log through revision {head}"
    assert f"transactions deleted: {logged}" in pruned.stdout
    assert "rows written again first: 8" in pruned.stdout
    # Progress on stderr, a step a line, as each ends.
    assert [" ".join(line.split(" ")[:2]) for line in pruned.stderr.splitlines()] == [
        "checked the", "wrote again", "checked it", f"exported {logged}",
    ]  # fmt: skip
    verified = feltdb("audit", "verify", "--db", db, columns=80)
    assert verified.returncode == 0, verified.stdout
    assert f"pruned: through revision {head}, {logged} links" in " ".join(verified.stdout.split())

    for args in (("check-export", str(export)), ("check-export", "--db", db, str(export))):
        checked = feltdb("audit", *args, columns=80)
        assert checked.returncode == 0, checked.stderr
        assert checked.stdout.splitlines()[0] == f"export: ok ({logged} transactions)"


def test_prune_log_refusals_say_why_without_a_traceback(tmp_path: Path) -> None:
    db = str(tmp_path / "w.db")
    with WorkloadStore.open(db) as store:
        finish_many(store, 2, 100)
    head = head_of(db)
    export = tmp_path / "log.jsonl"

    beyond = feltdb(
        "audit", "prune-log", "--db", db, "--through", str(head + 10), "--export", str(export)
    )
    assert beyond.returncode == 1
    assert f"is not sealed yet: the chain's head is revision {head}" in beyond.stderr
    assert "Traceback" not in beyond.stderr and not export.exists()

    served = feltdb(
        "audit", "prune-log", "--url", "http://127.0.0.1:9", "--token", "t",
        "--through", "1", "--export", str(export),
    )  # fmt: skip
    assert served.returncode == 2 and "give --db" in served.stderr

    done = feltdb(
        "audit", "prune-log", "--db", db, "--through", str(head), "--export", str(export), "--json"
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["through"] == head and report["export"]["entries"] == report["deleted"]

    # Past the head now (the pruning's own commits): into the same file, refused.
    again = feltdb("audit", "prune-log", "--db", db, "--through", "head", "--export", str(export))
    assert again.returncode == 1 and "exists: an export is never overwritten" in again.stderr
    # Up to where it is already pruned: nothing new, and no file asked of it is made.
    finished = feltdb("audit", "prune-log", "--db", db, "--through", str(head), "--export", "x")
    assert finished.returncode == 0 and "export: none" in finished.stdout

    lines = export.read_text().splitlines()
    export.write_text("\n".join([lines[0], *lines[2:]]) + "\n")  # its first entry dropped
    broken = feltdb("audit", "check-export", str(export))
    assert broken.returncode == 1 and "Traceback" not in broken.stderr
    assert "line 2: revision" in broken.stderr and "does not follow" in broken.stderr
