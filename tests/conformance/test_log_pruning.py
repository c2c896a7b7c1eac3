"""Pruning the log itself: the entries up to a sealed revision exported, then deleted, and the
chain still verifies across them, still finding what was done behind its back.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from support.factories import CAPABILITIES, make_request
from support.finished import finish_many

from feltdb import WorkloadError, WorkloadStore
from feltdb.records.workload import DURABLE_WORK_COLLECTION as WORK
from feltdb.storage.base import VERSION_FIELD
from feltdb.work import log_pruning
from feltdb.work.log_export import check_export
from feltdb.work.log_pruning import CARRIED, LOG_COLLECTION, LOG_PRUNED, PRUNED_KEY

OPS = "human:ops"


def sealed_head(store: WorkloadStore) -> int:
    report = store.audit.verify()
    assert report.ok, report.problem
    return report.head_revision


def revisions(store: WorkloadStore) -> list[int]:
    return [entry.commit_revision for entry in store.db.committed_transactions_after(0)]


def documents(store: WorkloadStore) -> dict[str, tuple[int, dict[str, Any]]]:
    """Every workload row: its version and its document without the version."""
    rows = store.db.list_rows(WORK)
    return {
        row.key: (row.version, {k: v for k, v in row.document.items() if k != VERSION_FIELD})
        for row in rows
    }


def sql(target: str, statement: str, params: tuple[Any, ...] = ()) -> None:
    """Run ``statement`` (``?`` placeholders) on the store's database behind its back."""
    if target.startswith("postgresql"):
        import psycopg

        with psycopg.connect(target, autocommit=True) as connection:
            connection.execute(statement.replace("?", "%s"), params)  # type: ignore[arg-type]
        return
    import sqlite3

    connection = sqlite3.connect(target, isolation_level=None)
    try:
        connection.execute(statement, params)
    finally:
        connection.close()


def test_the_log_pruned_through_a_revision_still_verifies_across_it(store, tmp_path: Path):
    finish_many(store, 12, 100)
    running = store.create(make_request(idempotency_key="running"))
    claim = store.claim(running.workload_id, "w", CAPABILITIES, now=100)
    through = sealed_head(store)
    anchor = store.audit.verify()
    before = documents(store)
    logged = revisions(store)

    report = store.audit.prune_log(tmp_path / "log.jsonl", through, actor=OPS)

    assert report.through == through and report.deleted == len(logged)
    assert report.export is not None and report.export.entries == len(logged)
    assert min(revisions(store)) > through  # every entry up to it is gone
    # Every row they last wrote was written again as it was: a new version, the same text.
    after = documents(store)
    assert {key: doc for key, (_, doc) in after.items()} == {
        key: doc for key, (_, doc) in before.items()
    }
    assert all(after[key][0] == version + 1 for key, (version, _) in before.items())
    verified = store.audit.verify(anchor=(anchor.head_revision, anchor.head_link))
    assert verified.ok, verified.problem
    assert (verified.pruned_through, verified.pruned) == (through, len(logged))
    kinds = [entry.audit["kind"] for entry in store.db.committed_transactions_after(0)]
    assert kinds == [CARRIED, LOG_PRUNED]
    # The export holds every entry deleted, with its links, and proves itself.
    summary = store.audit.check_export(tmp_path / "log.jsonl")
    assert (summary.entries, summary.last_revision) == (len(logged), logged[-1])
    lines = (tmp_path / "log.jsonl").read_text().splitlines()
    assert [json.loads(line)["revision"] for line in lines[1:-1]] == logged
    # Work under a claim taken before the pruning goes on: the claim is in the row.
    store.start(running.workload_id, claim.claim_id, "w", claim.fencing_token, now=101)
    store.complete(running.workload_id, claim.claim_id, "w", claim.fencing_token, "r", {}, now=102)
    assert store.audit.verify().ok


