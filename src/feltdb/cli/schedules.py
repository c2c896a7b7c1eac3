"""``feltdb schedule``: create, list, pause, resume, delete recurring schedules, and show
a schedule's next occurrences (a dry run), through the target's client.

Each occurrence is admitted by a server's maintenance (or, with ``--db`` only, by a worker
on the store, or ``store.schedules.run_due``): the commands here only manage schedules.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from feltdb.auth.capabilities import SCHEDULE, SUBMIT
from feltdb.cli.keyrings import KeyringFileOption
from feltdb.cli.parsing import parse_input
from feltdb.cli.render import print_json, stdout_console, when
from feltdb.cli.targets import JsonOption, Target, connected, targeted

schedule_app = typer.Typer(
    help="Recurring schedules: each occurrence admits a workload, exactly once.",
    no_args_is_help=True,
    rich_markup_mode=None,
)
"""The ``schedule`` group; the root adds it under that name."""

IdArgument = Annotated[
    str, typer.Argument(metavar="ID", help="The schedule's id (letters, digits, . _ -).")
]
CronOption = Annotated[
    str | None,
    typer.Option(help='A five-field cron expression, e.g. "30 2 * * *".', show_default=False),
]
TimezoneOption = Annotated[
    str | None,
    typer.Option(
        "--timezone", "--tz", help="The cron's IANA time zone (default UTC).", show_default=False
    ),
]
EveryOption = Annotated[
    int | None,
    typer.Option("--every", metavar="SECONDS", help="An interval instead of cron.", min=1),
]
CatchUpOption = Annotated[
    str,
    typer.Option(
        help="After missed occurrences: skip (admit the latest only) or all (each, oldest "
        "first, at most --max-catch-up)."
    ),
]
MaxCatchUpOption = Annotated[int, typer.Option(min=1, help="The most missed ones catch-up admits.")]
DefinitionOption = Annotated[str, typer.Option(help="The definition each occurrence runs.")]
InputOption = Annotated[
    str, typer.Option("--input", "-i", help="The input: JSON text, or @FILE holding JSON.")
]
EnvironmentOption = Annotated[str, typer.Option(help="The environment it runs in.")]
PriorityOption = Annotated[int, typer.Option(help="Higher is claimed first.")]
CapabilityOption = Annotated[
    list[str] | None,
    typer.Option(help="A capability a worker must hold to run it (repeatable)."),
]
CountOption = Annotated[int, typer.Option("--count", "-n", min=1, max=50, help="How many.")]


def _describe(schedule: dict[str, Any]) -> str:
    """When ``schedule`` occurs, in words."""
    if schedule["cron"] is not None:
        return f"cron {schedule['cron']!r} {schedule['timezone']}"
    return f"every {schedule['interval_s']}s"


def _when(instant: int | None, zone: str | None) -> str:
    """An instant as :func:`when` writes it, and as the wall time of a cron's ``zone``
    (where daylight saving shows: ``… UTC (02:30 Europe/Berlin)``).
    """
    if instant is None or zone is None or zone == "UTC":
        return when(instant)
    from datetime import datetime
    from zoneinfo import ZoneInfo

    local = datetime.fromtimestamp(instant, ZoneInfo(zone))
    return f"{when(instant)} ({local:%H:%M} {zone})"


def _print(schedule: dict[str, Any]) -> None:
    """One schedule, a line a field (fits 80 columns)."""
    console = stdout_console()
    state = "paused" if schedule["paused"] else "active"
    if schedule["paused_reason"]:
        state += f" ({schedule['paused_reason']})"
    console.print(f"schedule {schedule['schedule_id']}: {state}")
    console.print(f"  when:      {_describe(schedule)}, catch-up {schedule['catch_up']}")
    console.print(f"  runs:      {schedule['template'].get('definition_id')}")
    zone = schedule["timezone"]
    console.print(f"  next:      {_when(schedule['next_occurrence'], zone)}")
    last = _when(schedule["last_occurrence"], zone)
    console.print(f"  last:      {last} ({schedule['admitted']} admitted)")
    if schedule["last_error"]:
        console.print(f"  error:     {schedule['last_error']}")


@schedule_app.command("create")
@targeted
def schedule_create(
    schedule_id: IdArgument,
    definition: DefinitionOption,
    cron: CronOption = None,
    timezone: TimezoneOption = None,
    every: EveryOption = None,
    catch_up: CatchUpOption = "skip",
    max_catch_up: MaxCatchUpOption = 100,
    input: InputOption = "{}",
    environment: EnvironmentOption = "production",
    priority: PriorityOption = 0,
    capability: CapabilityOption = None,
    keyring: KeyringFileOption = None,
    json_output: JsonOption = False,
    *,
    target: Target,
) -> None:
    """Create a schedule (--cron, or --every SECONDS): each occurrence admits a workload
    of --definition with --input, not before the occurrence. Needs schedule:manage and
    workload:execute.
    """
    from feltdb.client.schedules import ScheduleSpec

    template = {
        "definition_id": definition,
        "input": parse_input(input),
        "environment": environment,
        "priority": priority,
        "capability_snapshot": capability or [],
    }
    spec = ScheduleSpec(
        schedule_id, template, cron=cron, timezone=timezone, interval_s=every,
        catch_up=catch_up, max_catch_up=max_catch_up,
    )  # fmt: skip
    needs = (SCHEDULE, SUBMIT)
    # A schedule adds work, as a submission does: a new store file is made for it.
    with connected(target, create=True, needs=needs, records=True, keyring=keyring) as client:
        made = client.create_schedule(spec)
    if json_output:
        print_json(made)
        return
    _print(made)


@schedule_app.command("ls")
@targeted
def schedule_list(json_output: JsonOption = False, *, target: Target) -> None:
    """List the application's schedules: when each occurs, its next occurrence, what it
    last admitted, and whether it is paused.
    """
    with connected(target, needs=(SCHEDULE,)) as client:
        found = client.schedules()
    if json_output:
        print_json(found)
        return
    if not found:
        stdout_console().print("schedules: none")
        return
    for schedule in found:
        _print(schedule)


@schedule_app.command("pause")
@targeted
def schedule_pause(schedule_id: IdArgument, *, target: Target) -> None:
    """Pause a schedule: nothing is admitted until it is resumed."""
    with connected(target, needs=(SCHEDULE,)) as client:
        client.pause_schedule(schedule_id)
    stdout_console().print(f"paused schedule {schedule_id}")


@schedule_app.command("resume")
@targeted
def schedule_resume(schedule_id: IdArgument, *, target: Target) -> None:
    """Resume a schedule from now (occurrences that fell while paused are not admitted)."""
    with connected(target, needs=(SCHEDULE,)) as client:
        resumed = client.resume_schedule(schedule_id)
    next_at = when(resumed["next_occurrence"])
    stdout_console().print(f"resumed schedule {schedule_id}; next {next_at}")


@schedule_app.command("rm")
@targeted
def schedule_remove(schedule_id: IdArgument, *, target: Target) -> None:
    """Delete a schedule (the work it admitted stays)."""
    with connected(target, needs=(SCHEDULE,)) as client:
        client.delete_schedule(schedule_id)
    stdout_console().print(f"deleted schedule {schedule_id}")


@schedule_app.command("next")
@targeted
def schedule_next(
    schedule_id: IdArgument, count: CountOption = 5, json_output: JsonOption = False, *,
    target: Target,
) -> None:  # fmt: skip
    """Show a schedule's next occurrences: a dry run, admitting nothing."""
    with connected(target, needs=(SCHEDULE,)) as client:
        zone = client.schedule(schedule_id)["timezone"]
        found = client.next_occurrences(schedule_id, count)
    if json_output:
        print_json(found)
        return
    for instant in found:
        typer.echo(_when(instant, zone))
