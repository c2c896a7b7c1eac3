"""``feltdb limits``: what the application's concurrency limits hold now, as
``GET /v1/limits/concurrency`` answers (:func:`feltdb.work.limits_view.concurrency_keys`);
``feltdb limits set``: a definition's default limit; ``feltdb limits rate``: the rate limits
(``GET /v1/limits/rate``), set and removed; ``feltdb limits aging``; ``feltdb limits quota``:
the admission quotas (:mod:`feltdb.cli.quota`).
"""

from __future__ import annotations

from typing import Annotated

import typer

from feltdb.auth.capabilities import OPERATE, READ
from feltdb.cli.quota import quota_group
from feltdb.cli.targets import JsonOption, Target, connected, targeted, usage_error

limits_app = typer.Typer(add_completion=False, rich_markup_mode=None)
"""Holds the ``limits`` group; the root adds it without a name (a top-level group)."""

limits_group = typer.Typer(name="limits", add_completion=False, rich_markup_mode=None)
limits_app.add_typer(limits_group)
limits_group.add_typer(quota_group)


@limits_group.callback(invoke_without_command=True)
@targeted
def limits(context: typer.Context, json_output: JsonOption = False, *, target: Target) -> None:
    """List the application's concurrency keys (needs workload:read over all of it): each
    key's limit, how many of its slots are held, and the workloads holding them; and each
    definition's default limit. Work names a key with `feltdb submit --concurrency-key KEY
    --concurrency-limit N`; `feltdb limits set` gives a definition's new work a default.
    """
    if context.invoked_subcommand is not None:
        return
    from feltdb.cli.render import print_json, stdout_console

    with connected(target, needs=(READ,)) as client:
        found = client.concurrency_keys()
    if json_output:
        print_json(found.to_json())
        return
    console = stdout_console()
    for definition, limit in found.definitions.items():
        console.print(f"definition {definition}: at most {limit} at once", markup=False)
    if not found.keys:
        console.print("no concurrency key has been claimed")
    for entry in found.keys:
        limit_text = "?" if entry.limit is None else str(entry.limit)
        console.print(f"{entry.key}: {len(entry.holders)} of {limit_text} held", markup=False)
        for holder in entry.holders:
            console.print(f"  {holder}", markup=False)
    if not found.complete:
        console.print("(more keys than one answer lists: the first 100 are shown)")


@limits_group.command("set")
@targeted
def set_limit(
    definition: Annotated[str, typer.Argument(metavar="DEFINITION")],
    limit: Annotated[str, typer.Argument(metavar="LIMIT", help="1 to 1000, or none.")],
    *,
    target: Target,
) -> None:
    """Give DEFINITION's work admitted from now on a concurrency limit (its key:
    definition:DEFINITION) unless it names a key of its own; `none` removes it. Work
    already admitted keeps its limit. Needs workload:operate over the whole application.
    """
    if limit == "none":
        chosen = None
    elif limit.isascii() and limit.isdigit() and 1 <= int(limit) <= 1000:
        chosen = int(limit)
    else:
        raise usage_error(f"LIMIT {limit!r}: a number from 1 to 1000, or none")
    with connected(target, needs=(OPERATE,)) as client:
        client.set_definition_limit(definition, chosen)
    said = "no limit" if chosen is None else f"at most {chosen} at once"
    typer.echo(f"definition {definition}: {said} (work admitted from now on)")


rate_group = typer.Typer(name="rate", add_completion=False, rich_markup_mode=None)
limits_group.add_typer(rate_group)


@rate_group.callback(invoke_without_command=True)
@targeted
def rates(context: typer.Context, json_output: JsonOption = False, *, target: Target) -> None:
    """List the application's rate limits (needs workload:read over all of it): each
    one's starts per period. Work names one with `feltdb submit --rate-limit NAME
    [--rate-key KEY]`; `feltdb limits rate set` sets one.
    """
    if context.invoked_subcommand is not None:
        return
    from feltdb.cli.render import print_json, stdout_console

    with connected(target, needs=(READ,)) as client:
        found = client.rate_limits()
    if json_output:
        print_json(found.to_json())
        return
    console = stdout_console()
    if not found.limits:
        console.print("no rate limit is set")
    for limit in found.limits:
        console.print(
            f"{limit.name}: at most {limit.starts} starts per {limit.period_s} s, per key",
            markup=False,
        )


@rate_group.command("set")
@targeted
def set_rate(
    name: Annotated[str, typer.Argument(metavar="NAME")],
    starts: Annotated[int, typer.Argument(metavar="STARTS", min=1, max=1000, help="1 to 1000.")],
    period: Annotated[
        int, typer.Argument(metavar="SECONDS", min=1, max=86_400, help="1 to 86400 (a day).")
    ],
    *,
    target: Target,
) -> None:
    """Let work naming the rate limit NAME start at most STARTS times per SECONDS, per key
    (each --rate-key has a window of its own); from the next claim on. Needs
    workload:operate over the whole application.
    """
    with connected(target, needs=(OPERATE,)) as client:
        client.set_rate_limit(name, (starts, period))
    typer.echo(f"rate limit {name}: at most {starts} starts per {period} s, per key")


@rate_group.command("remove")
@targeted
def remove_rate(name: Annotated[str, typer.Argument(metavar="NAME")], *, target: Target) -> None:
    """Remove the rate limit NAME: its work runs unlimited from the next claim on. Needs
    workload:operate over the whole application.
    """
    with connected(target, needs=(OPERATE,)) as client:
        client.set_rate_limit(name, None)
    typer.echo(f"rate limit {name}: removed (its work runs unlimited)")


@limits_group.command("aging")
@targeted
def aging(
    seconds: Annotated[
        str | None,
        typer.Argument(metavar="[SECONDS|none]", help="1 to 2592000 (30 days), or none."),
    ] = None,
    *,
    target: Target,
) -> None:
    """Show the application's aging period, or set it: at each claim, ready work counts
    one priority higher for every SECONDS since it was created, so low-priority work is
    served in time whatever arrives above it; `none` removes it. Setting needs
    workload:operate over the whole application.
    """
    if seconds is None:
        with connected(target, needs=(READ,)) as client:
            period = client.aging()
        typer.echo("no aging" if period is None else f"aging: one priority step per {period} s")
        return
    if seconds == "none":
        chosen = None
    elif seconds.isascii() and seconds.isdigit() and 1 <= int(seconds) <= 2_592_000:
        chosen = int(seconds)
    else:
        raise usage_error(f"SECONDS {seconds!r}: a number from 1 to 2592000, or none")
    with connected(target, needs=(OPERATE,)) as client:
        client.set_aging(chosen)
    typer.echo("no aging" if chosen is None else f"aging: one priority step per {chosen} s")