def test_a_second_pruning_exports_from_where_the_first_stopped(store, tmp_path: Path):
    finish_many(store, 5, 100)
    first = store.audit.prune_log(tmp_path / "1.jsonl", sealed_head(store), actor=OPS)
    finish_many(store, 5, 200, prefix="more")
    second = store.audit.prune_log(tmp_path / "2.jsonl", sealed_head(store), actor=OPS)

    one, two = check_export(tmp_path / "1.jsonl"), check_export(tmp_path / "2.jsonl")
    assert first.export is not None and second.export is not None
    header = json.loads((tmp_path / "2.jsonl").read_text().splitlines()[0])
    assert (header["after_revision"], header["after_link"]) == (first.through, one.through_link)
    assert second.deleted == two.entries
    report = store.audit.verify()
    assert report.ok and report.pruned_through == second.through
    mark = store.db.get_row(LOG_COLLECTION, PRUNED_KEY)
    assert mark is not None and mark.document["previous_through"] == first.through
    assert [e["sha256"] for e in mark.document["exports"]] == [one.sha256, two.sha256]


def test_bad_input_changes_nothing(store, tmp_path: Path):
    exports = tmp_path / "exports"
    exports.mkdir()
    finish_many(store, 3, 100)
    head = sealed_head(store)
    taken = exports / "taken.jsonl"
    taken.write_text("mine\n")
    logged, rows = revisions(store), documents(store)
    for through, export in (
        (head + 1, exports / "a.jsonl"),
        (0, exports / "b.jsonl"),
        (head, taken),
    ):
        with pytest.raises(WorkloadError) as refused:
            store.audit.prune_log(export, through, actor=OPS)
        assert refused.value.code == "WORKLOAD_INVALID"
        assert refused.value.details["fields"] in (["through"], ["export"])
        assert (revisions(store), documents(store)) == (logged, rows)
    assert taken.read_text() == "mine\n"
    assert sorted(path.name for path in exports.iterdir()) == ["taken.jsonl"]


def test_a_log_that_fails_its_check_is_not_pruned(store, store_target: str, tmp_path: Path):
    [victim, *_] = finish_many(store, 3, 100)
    head = sealed_head(store)
    sql(store_target, "UPDATE rows SET version = version + 5 WHERE collection = ? AND key = ?",
        (WORK, victim))  # fmt: skip
    logged = revisions(store)

    with pytest.raises(WorkloadError) as refused:
        store.audit.prune_log(tmp_path / "log.jsonl", head, actor=OPS)

    assert refused.value.code == "WORKLOAD_CONFLICT"
    assert victim in refused.value.message and "none of it was deleted" in refused.value.message
    assert revisions(store) == logged and not (tmp_path / "log.jsonl").exists()


def _pruned(store: WorkloadStore, tmp_path: Path) -> tuple[int, list[str]]:
    ids = finish_many(store, 4, 100)
    through = sealed_head(store)
    store.audit.prune_log(tmp_path / "log.jsonl", through, actor=OPS)
    finish_many(store, 2, 200, prefix="later")
    assert store.audit.verify().ok
    return through, ids


def test_an_entry_deleted_above_the_pruned_revision_is_removed(store, store_target, tmp_path):
    through, _ = _pruned(store, tmp_path)
    victim = revisions(store)[1]
    sql(store_target, "DELETE FROM transactions WHERE commit_revision = ?", (victim,))
    problem = store.audit.verify().problem
    assert problem is not None and (problem.kind, problem.revision) == ("removed", victim)
    assert victim > through


def test_a_pruned_link_deleted_is_removed(store, store_target, tmp_path):
    through, _ = _pruned(store, tmp_path)
    victim = store.db.chain_links_between(0, through, 1000)[2].commit_revision
    sql(store_target, "DELETE FROM audit_chain WHERE commit_revision = ?", (victim,))
    problem = store.audit.verify().problem
    assert problem is not None and problem.kind == "removed"
    assert "missing from the audit chain" in problem.message


