"""Recurring schedules on each backend: create, list, pause, resume, delete, the dry run,
and the scheduler's pass (exactly once, catch-up policies, daylight saving, revocation).
"""

from __future__ import annotations

from datetime import datetime
from zoneinfo import ZoneInfo

import pytest
from support.factories import SIGNER, make_grant

from feltdb import Subject, WorkloadError, WorkloadState
from feltdb.work.schedules import MAX_SCHEDULES_PER_APPLICATION, occurrence_key

T, APP = "t", "app"
CREATOR = Subject.agent("a1")
GRANT = SIGNER.sign(make_grant(subject=CREATOR, expires_at=2_000_000_000))
TEMPLATE = {"definition_id": "report", "input": {"kind": "daily"}, "environment": "production"}
BERLIN = ZoneInfo("Europe/Berlin")
START = 1_800_000_000  # 2027-01-15 08:00 UTC


def create(store, schedule_id="nightly", now=START, **spec):
    fields = {"schedule_id": schedule_id, "template": TEMPLATE, **spec}
    if "cron" not in fields and "interval_s" not in fields:
        fields["interval_s"] = 60
    return store.schedules.create(
        fields,
        tenant_id=T,
        application_id=APP,
        requested_by=CREATOR,
        authorization_snapshot=GRANT,
        now=now,
    )


def scheduled(store):
    return [w for w in store.list(T, APP) if w.trigger.startswith("schedule:")]


def test_a_schedule_is_created_listed_and_read_without_its_grant(store):
    made = create(store, cron="30 2 * * *", timezone="Europe/Berlin", catch_up="all")
    assert made["schedule_id"] == "nightly"
    assert made["paused"] is False and made["last_occurrence"] is None
    assert made["grant_id"] == "g" and "authorization_snapshot" not in made
    assert made["created_by"] == "agent:a1"
    first = datetime.fromtimestamp(made["next_occurrence"], BERLIN)
    assert (first.hour, first.minute) == (2, 30)
    assert store.schedules.get(T, APP, "nightly", now=START) == made
    assert [s["schedule_id"] for s in store.schedules.listed(T, APP, now=START)] == ["nightly"]
    assert store.schedules.listed(T, "other", now=START) == []
    # Another tenant's application sees none of it.
    with pytest.raises(WorkloadError) as missing:
        store.schedules.get("t2", APP, "nightly")
    assert missing.value.code == "WORKLOAD_NOT_FOUND"


def test_each_due_occurrence_is_admitted_once_with_its_key_and_not_before(store):
    create(store, interval_s=60, catch_up="all")
    assert store.schedules.run_due(now=START + 59) == []
    admitted = store.schedules.run_due(now=START + 150)
    assert [(o.instant, o.created) for o in admitted] == [(START + 60, True), (START + 120, True)]
    # The same pass again, or another scheduler's, admits nothing twice.
    assert store.schedules.run_due(now=START + 150) == []
    work = sorted(scheduled(store), key=lambda w: w.next_attempt_at)
    assert [w.next_attempt_at for w in work] == [START + 60, START + 120]
    assert [w.idempotency_key for w in work] == [
        occurrence_key("nightly", START + 60),
        occurrence_key("nightly", START + 120),
    ]
    assert {w.state for w in work} == {WorkloadState.READY}
    assert {w.requested_by for w in work} == {CREATOR}
    assert {w.trigger for w in work} == {"schedule:nightly"}
    assert all(w.input == TEMPLATE["input"] for w in work)
    after = store.schedules.get(T, APP, "nightly", now=START + 150)
    assert after["last_occurrence"] == START + 120
    assert after["last_workload_id"] == work[-1].workload_id
    assert after["admitted"] == 2
    assert store.schedules.next(T, APP, "nightly", 3, now=START + 150) == [
        START + 180,
        START + 240,
        START + 300,
    ]


def test_an_occurrence_admitted_before_the_cursor_advanced_is_replayed_not_doubled(store):
    create(store, interval_s=60)
    # A scheduler that stopped between admitting and advancing: the occurrence exists.
    from feltdb.work.schedules import occurrence_request, schedule_key, stored

    row = store.db.get_row("system_schedules", schedule_key(T, APP, "nightly"))
    store.admit(occurrence_request(stored(row), START + 60, START + 61))
    [again] = store.schedules.run_due(now=START + 70)
    assert (again.instant, again.created) == (START + 60, False)
    assert len(scheduled(store)) == 1
    assert store.schedules.get(T, APP, "nightly", now=START + 70)["admitted"] == 1


