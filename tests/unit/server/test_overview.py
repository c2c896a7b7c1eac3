"""What the dashboard reads of the store: the overview's counts and throughput, the
search, the audit newest first, and the chart drawn from them; each bounded."""

from __future__ import annotations

import time

import msgspec
import pytest
from support.factories import CAPABILITIES, SIGNER, make_request

from feltdb import ResourceScope, ResourceScopeKind, WorkloadStore
from feltdb.auth.scope import Scope
from feltdb.server.ui import overview
from feltdb.server.ui.chart import HALF, chart_of
from feltdb.server.ui.overview import Minute, Throughput, summarize
from feltdb.work.search import search
from feltdb.work.states import WorkloadState


def admit(store: WorkloadStore, key: str, **fields) -> str:
    workload, _ = store.admit(make_request(idempotency_key=key, **fields))
    return workload.workload_id


def admit_elsewhere(store: WorkloadStore, key: str) -> None:
    """Admit work of the application "elsewhere", under a grant of that application."""
    request = make_request(idempotency_key=key)
    grant = msgspec.structs.replace(
        request.authorization_snapshot.grant,
        **{
            "application_id": "elsewhere",
            "resources": (
                ResourceScope(kind=ResourceScopeKind.WORKLOAD, uri="flow://elsewhere/workloads/*"),
            ),
        },
    )
    store.admit(
        make_request(
            idempotency_key=key,
            application_id="elsewhere",
            authorization_snapshot=SIGNER.sign(grant),
        )
    )


def run(store: WorkloadStore, *, succeed: bool, definition: str = "send") -> str:
    """Claim the next workload of ``definition`` and complete it, or fail it for good."""
    claim = store.claim_next("t", "app", "w1", CAPABILITIES, definitions=[definition])
    assert claim is not None
    store.start(claim.workload_id, claim.claim_id, "w1", claim.fencing_token)
    if succeed:
        store.complete(claim.workload_id, claim.claim_id, "w1", claim.fencing_token, "r", 1)
    else:
        store.fail(
            claim.workload_id, claim.claim_id, "w1", claim.fencing_token, "permanent", "no",
            effect="none",
        )  # fmt: skip
    return claim.workload_id


@pytest.fixture
def filled(store: WorkloadStore) -> WorkloadStore:
    """send: 2 ready, 1 succeeded; report: 1 dead letter, 1 ready (in staging); and work of
    another application."""
    admit(store, "s1", created_at=100)
    admit(store, "s2", created_at=50)
    admit(store, "s3", created_at=10)
    run(store, succeed=True)  # the oldest ready send (created 10... by priority then age)
    admit(store, "r1", definition_id="report", retry_policy={"max_attempts": 1})
    run(store, succeed=False, definition="report")
    admit(store, "r2", definition_id="report", environment="staging", created_at=70)
    admit_elsewhere(store, "other")
    return store


def test_the_summary_counts_each_state_per_definition(filled: WorkloadStore) -> None:
    summary = summarize(filled.db, "t", "app")
    assert summary.complete
    counts = {c.definition_id: c.by_state for c in summary.definitions}
    assert counts == {
        "report": {WorkloadState.DEAD_LETTER: 1, WorkloadState.READY: 1},
        "send": {WorkloadState.READY: 2, WorkloadState.SUCCEEDED: 1},
    }
    oldest = {c.definition_id: c.oldest_ready_at for c in summary.definitions}
    assert oldest == {"report": 70, "send": 50}
    assert summary.total(WorkloadState.READY) == 3
    assert summarize(filled.db, "t", "elsewhere").total(WorkloadState.READY) == 1
    assert summarize(filled.db, "t", "nothing").definitions == []


def test_a_narrowed_scope_counts_only_what_it_sees(filled: WorkloadStore) -> None:
    by_definition = summarize(
        filled.db, "t", "app", scope=Scope("t", "app", definitions=frozenset({"send"}))
    )
    assert [c.definition_id for c in by_definition.definitions] == ["send"]
    by_environment = summarize(
        filled.db, "t", "app", scope=Scope("t", "app", environments=frozenset({"staging"}))
    )
    assert by_environment.complete
    assert [(c.definition_id, c.by_state) for c in by_environment.definitions] == [
        ("report", {WorkloadState.READY: 1})
    ]


