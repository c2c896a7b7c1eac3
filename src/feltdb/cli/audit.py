"""``feltdb audit``: the committed transactions of an application, once or followed; and
``feltdb audit verify``, the check of the audit chain.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated

import typer

from feltdb.auth.capabilities import AUDIT
from feltdb.cli.audit_lines import audit_line
from feltdb.cli.render import print_json, verify_lines
from feltdb.cli.targets import (
    Target,
    connected,
    targeted,
    typed,
    typed_options,
    usage_error,
    within,
)
from feltdb.errors import ErrorCode, WorkloadError

if TYPE_CHECKING:  # what a command runs is imported when it runs, not for --help
    from feltdb.client.protocol import AuditPage, WorkloadClient

audit_app = typer.Typer(add_completion=False, rich_markup_mode=None)
"""Holds the ``audit`` group; the root adds it without a name (a top-level group)."""

audit_group = typer.Typer(name="audit", add_completion=False, rich_markup_mode=None)
"""``feltdb audit`` lists the log itself; ``feltdb audit verify`` checks its chain."""
audit_app.add_typer(audit_group)

AUDIT_PAGE = 100
"""Transactions asked for per audit request."""

MAX_FOLLOW_PAUSE_S = 60.0
"""The longest ``audit --follow`` waits between attempts to reach a store it lost."""

SinceOption = Annotated[
    int, typer.Option(min=0, help="Show transactions committed after this revision.")
]
FollowOption = Annotated[
    bool,
    typer.Option(
        "--follow",
        "-f",
        help="Keep polling for new ones until Ctrl-C, reconnecting (with backoff, said "
        "on stderr) when the server or store is lost.",
    ),
]
IntervalOption = Annotated[
    float, typer.Option(min=0.05, help="With --follow: seconds between polls.")
]
JsonLinesOption = Annotated[
    bool, typer.Option("--json", help="Print one JSON object per transaction per line.")
]
WorkloadOption = Annotated[
    str | None,
    typer.Option(
        "--workload",
        metavar="ID",
        help="Only the transactions that touched workload ID. The log is read as without "
        f"it: every transaction after --since, {AUDIT_PAGE} a request, to its end (and "
        "on, with --follow); give --since to read less of a long log.",
    ),
]


AnchorOption = Annotated[
    str | None,
    typer.Option(
        help="REVISION:LINK, the head an earlier verify printed: the chain must still "
        "hold it (finds a log cut back, or rewritten with every hash recomputed)."
    ),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print the report as one JSON object.")]


@dataclass(frozen=True)
class _Listing:
    """How ``feltdb audit`` prints what it reads."""

    json_output: bool
    work_id: str | None
    """Only this workload's transactions (``None``: every one)."""


@dataclass(frozen=True)
class _Given:
    """What ``feltdb audit`` was given before its subcommand."""

    target: Target
    json_output: bool


@audit_group.callback(invoke_without_command=True)
@targeted
def audit(
    context: typer.Context,
    since: SinceOption = 0,
    follow: FollowOption = False,
    interval: IntervalOption = 1.0,
    json_output: JsonLinesOption = False,
    workload: WorkloadOption = None,
    *,
    target: Target,
) -> None:
    """Print the committed transactions of the application after a revision, oldest
    first, one a line: revision, time, who (KIND:ID; an admission's requester), operation
    → state, workload. `feltdb audit verify` checks that none was altered, removed or
    reordered.
    """
    if context.invoked_subcommand is not None:
        options = ("since", "follow", "interval", "workload")
        listing = [f"--{name}" for name in options if typed(context, name)]
        if listing:
            raise usage_error(f"{', '.join(listing)}: options of the listing, not of verify")
        # For `feltdb audit --db X [--json] verify`: what the group was given reaches it.
        context.obj = _Given(target, json_output)
        return
    with connected(target, needs=(AUDIT,)) as client:
        try:
            _print_audit(client, since, follow, interval, _Listing(json_output, workload))
        except KeyboardInterrupt:
            # Ctrl-C is how --follow ends: a normal exit.
            return


def _print_audit(
    client: WorkloadClient, after: int, follow: bool, interval: float, listing: _Listing
) -> None:
    pause = interval
    while True:
        try:
            page = client.audit(after=after, limit=AUDIT_PAGE)
        except WorkloadError as error:
            if not follow or error.code != ErrorCode.WORKLOAD_STORAGE_FAILURE:
                raise
            # Following outlives a server restart or a lost connection: say so, and try
            # again, waiting twice as long each time up to a minute.
            pause = min(max(pause * 2, interval), MAX_FOLLOW_PAUSE_S)
            typer.echo(f"{error.message}; retrying in {pause:.1f}s", err=True)
            time.sleep(pause)
            continue
        if pause != interval:
            typer.echo("reconnected", err=True)
            pause = interval
        _print_page(page, listing)
        if page.next_after != after:
            after = page.next_after
            continue  # more may follow at once
        if not follow:
            return
        time.sleep(interval)


def _print_page(page: AuditPage, listing: _Listing) -> None:
    for transaction in page.items:
        if listing.work_id is not None and transaction.work_id != listing.work_id:
            continue
        if listing.json_output:
            print_json(transaction.model_dump(mode="json"))
        else:
            # Plain and flushed: a line per commit, for tail-like use and pipes.
            typer.echo(audit_line(transaction))


@audit_group.command()
@targeted
def verify(
    context: typer.Context,
    anchor: AnchorOption = None,
    json_output: JsonOption = False,
    *,
    target: Target,
) -> None:
    """Check the audit chain: seal the log's final transactions, then walk the whole log
    and check every row against the transaction that wrote it. Prints what was checked,
    the head to note (pass it back as --anchor later), and the first transaction altered,
    removed or reordered; exits 1 if there is one.
    """
    given = context.obj if isinstance(context.obj, _Given) else None
    if given is not None:
        target = within(given.target, target, typed_options(context))
        json_output = json_output or given.json_output
    from feltdb.client.local import LocalClient
    from feltdb.work.audit import anchor_of

    with connected(target, needs=(AUDIT,)) as client:
        if isinstance(client, LocalClient):
            # The local operator holds the store itself: the whole report, unredacted.
            noted = None if anchor is None else anchor_of(anchor)
            report = client.store.audit.verify(anchor=noted)
        else:
            report = client.verify_audit(anchor=anchor)
    if json_output:
        print_json(report.model_dump(mode="json"))
    else:
        for line in verify_lines(report):
            typer.echo(line)
    if not report.ok:
        raise typer.Exit(1)
