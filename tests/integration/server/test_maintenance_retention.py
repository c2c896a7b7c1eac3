"""The maintenance loop with a retention policy: a pass prunes finished work past its age,
as ``system:retention``, once a minute, or at once again while a backlog remains."""

from __future__ import annotations

from support.finished import finish_many

from feltdb import WorkloadStore
from feltdb.records.workload import DURABLE_WORK_COLLECTION as WORK
from feltdb.server.maintenance import PRUNE_EVERY_S, RETENTION_ACTOR, Maintenance
from feltdb.work.pruning import PRUNE_BATCH, PRUNED
from feltdb.work.retention import DAY, RetentionPolicy

FINISHED_AT = 100
LATER = FINISHED_AT + 31 * DAY


def remaining(store: WorkloadStore, ids: list[str]) -> int:
    return len(store.db.get_rows(WORK, ids))


def test_without_a_policy_nothing_is_pruned(new_target):
    with WorkloadStore.open(new_target()) as store:
        ids = finish_many(store, 3, FINISHED_AT)
        maintenance = Maintenance(store, clock=lambda: LATER)
        maintenance.run_once(LATER)
        assert maintenance.prune_if_due(LATER) is None
        assert remaining(store, ids) == 3


def test_a_pass_prunes_a_backlog_a_bounded_pass_at_a_time_then_waits_a_minute(new_target):
    with WorkloadStore.open(new_target()) as store:
        ids = finish_many(store, PRUNE_BATCH + 20, FINISHED_AT)
        maintenance = Maintenance(store, lambda: LATER, RetentionPolicy())

        maintenance.run_once(LATER)
        assert remaining(store, ids) == 20  # one bounded pass, and more due
        maintenance.run_once(LATER + 1)  # a backlog: pruned again at the next pass
        assert remaining(store, ids) == 0

        late = finish_many(store, 2, FINISHED_AT, prefix="late")
        maintenance.run_once(LATER + 2)
        assert remaining(store, late) == 2  # none was left: the next is a minute away
        maintenance.run_once(LATER + 1 + PRUNE_EVERY_S)
        assert remaining(store, late) == 0

        actors = {
            entry.audit["actor"]
            for entry in store.db.committed_transactions_after(0)
            if entry.audit is not None and entry.audit.get("kind") == PRUNED
        }
        assert actors == {RETENTION_ACTOR}
        assert store.audit.verify().ok