def test_catch_up_skip_admits_only_the_latest_missed_occurrence(store):
    create(store, interval_s=60, catch_up="skip")
    admitted = store.schedules.run_due(now=START + 600)  # ten were due
    assert [o.instant for o in admitted] == [START + 600]
    state = store.schedules.get(T, APP, "nightly", now=START + 600)
    assert state["skipped_before"] == START + 600


def test_catch_up_all_admits_each_up_to_its_bound_over_passes(store):
    create(store, interval_s=60, catch_up="all", max_catch_up=40)
    first = store.schedules.run_due(now=START + 100 * 60)
    # The latest 40 of 100, oldest first, 32 in this pass and the rest in the next.
    assert [o.instant for o in first] == [START + 60 * n for n in range(61, 93)]
    second = store.schedules.run_due(now=START + 100 * 60)
    assert [o.instant for o in second] == [START + 60 * n for n in range(93, 101)]
    assert len(scheduled(store)) == 40
    assert store.schedules.run_due(now=START + 100 * 60) == []


def test_the_pass_is_bounded_over_every_schedule(store):
    for n in range(3):
        create(store, f"s{n}", interval_s=60, catch_up="all")
    assert len(store.schedules.run_due(now=START + 600, most=12)) == 12
    assert len(store.schedules.run_due(now=START + 600)) == 18


def test_a_paused_schedule_admits_nothing_and_resumes_from_then(store):
    create(store, interval_s=60, catch_up="all")
    paused = store.schedules.set_paused(T, APP, "nightly", True, "human:ops", now=START + 10)
    assert paused["paused"] is True and paused["next_occurrence"] is None
    assert store.schedules.run_due(now=START + 300) == []
    resumed = store.schedules.set_paused(T, APP, "nightly", False, "human:ops", now=START + 300)
    assert resumed["paused"] is False and resumed["next_occurrence"] == START + 360
    # The occurrences that fell while it was paused are never admitted.
    assert [o.instant for o in store.schedules.run_due(now=START + 420)] == [
        START + 360,
        START + 420,
    ]


def test_a_deleted_schedule_admits_nothing_more(store):
    create(store, interval_s=60)
    store.schedules.run_due(now=START + 60)
    store.schedules.delete(T, APP, "nightly", "human:ops")
    assert store.schedules.run_due(now=START + 600) == []
    assert len(scheduled(store)) == 1  # its work stays
    with pytest.raises(WorkloadError) as missing:
        store.schedules.delete(T, APP, "nightly", "human:ops")
    assert missing.value.code == "WORKLOAD_NOT_FOUND"
    create(store, now=START + 600)  # the id may be used again


def test_a_revoked_creator_grant_stops_the_schedule(store):
    create(store, interval_s=60)
    store.grants.revoke("g", "human:ops", tenant_id=T, application_id=APP)
    assert store.schedules.run_due(now=START + 120) == []
    stopped = store.schedules.get(T, APP, "nightly", now=START + 120)
    assert stopped["paused"] is True and "revoked" in stopped["paused_reason"]
    assert scheduled(store) == []


@pytest.mark.parametrize(
    ("spec", "code", "field"),
    [
        ({"template": {"input": 1}}, "WORKLOAD_INVALID", "template.definition_id"),
        ({"template": {**TEMPLATE, "not_before": 5}}, "WORKLOAD_INVALID", "template.not_before"),
        ({"template": {**TEMPLATE, "idempotency_key": "k"}}, "WORKLOAD_INVALID", None),
        ({"template": {**TEMPLATE, "input": "x" * 70_000}}, "WORKLOAD_INVALID", "template"),
        ({"template": {**TEMPLATE, "priority": 2**40}}, "WORKLOAD_INVALID", "template.priority"),
        (
            {"template": {**TEMPLATE, "input": {"password": "hunter2"}}},
            "WORKLOAD_SECRET_REJECTED",
            None,
        ),
        ({"schedule_id": "a/b"}, "WORKLOAD_INVALID", "schedule_id"),
        ({"schedule_id": "x" * 65}, "WORKLOAD_INVALID", "schedule_id"),
        ({"catch_up": "sometimes"}, "WORKLOAD_INVALID", "catch_up"),
        ({"catch_up": "all", "max_catch_up": 1001}, "WORKLOAD_INVALID", "max_catch_up"),
        ({"cron": "0 25 * * *"}, "WORKLOAD_INVALID", "cron"),
        ({"colour": "red"}, "WORKLOAD_INVALID", "colour"),
    ],
)
def test_a_bad_schedule_is_refused_at_create_and_nothing_is_stored(store, spec, code, field):
    with pytest.raises(WorkloadError) as refused:
        create(store, **{"interval_s": 60, **spec} if "cron" not in spec else spec)
    assert refused.value.code == code
    if field is not None:
        assert field in refused.value.details["fields"]
    assert store.schedules.listed(T, APP, now=START) == []