def test_the_mark_moved_is_a_row_altered(store, store_target, tmp_path):
    through, _ = _pruned(store, tmp_path)
    mark = store.db.get_row(LOG_COLLECTION, PRUNED_KEY)
    assert mark is not None
    # Claiming more was pruned than was, to hide entries deleted behind its back.
    document = {k: v for k, v in mark.document.items() if k != VERSION_FIELD}
    text = json.dumps({**document, "through": through + 50}, separators=(",", ":"), sort_keys=True)
    sql(store_target, "UPDATE rows SET document = ? WHERE collection = ? AND key = ?",
        (text, LOG_COLLECTION, PRUNED_KEY))  # fmt: skip
    problem = store.audit.verify().problem
    assert problem is not None
    assert (problem.kind, problem.address) == ("row_altered", f"{LOG_COLLECTION}/{PRUNED_KEY}")


def test_a_row_set_back_to_a_pruned_revision_is_unlogged(store, store_target, tmp_path):
    through, ids = _pruned(store, tmp_path)
    sql(store_target, "UPDATE rows SET revision = ? WHERE collection = ? AND key = ?",
        (through - 1, WORK, ids[0]))  # fmt: skip
    problem = store.audit.verify().problem
    assert problem is not None and problem.kind == "row_unlogged"
    assert problem.address == f"{WORK}/{ids[0]}" and "pruned from the log" in problem.message


def test_a_row_written_again_then_deleted_is_missing(store, store_target, tmp_path):
    _, ids = _pruned(store, tmp_path)
    sql(store_target, "DELETE FROM rows WHERE collection = ? AND key = ?", (WORK, ids[1]))
    problem = store.audit.verify().problem
    assert problem is not None
    assert (problem.kind, problem.address) == ("row_missing", f"{WORK}/{ids[1]}")