def test_counting_by_reading_stops_at_its_bound_of_work_read_seen_or_not(
    filled: WorkloadStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(overview, "MAX_COUNTED", 3)
    monkeypatch.setattr(overview, "COUNTED_PAGE", 2)
    production = Scope("t", "app", environments=frozenset({"production"}))
    bounded = summarize(filled.db, "t", "app", scope=production)
    assert not bounded.complete
    assert 0 < sum(c.total for c in bounded.definitions) <= 3
    # A reader who sees none of the work still reads no more than the bound.
    blind = summarize(filled.db, "t", "app", scope=Scope("t", "app", environments=frozenset({"x"})))
    assert (blind.definitions, blind.complete) == ([], False)
    monkeypatch.setattr(overview, "MAX_COUNTED", 5)  # exactly the application's five
    whole = summarize(filled.db, "t", "app", scope=production)
    assert whole.complete and sum(c.total for c in whole.definitions) == 4


def test_throughput_counts_completions_and_failures_per_minute(filled: WorkloadStore) -> None:
    now = int(time.time())
    counted = overview.recent(filled.db, "t", "app", now).throughput
    assert len(counted.minutes) == 60
    assert counted.minutes[-1].start == now - now % 60
    assert (counted.completions, counted.failures) == (1, 1)
    [dead] = overview.recent(filled.db, "t", "app", now).dead_lettered
    assert filled.get(dead).state is WorkloadState.DEAD_LETTER
    assert counted.covered_since == counted.minutes[0].start
    assert overview.recent(filled.db, "t", "elsewhere", now).throughput.completions == 0
    # An hour later, those minutes are out of the window.
    assert overview.recent(filled.db, "t", "app", now + 7200).throughput.completions == 0


def test_throughput_says_how_far_back_a_bounded_read_reached(filled: WorkloadStore) -> None:
    now = int(time.time())
    head = filled.db.current_revision()
    bounded = overview.recent(filled.db, "t", "app", now, scan=2).throughput
    newest = filled.db.committed_transactions_before(head + 1, 2)
    assert bounded.covered_since == int(newest[-1].committed_at)
    # The two newest entries are the other application's admission and r2's: none counted.
    assert (bounded.completions, bounded.failures) == (0, 0)
    assert overview.recent(filled.db, "t", "app", now, scan=10_000).throughput.completions == 1
    assert bounded.covered_since > bounded.minutes[0].start


def test_a_search_matches_ids_and_idempotency_keys_within_its_bound(store: WorkloadStore) -> None:
    ids = {
        admit(store, key, created_at=n): key
        for n, key in enumerate(["Alpha-1", "beta", "alpha-2", "gamma"])
    }

    def read(after, limit):
        return store.page("t", "app", after=after, limit=limit)

    found = search(read, "ALPHA", None, 10)
    assert sorted(ids[w.workload_id] for w in found.items) == ["Alpha-1", "alpha-2"]
    assert found.after is None
    first = search(read, "alpha", None, 1)
    assert [ids[w.workload_id] for w in first.items] == ["Alpha-1"]
    rest = search(read, "alpha", first.after, 1)
    assert [ids[w.workload_id] for w in rest.items] == ["alpha-2"]
    some_id = next(iter(ids))
    assert [w.workload_id for w in search(read, some_id[-8:], None, 10).items] == [some_id]
    everything = search(read, "gamma", None, 10, scan=500)
    assert everything.read == 4 and everything.after is None
    bounded = search(read, "gamma", None, 10, scan=2, batch=2)
    assert (bounded.items, bounded.read) == ([], 2) and bounded.after is not None
    rest = search(read, "gamma", bounded.after, 10, scan=2, batch=2)
    assert [ids[w.workload_id] for w in rest.items] == ["gamma"]
    assert search(read, None, None, 2).read == 2  # no text: one page


def test_the_audit_reads_newest_first_with_filters(filled: WorkloadStore) -> None:
    entries, older = filled.audit.before("t", "app", limit=3)
    revisions = [e.commit_revision for e in entries]
    assert revisions == sorted(revisions, reverse=True) and len(entries) == 3
    assert all(e.audit and e.audit["application"] == "app" for e in entries)
    assert older == revisions[-1]
    following, _ = filled.audit.before("t", "app", older, limit=100)
    assert max(e.commit_revision for e in following) < older
    whole, end = filled.audit.before("t", "app", limit=1000)
    assert end is None
    one = whole[0].audit["work_id"]
    of_one, _ = filled.audit.before("t", "app", work_id=one, limit=1000)
    assert {e.audit["work_id"] for e in of_one} == {one}
    by_worker, _ = filled.audit.before("t", "app", subject="w1", limit=1000)
    assert by_worker and all(e.audit["actor"] == "w1" for e in by_worker)
    assert filled.audit.before("t", "app", subject="nobody")[0] == []


def test_the_chart_scales_to_the_peak_and_puts_failures_below_the_axis() -> None:
    minutes = [Minute(60 * n, completions=n % 3, failures=1 if n == 5 else 0) for n in range(6)]
    chart = chart_of(Throughput(minutes, 0))
    assert chart.peak == 2
    assert [round(b.height) for b in chart.completions] == [HALF // 2, HALF, HALF // 2, HALF]
    assert all(b.y + b.height == HALF for b in chart.completions)
    [failure] = chart.failures
    assert failure.y > chart.axis_y - 1 and failure.height == HALF / 2
    assert failure.title == "00:05 UTC: 1 failed"
    assert chart_of(Throughput([Minute(0)], 0)).peak == 1  # nothing: still a scale


def test_a_dead_letters_effect_is_its_last_attempts_never_an_earlier_ones(
    store: WorkloadStore,
) -> None:
    from feltdb.work.events import last_effect

    policy = {"max_attempts": 2, "initial_delay_ms": 1000}
    workload_id = admit(store, "twice", retry_policy=policy)
    first = store.claim_next("t", "app", "w1", CAPABILITIES, now=20, lease_ms=5000)
    assert first is not None
    # Claimed, never started, failed: the worker says it did nothing.
    store.fail(
        workload_id, first.claim_id, "w1", first.fencing_token, "worker_failure", "x", now=21
    )
    assert last_effect(store.get(workload_id)) == "none"
    second = store.claim_next("t", "app", "w1", CAPABILITIES, now=100, lease_ms=5000)
    assert second is not None
    store.start(workload_id, second.claim_id, "w1", second.fencing_token, now=101)
    store.recover_expired(now=200)  # its worker was lost mid-attempt: out of attempts
    dead = store.get(workload_id)
    assert dead.state is WorkloadState.DEAD_LETTER
    assert last_effect(dead) == "unknown"
