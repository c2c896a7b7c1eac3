"""When a schedule occurs: a cron expression in an IANA time zone, or a fixed interval.

Pure functions of their arguments (no clock, no store). Instants are unix seconds.

A cron expression has five fields (minute, hour, day of month, month, day of week) and is
read by ``cronsim`` (the parser Healthchecks.io wrote and keeps), in the schedule's zone
(:mod:`zoneinfo`). Daylight-saving transitions are cronsim's:

* a wall time the spring-forward gap skips (02:30 in Europe/Berlin on 2026-03-29) occurs
  once, at the first instant after the gap (03:00 local, 01:00 UTC);
* a wall time the autumn fold repeats (02:30 on 2026-10-25) occurs once, at its first
  (summer-time) instant, for an expression with a fixed hour; an expression whose hour
  field is a wildcard or a range (``*/30 * * * *``) occurs in both passes of the hour,
  since each is another half hour.

An interval occurs at ``anchor + k * interval_s`` for every integer ``k``.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError

from feltdb.errors import ErrorCode, WorkloadError
from feltdb.fields import MAX_NOW

MAX_CRON_CHARS = 128
"""The longest cron expression, in characters."""

MIN_INTERVAL_S = 1
MAX_INTERVAL_S = 366 * 86400
"""An interval is 1 second to 366 days."""

MAX_NEXT = 50
"""The most occurrences one :func:`next_occurrences` call answers."""


@dataclass(frozen=True, slots=True)
class Recurrence:
    """When a schedule occurs: ``cron`` in ``timezone``, or every ``interval_s`` seconds
    from ``anchor`` (exactly one of the two).
    """

    cron: str | None = None
    timezone: str | None = None
    interval_s: int | None = None
    anchor: int = 0

    def describe(self) -> str:
        """The recurrence in words: ``cron "30 2 * * *" in Europe/Berlin`` or ``every 60s``."""
        if self.cron is not None:
            return f'cron "{self.cron}" in {self.timezone}'
        return f"every {self.interval_s}s"


def _invalid(field: str, message: str) -> WorkloadError:
    return WorkloadError(ErrorCode.WORKLOAD_INVALID, f"{field}: {message}", {"fields": [field]})


def zone(name: object) -> ZoneInfo:
    """The IANA time zone ``name`` (``Europe/Berlin``, ``UTC``).

    Raises:
        WorkloadError: ``WORKLOAD_INVALID`` naming ``timezone`` for an unknown zone.
    """
    if not isinstance(name, str) or not name or len(name) > 64 or "\0" in name:
        raise _invalid("timezone", "must be an IANA time zone name such as Europe/Berlin")
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise _invalid("timezone", f"no IANA time zone {name!r}") from None


def recurrence(
    cron: object = None, timezone: object = None, interval_s: object = None, anchor: int = 0
) -> Recurrence:
    """A checked :class:`Recurrence`: a five-field ``cron`` expression with its ``timezone``
    (default ``UTC``), or an ``interval_s`` anchored at ``anchor``.

    Raises:
        WorkloadError: ``WORKLOAD_INVALID`` naming the field: both or neither given, a cron
            expression cronsim refuses (or not of five fields, or over
            :data:`MAX_CRON_CHARS`), an unknown zone, an interval out of bounds.
    """
    if (cron is None) == (interval_s is None):
        raise WorkloadError(
            ErrorCode.WORKLOAD_INVALID,
            "give a cron expression or an interval, exactly one",
            {"fields": ["cron", "interval_s"]},
        )
    if interval_s is not None:
        if timezone is not None:
            raise _invalid("timezone", "an interval has no time zone: give it with cron")
        if isinstance(interval_s, bool) or not isinstance(interval_s, int):
            raise _invalid("interval_s", "must be an integer number of seconds")
        if not MIN_INTERVAL_S <= interval_s <= MAX_INTERVAL_S:
            raise _invalid("interval_s", f"must be {MIN_INTERVAL_S} to {MAX_INTERVAL_S} seconds")
        return Recurrence(interval_s=interval_s, anchor=anchor)
    if not isinstance(cron, str) or not cron.strip() or len(cron) > MAX_CRON_CHARS:
        raise _invalid("cron", f"must be a cron expression of at most {MAX_CRON_CHARS} characters")
    expression = " ".join(cron.split())
    if len(expression.split(" ")) != 5:
        raise _invalid("cron", "must have five fields: minute hour day-of-month month day-of-week")
    name = "UTC" if timezone is None else timezone
    tz = zone(name)
    try:
        CronSim(expression, datetime.fromtimestamp(0, tz))
    except (CronSimError, ValueError, TypeError, LookupError, OverflowError) as error:
        raise _invalid("cron", f"{expression!r}: {error}") from None
    return Recurrence(cron=expression, timezone=tz.key)


def _cron_instants(rule: Recurrence, start: int, *, reverse: bool) -> Iterator[int]:
    """The cron occurrences strictly after (``reverse``: strictly before) ``start``; none
    beyond the calendar's last year (9999), where ``datetime`` ends.
    """
    assert rule.cron is not None and rule.timezone is not None
    tz = ZoneInfo(rule.timezone)
    try:
        moments = CronSim(rule.cron, datetime.fromtimestamp(start, UTC).astimezone(tz), reverse)
        for moment in moments:
            yield int(moment.timestamp())
    except (OverflowError, ValueError, OSError):
        return


def occurrences_after(rule: Recurrence, after: int, count: int) -> list[int]:
    """The first ``count`` occurrences strictly after ``after``, oldest first (fewer when
    the rule has no more before :data:`~feltdb.fields.MAX_NOW`).
    """
    if rule.interval_s is not None:
        step = rule.interval_s
        first = rule.anchor + ((after - rule.anchor) // step + 1) * step
        return [t for t in range(first, first + count * step, step) if t <= MAX_NOW]
    found: list[int] = []
    for instant in _cron_instants(rule, after, reverse=False):
        if len(found) >= count or instant > MAX_NOW:
            break
        found.append(instant)
    return found


def due(rule: Recurrence, after: int, now: int, most: int) -> tuple[list[int], bool]:
    """The occurrences in ``(after, now]``: the latest ``most`` of them, oldest first, and
    whether earlier ones were left out (there were more than ``most``). Read backwards
    from ``now``, so a schedule long unattended costs ``most`` steps, not one per missed
    occurrence.
    """
    if rule.interval_s is not None:
        step = rule.interval_s
        latest = rule.anchor + ((now - rule.anchor) // step) * step
        instants = list(range(latest, after, -step)[: most + 1])  # a range slices lazily
    else:
        instants = []
        for instant in _cron_instants(rule, now + 1, reverse=True):
            if instant <= after or len(instants) > most:
                break
            instants.append(instant)
    more = len(instants) > most
    return sorted(instants[:most]), more


def next_occurrences(rule: Recurrence, after: int, count: int) -> list[int]:
    """:func:`occurrences_after`, ``count`` bounded to 1 to :data:`MAX_NEXT` (a dry run).

    Raises:
        WorkloadError: ``WORKLOAD_INVALID`` naming ``count``.
    """
    if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= MAX_NEXT:
        raise _invalid("count", f"must be an integer from 1 to {MAX_NEXT}")
    return occurrences_after(rule, after, count)
