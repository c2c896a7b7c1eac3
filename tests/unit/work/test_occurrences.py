"""When a schedule occurs: cron in a time zone (daylight saving included), intervals, bounds."""

from __future__ import annotations

import itertools
from datetime import datetime
from zoneinfo import ZoneInfo

import pytest

from feltdb import WorkloadError
from feltdb.work.occurrences import (
    MAX_NEXT,
    due,
    next_occurrences,
    occurrences_after,
    recurrence,
)

BERLIN = ZoneInfo("Europe/Berlin")


def at(*fields: int) -> int:
    """The unix second of a Berlin wall time (the first one, in a repeated hour)."""
    return int(datetime(*fields, tzinfo=BERLIN).timestamp())


def wall(instant: int) -> str:
    """An instant as Berlin wall time with its offset."""
    return datetime.fromtimestamp(instant, BERLIN).strftime("%m-%d %H:%M%z")


def test_a_0230_schedule_on_the_spring_forward_day_occurs_once_right_after_the_gap():
    # 2026-03-29 in Berlin: 02:00 CET jumps to 03:00 CEST, so 02:30 does not exist.
    daily = recurrence("30 2 * * *", "Europe/Berlin")
    found = occurrences_after(daily, at(2026, 3, 27, 12, 0), 4)
    assert [wall(t) for t in found] == [
        "03-28 02:30+0100",
        "03-29 03:00+0200",  # the first instant after the gap, once
        "03-30 02:30+0200",
        "03-31 02:30+0200",
    ]
    assert found[1] - found[0] == 23 * 3600 + 1800  # 01:30 UTC to 01:00 UTC
    instants, _ = due(daily, at(2026, 3, 28, 12, 0), at(2026, 3, 29, 12, 0), 10)
    assert [wall(t) for t in instants] == ["03-29 03:00+0200"]


def test_a_0230_schedule_on_the_autumn_day_occurs_once_not_in_both_passes_of_the_hour():
    # 2026-10-25: 03:00 CEST falls back to 02:00 CET; 02:00-02:59 happens twice.
    daily = recurrence("30 2 * * *", "Europe/Berlin")
    found = occurrences_after(daily, at(2026, 10, 24, 12, 0), 3)
    assert [wall(t) for t in found] == ["10-25 02:30+0200", "10-26 02:30+0100", "10-27 02:30+0100"]
    assert found[1] - found[0] == 25 * 3600  # the long day
    # Read backwards (how the scheduler reads due occurrences), the same single one.
    instants, more = due(daily, at(2026, 10, 24, 12, 0), at(2026, 10, 25, 12, 0), 10)
    assert [wall(t) for t in instants] == ["10-25 02:30+0200"]
    assert not more


def test_a_0130_schedule_in_the_autumn_occurs_once():
    daily = recurrence("30 1 * * *", "Europe/Berlin")
    instants, _ = due(daily, at(2026, 10, 24, 12, 0), at(2026, 10, 26, 0, 0), 10)
    assert [wall(t) for t in instants] == ["10-25 01:30+0200"]


def test_a_half_hourly_schedule_occurs_in_both_passes_of_the_repeated_hour():
    every_half_hour = recurrence("*/30 * * * *", "Europe/Berlin")
    found = occurrences_after(every_half_hour, at(2026, 10, 25, 1, 45), 5)
    assert [wall(t) for t in found] == [
        "10-25 02:00+0200",
        "10-25 02:30+0200",
        "10-25 02:00+0100",
        "10-25 02:30+0100",
        "10-25 03:00+0100",
    ]
    assert all(b - a == 1800 for a, b in itertools.pairwise(found))


def test_utc_is_the_default_zone_and_occurrences_are_strictly_after():
    hourly = recurrence("0 * * * *")
    assert hourly.timezone == "UTC"
    assert occurrences_after(hourly, 3600, 2) == [7200, 10800]
    assert occurrences_after(hourly, 3599, 1) == [3600]


def test_an_interval_occurs_from_its_anchor():
    every_90s = recurrence(interval_s=90, anchor=1000)
    assert occurrences_after(every_90s, 1000, 3) == [1090, 1180, 1270]
    assert occurrences_after(every_90s, 1100, 1) == [1180]
    assert due(every_90s, 1000, 1300, 10) == ([1090, 1180, 1270], False)


def test_due_answers_the_latest_ones_and_says_when_earlier_ones_were_left_out():
    every_minute = recurrence(interval_s=60, anchor=0)
    # A year unattended costs the bound, not half a million steps.
    assert due(every_minute, 0, 365 * 86400, 3) == (
        [365 * 86400 - 120, 365 * 86400 - 60, 365 * 86400],
        True,
    )
    cron = recurrence("* * * * *")
    instants, more = due(cron, 0, 365 * 86400, 2)
    assert instants == [365 * 86400 - 60, 365 * 86400] and more
    assert due(cron, 365 * 86400, 365 * 86400 + 59, 5) == ([], False)


@pytest.mark.parametrize(
    ("arguments", "field"),
    [
        ({"cron": "61 * * * *"}, "cron"),
        ({"cron": "* * * * * *"}, "cron"),  # six fields: no seconds
        ({"cron": "@daily"}, "cron"),
        ({"cron": "0 0 30 2 *"}, "cron"),  # never occurs
        ({"cron": "x" * 200}, "cron"),
        ({"cron": "0 * * * *", "timezone": "Mars/Olympus"}, "timezone"),
        ({"cron": "0 * * * *", "timezone": ""}, "timezone"),
        ({"interval_s": 0}, "interval_s"),
        ({"interval_s": 400 * 86400}, "interval_s"),
        ({"interval_s": True}, "interval_s"),
        ({"interval_s": 60, "timezone": "UTC"}, "timezone"),
    ],
)
def test_a_bad_recurrence_is_refused_naming_its_field(arguments, field):
    with pytest.raises(WorkloadError) as refused:
        recurrence(**arguments)
    assert refused.value.code == "WORKLOAD_INVALID"
    assert refused.value.details["fields"] == [field]


def test_a_recurrence_is_cron_or_interval_exactly():
    for arguments in ({}, {"cron": "* * * * *", "interval_s": 60}):
        with pytest.raises(WorkloadError) as refused:
            recurrence(**arguments)
        assert refused.value.details["fields"] == ["cron", "interval_s"]


def test_the_dry_run_is_bounded():
    hourly = recurrence("0 * * * *")
    assert len(next_occurrences(hourly, 0, MAX_NEXT)) == MAX_NEXT
    for count in (0, MAX_NEXT + 1, "5"):
        with pytest.raises(WorkloadError):
            next_occurrences(hourly, 0, count)