def test_a_pruning_stopped_before_its_deletions_is_finished_by_the_next(
    store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    finish_many(store, 6, 100)
    through = sealed_head(store)
    logged = [revision for revision in revisions(store) if revision <= through]
    # Stopped after one transaction of deletions (a crash, a ^C).
    monkeypatch.setattr(
        log_pruning, "_delete", lambda db, upto: (db.delete_log_through(upto, 3), 0)
    )
    stopped = store.audit.prune_log(tmp_path / "log.jsonl", through, actor=OPS)
    assert stopped.deleted == 3
    assert store.audit.verify().ok  # the entries left there are checked as any other
    monkeypatch.undo()

    finished = store.audit.prune_log(tmp_path / "again.jsonl", through, actor=OPS)

    assert (finished.deleted, finished.export, finished.carried) == (len(logged) - 3, None, 0)
    assert not (tmp_path / "again.jsonl").exists()
    assert min(revisions(store)) > through and store.audit.verify().ok


@pytest.mark.parametrize(
    ("edit", "found"),
    [
        (lambda lines: lines[:2] + lines[3:], "does not follow"),  # an entry dropped
        (lambda lines: [lines[0], lines[2], lines[1], *lines[3:]], "does not follow"),
        (lambda lines: lines[:-1], "cut short"),
        (lambda lines: [lines[0], lines[1].replace('"keys":["', '"keys":["x'), *lines[2:]],
         "not the one linked"),
        (lambda lines: [lines[0], "[" * 100_000, *lines[1:]], "line 2: not JSON"),
        (lambda lines: [lines[0], '{"entry": [1], "revision": {}}', *lines[1:]],
         "line 2: not an entry with its link"),
    ],
    ids=["dropped", "reordered", "cut", "edited", "nested", "mistyped"],
)  # fmt: skip
def test_an_export_edited_fails_its_check(
    store, tmp_path: Path, edit: Callable[[list[str]], list[str]], found: str
):
    finish_many(store, 3, 100)
    export = tmp_path / "log.jsonl"
    store.audit.prune_log(export, sealed_head(store), actor=OPS)
    export.write_text("\n".join(edit(export.read_text().splitlines())) + "\n")
    with pytest.raises(WorkloadError) as refused:
        check_export(export)
    assert refused.value.code == "WORKLOAD_INVALID" and found in refused.value.message


def test_an_export_of_another_store_is_not_this_ones(
    store,
    open_store: Callable[..., WorkloadStore],
    new_target: Callable[..., str],
    tmp_path: Path,
):
    finish_many(store, 3, 100)
    store.audit.prune_log(tmp_path / "log.jsonl", sealed_head(store), actor=OPS)
    other = open_store(new_target("other"))
    finish_many(other, 4, 100)
    with pytest.raises(WorkloadError) as refused:
        other.audit.check_export(tmp_path / "log.jsonl")
    assert "is no export this store's pruning wrote" in refused.value.message
    assert store.audit.check_export(tmp_path / "log.jsonl").entries > 0


@pytest.mark.parametrize("one_path", [False, True], ids=["two-files", "one-file"])
def test_two_prunings_at_once_leave_one_chain(
    store, open_store: Callable[..., WorkloadStore], tmp_path: Path, one_path: bool
):
    finish_many(store, 30, 100)
    through = sealed_head(store)
    pruners = [open_store(), open_store()]
    answers: list[object] = [None, None]
    barrier = threading.Barrier(2)
    paths = [tmp_path / ("log.jsonl" if one_path else f"{place}.jsonl") for place in (0, 1)]

    def run(place: int) -> None:
        barrier.wait(timeout=30)
        try:
            answers[place] = pruners[place].audit.prune_log(paths[place], through, actor=OPS)
        except WorkloadError as error:
            answers[place] = error

    threads = [threading.Thread(target=run, args=(place,)) for place in (0, 1)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
        assert not thread.is_alive()
    done = [answer for answer in answers if not isinstance(answer, WorkloadError)]
    refused = [answer for answer in answers if isinstance(answer, WorkloadError)]
    assert done, refused
    assert all(
        error.code == "WORKLOAD_CONFLICT" or "never overwritten" in error.message
        for error in refused
    ), refused
    report = store.audit.verify()
    assert report.ok, report.problem
    assert report.pruned_through == through and min(revisions(store)) > through
    # Every export left is whole, and one this store wrote; no partial file is left.
    kept = sorted(tmp_path.glob("*.jsonl"))
    assert kept and all(store.audit.check_export(path).entries for path in kept)
    assert not list(tmp_path.glob("*.partial"))


def _tamper_after(step: str, tamper: Callable[[], None]) -> Callable[[str], None]:
    """A progress callback that tampers once, when the pruning says ``step`` ended."""
    done: list[str] = []

    def said(line: str) -> None:
        if line.startswith(step) and not done:
            done.append(line)
            tamper()

    return said


@pytest.mark.parametrize(
    ("step", "statement", "found"),
    [
        # Changed after the first check, before its rewrite: the rewrite refuses it.
        ("checked the audit chain", "UPDATE rows SET version = version + 3 WHERE key = ?",
         "is not what the transaction"),
        # Deleted after the first check: the second check, with every entry there, finds it.
        ("checked the audit chain", "DELETE FROM rows WHERE key = ?", "is missing"),
    ],
    ids=["changed", "deleted"],
)  # fmt: skip
def test_a_row_tampered_with_during_the_pruning_stops_it(
    store, store_target: str, tmp_path: Path, step: str, statement: str, found: str
):
    ids = finish_many(store, 4, 100)
    through = sealed_head(store)
    logged = revisions(store)
    said = _tamper_after(step, lambda: sql(store_target, statement, (ids[2],)))

    with pytest.raises(WorkloadError) as refused:
        store.audit.prune_log(tmp_path / "log.jsonl", through, actor=OPS, progress=said)

    assert refused.value.code == "WORKLOAD_CONFLICT" and found in refused.value.message
    assert ids[2] in refused.value.message
    assert set(logged) <= set(revisions(store))  # not one entry deleted
    assert list(tmp_path.glob("log.jsonl*")) == []
    assert not store.audit.verify().ok  # and the chain still says so


def test_an_entry_altered_before_its_export_stops_the_pruning(store, store_target, tmp_path):
    finish_many(store, 3, 100)
    through = sealed_head(store)
    victim = revisions(store)[1]
    alter = "UPDATE transactions SET committed_at = committed_at + 1 WHERE commit_revision = ?"
    said = _tamper_after("checked it again", lambda: sql(store_target, alter, (victim,)))

    with pytest.raises(WorkloadError) as refused:
        store.audit.prune_log(tmp_path / "log.jsonl", through, actor=OPS, progress=said)

    assert refused.value.code == "WORKLOAD_CONFLICT"
    assert f"entry at revision {victim} is not the one sealed" in refused.value.message
    assert victim in revisions(store) and list(tmp_path.glob("log.jsonl*")) == []


def test_an_export_path_that_cannot_be_made_is_refused_before_anything_is_written(
    store, tmp_path: Path
):
    finish_many(store, 3, 100)
    through = sealed_head(store)
    logged, rows = revisions(store), documents(store)
    for export in (tmp_path / "missing" / "log.jsonl", tmp_path / "dir" / "x"):
        (tmp_path / "dir").write_text("a file, not a directory")
        with pytest.raises(WorkloadError) as refused:
            store.audit.prune_log(export, through, actor=OPS)
        assert (
            refused.value.code == "WORKLOAD_INVALID" and "cannot be made" in refused.value.message
        )
        assert (revisions(store), documents(store)) == (logged, rows)


def test_an_export_cut_at_its_start_is_no_export_of_this_store(store, tmp_path: Path):
    finish_many(store, 3, 100)
    store.audit.prune_log(tmp_path / "1.jsonl", sealed_head(store), actor=OPS)
    finish_many(store, 3, 200, prefix="more")
    export = tmp_path / "2.jsonl"
    store.audit.prune_log(export, sealed_head(store), actor=OPS)
    assert store.audit.check_export(export).entries > 2
    lines = [json.loads(line) for line in export.read_text().splitlines()]
    # Its first entry dropped, the header re-pointed at it, the end line's count fixed:
    # the file proves itself, but it is not the export this store wrote.
    header, first, rest, end = lines[0], lines[1], lines[2:-1], lines[-1]
    header |= {"after_revision": first["revision"], "after_link": first["link"]}
    end |= {"entries": len(rest)}
    export.write_text("".join(json.dumps(line) + "\n" for line in [header, *rest, end]))
    assert check_export(export).entries == len(rest)

    with pytest.raises(WorkloadError) as refused:
        store.audit.check_export(export)
    assert "is no export this store's pruning wrote" in refused.value.message


def test_a_mark_edited_into_something_else_is_reported_not_raised(store, store_target, tmp_path):
    _pruned(store, tmp_path)
    sql(store_target, "UPDATE rows SET document = ? WHERE collection = ? AND key = ?",
        ('{"through":"x"}', LOG_COLLECTION, PRUNED_KEY))  # fmt: skip
    report = store.audit.verify()
    assert not report.ok and report.problem is not None


def test_the_space_the_deleted_entries_held_is_given_back(store, store_target, tmp_path):
    finish_many(store, 300, 100)  # about 900 entries of some 1.3 KB each
    report = store.audit.prune_log(tmp_path / "log.jsonl", sealed_head(store), actor=OPS)
    if store_target.startswith("postgresql"):
        assert report.reclaimed_bytes == 0  # autovacuum's, not the pruning's
        return
    import sqlite3

    assert report.reclaimed_bytes > 500_000
    connection = sqlite3.connect(store_target)
    try:
        assert connection.execute("PRAGMA freelist_count").fetchone()[0] == 0
    finally:
        connection.close()
