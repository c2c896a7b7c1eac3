"""The maintenance pass runs the scheduler: a server admits its schedules' occurrences."""

from __future__ import annotations

from support.factories import SIGNER, make_grant

from feltdb import Subject, WorkloadStore
from feltdb.server.maintenance import Maintenance

START = 1_800_000_000


def test_a_maintenance_pass_admits_the_due_occurrences(new_target):
    creator = Subject.agent("a1")
    with WorkloadStore.open(new_target()) as store:
        store.schedules.create(
            {"schedule_id": "tick", "interval_s": 60,
             "template": {"definition_id": "d", "input": None}},
            tenant_id="t", application_id="app", requested_by=creator,
            authorization_snapshot=SIGNER.sign(make_grant(subject=creator)), now=START,
        )  # fmt: skip
        maintenance = Maintenance(store, clock=lambda: START + 130)
        maintenance.run_once(START + 130)
        [work] = store.list("t", "app")
        assert (work.trigger, work.next_attempt_at) == ("schedule:tick", START + 120)
        maintenance.run_once(START + 130)  # the next pass finds it admitted
        assert len(store.list("t", "app")) == 1