def test_a_template_outside_the_grant_constraints_is_refused_at_create(store):
    narrowed = SIGNER.sign(make_grant(subject=CREATOR, constraints={"environments": ["staging"]}))
    with pytest.raises(WorkloadError) as refused:
        store.schedules.create(
            {"schedule_id": "x", "interval_s": 60, "template": TEMPLATE},
            tenant_id=T, application_id=APP, requested_by=CREATOR,
            authorization_snapshot=narrowed, now=START,
        )  # fmt: skip
    assert refused.value.code == "WORKLOAD_UNAUTHORIZED"


def test_ids_are_unique_and_an_application_has_a_bounded_number(store):
    create(store)
    with pytest.raises(WorkloadError) as taken:
        create(store)
    assert taken.value.code == "WORKLOAD_CONFLICT"
    for n in range(1, MAX_SCHEDULES_PER_APPLICATION):
        create(store, f"s{n}")
    with pytest.raises(WorkloadError) as full:
        create(store, "one-too-many")
    assert full.value.code == "WORKLOAD_CONFLICT"


def test_every_change_is_in_the_applications_audit(store):
    create(store, interval_s=60)
    store.schedules.run_due(now=START + 60)
    store.schedules.set_paused(T, APP, "nightly", True, "human:ops", now=START + 61)
    store.schedules.delete(T, APP, "nightly", "human:ops")
    entries, _ = store.audit.after(T, APP, 0, 100)
    kinds = [
        (e.audit["kind"], e.audit["subject"]) for e in entries if "schedule" in e.audit["kind"]
    ]
    assert kinds == [
        ("schedule.created", "agent:a1"),
        ("schedule.occurred", "service:feltdb-scheduler"),
        ("schedule.paused", "human:ops"),
        ("schedule.deleted", "human:ops"),
    ]


def test_a_schedule_survives_a_restart(store_target, open_store):
    create(open_store(), interval_s=60)
    store = open_store()
    assert [o.instant for o in store.schedules.run_due(now=START + 60)] == [START + 60]


def test_dst_a_berlin_0230_schedule_admits_once_each_day_through_both_transitions(store):
    spring_eve = int(datetime(2026, 3, 28, 12, tzinfo=BERLIN).timestamp())
    create(store, "spring", now=spring_eve, cron="30 2 * * *", timezone="Europe/Berlin",
           catch_up="all")  # fmt: skip
    [spring] = store.schedules.run_due(now=spring_eve + 86400)
    assert datetime.fromtimestamp(spring.instant, BERLIN).strftime("%H:%M%z") == "03:00+0200"
    autumn_eve = int(datetime(2026, 10, 24, 12, tzinfo=BERLIN).timestamp())
    create(store, "autumn", now=autumn_eve, cron="30 2 * * *", timezone="Europe/Berlin",
           catch_up="all")  # fmt: skip
    # Passes every hour through the long night: the repeated 02:30 is admitted once.
    admitted = []
    for hour in range(1, 25):
        admitted += [o for o in store.schedules.run_due(now=autumn_eve + hour * 3600)
                     if o.schedule_id == "autumn"]  # fmt: skip
    assert [datetime.fromtimestamp(o.instant, BERLIN).strftime("%d %H:%M%z") for o in admitted] == [
        "25 02:30+0200"
    ]


def test_a_schedule_row_that_cannot_be_read_does_not_stop_the_others(store, caplog):
    from feltdb.storage.base import Mutation
    from feltdb.work.schedules import schedule_key, stored

    create(store, "broken", interval_s=60)
    create(store, "no-cursor", interval_s=60)
    create(store, "fine", interval_s=60)
    for name, field, value in (("broken", "authorization_snapshot", {"grant": "?"}),
                               ("no-cursor", "cursor", None)):  # fmt: skip
        key = schedule_key(T, APP, name)
        document = stored(store.db.get_row("system_schedules", key))
        document[field] = value
        store.db.commit(f"corrupt-{name}", [Mutation("system_schedules", key, document)])
    admitted = store.schedules.run_due(now=START + 60)
    assert [o.schedule_id for o in admitted] == ["fine"]
    assert "schedule row" in caplog.text
