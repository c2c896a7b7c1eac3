"""The commands on work once it is admitted: list it (``ls``, ``inbox``, ``dead``), show
it, decide it (``approve``, ``reject``), cancel it and retry it.

Each command opens the target's client (:mod:`feltdb.cli.targets`), makes its calls and
renders the answer (:mod:`feltdb.cli.render`).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, TypeAlias

import typer

from feltdb.auth.capabilities import APPROVE, CANCEL, OPERATE, READ
from feltdb.cli.keyrings import KeyringFileOption
from feltdb.cli.render import print_json, show_workload, stdout_console
from feltdb.cli.tables import inbox_table, workload_table
from feltdb.cli.targets import JsonOption, Target, collect, connected, targeted
from feltdb.work.states import ApprovalOutcome, WorkloadState

if TYPE_CHECKING:  # what a command runs is imported when it runs, not for --help
    from feltdb.client.protocol import Page, WorkloadClient
    from feltdb.records.workload import Workload

work_app = typer.Typer(add_completion=False, rich_markup_mode=None)
"""Holds the commands on work; the root adds it without a name (top-level commands)."""

ORDER = "in order: highest priority, then oldest, first"
"""The order of every list, as its title says."""

EVERYTHING = 2**62
"""The ``--limit`` of ``--all``: more than any store holds."""

IdArgument = Annotated[str, typer.Argument(metavar="ID", help="The workload id.")]
LimitOption = Annotated[int, typer.Option(min=1, help="At most this many.")]
AllOption = Annotated[
    bool, typer.Option("--all", help="All of them, however many (pages through them).")
]
StateOption = Annotated[
    WorkloadState | None,
    typer.Option(
        metavar="STATE",
        help="Only work in this state (any case): "
        + ", ".join(state.value.lower() for state in WorkloadState)
        + ".",
        case_sensitive=False,
    ),
]
DefinitionOption = Annotated[str | None, typer.Option(help="Only work of this definition id.")]


Read: TypeAlias = "Callable[[WorkloadClient, str | None, int], Page]"
"""One page of a list: ``read(client, cursor, size)``."""


def _list(
    target: Target, need: str, read: Read, shown: tuple[int, bool, bool], title: str,
    *, reasons: bool = False, inbox: bool = False,
) -> None:  # fmt: skip
    """List what ``read`` pages through, as ``shown`` (``--limit``, ``--all``, ``--json``)
    asks: a table (or JSON only) of up to ``--limit``, and a word on stderr when there
    were more and how to see them.
    """
    limit, everything, json_output = shown
    # One more than shown is fetched, to know whether there are more.
    with connected(target, needs=(need,)) as client:
        found = collect(
            lambda cursor, size: read(client, cursor, size), EVERYTHING if everything else limit + 1
        )
    if everything:
        limit = EVERYTHING
    listed = found[:limit]
    if json_output:
        print_json([summary.to_json() for summary in listed])
    elif inbox:
        inbox_table(stdout_console(), listed, title)
    else:
        workload_table(stdout_console(), listed, title, reasons=reasons, order=ORDER)
    if len(found) > limit:
        typer.echo(
            f"{len(listed)} shown; there are more: --limit N for more, --all for all of them",
            err=True,
        )


@work_app.command("ls")
@targeted
def list_workloads(
    state: StateOption = None,
    definition: DefinitionOption = None,
    limit: LimitOption = 50,
    everything: AllOption = False,
    json_output: JsonOption = False,
    *,
    target: Target,
) -> None:
    """List work, highest priority first, then oldest first (the order a worker takes it).
    Says on stderr when there is more than --limit (50): --all lists everything.
    """

    def read(client: WorkloadClient, cursor: str | None, size: int) -> Page:
        return client.list(state=state, definition=definition, limit=size, cursor=cursor)

    _list(target, READ, read, (limit, everything, json_output), "workloads")


def _pages_command(name: str, need: str, read: Read, title: str, help: str) -> None:
    """Register ``feltdb NAME``: list what ``read`` pages through (``--limit``, ``--all``,
    ``--json`` and the target options), with ``title``.
    """

    @targeted
    def command(
        limit: LimitOption = 50,
        everything: AllOption = False,
        json_output: JsonOption = False,
        *,
        target: Target,
    ) -> None:
        shown = (limit, everything, json_output)
        _list(target, need, read, shown, title, reasons=name == "dead", inbox=name == "inbox")

    command.__name__ = command.__qualname__ = name
    work_app.command(name, help=help)(command)


_pages_command(
    "inbox",
    APPROVE,
    lambda client, cursor, size: client.approvals(limit=size, cursor=cursor),
    "awaiting approval",
    "List work awaiting an approval decision (decide with approve / reject).",
)
_pages_command(
    "dead",
    OPERATE,
    lambda client, cursor, size: client.dead_letters(limit=size, cursor=cursor),
    "dead letters",
    "List dead-lettered work: it will not run again unless retried (see retry).",
)


@work_app.command()
@targeted
def show(workload_id: IdArgument, json_output: JsonOption = False, *, target: Target) -> None:
    """Show one workload: its fields, attempts, checkpoints, result, approval and the
    timeline of every committed transition.
    """
    with connected(target, needs=(READ,)) as client:
        workload = client.get(workload_id)
        seen = None if json_output else dependency_states(client, workload)
    if json_output:
        from feltdb.work.disclosure import disclosed

        print_json(disclosed(workload))
    else:
        show_workload(stdout_console(), workload, seen=seen)


def _reviewed(client: WorkloadClient, workload_id: str) -> Workload:
    """The held work as read to review it; a grant that may not read it is told what
    deciding needs (``workload:approve``), not only what the read lacked.
    """
    from feltdb.errors import ErrorCode, WorkloadError

    try:
        return client.get(workload_id)
    except WorkloadError as error:
        if error.code != ErrorCode.WORKLOAD_UNAUTHORIZED:
            raise
        raise WorkloadError(
            error.code,
            f"approving and rejecting need a grant holding {APPROVE!r} on the work (reading"
            f" it to review was refused: {error.message})",
            error.details,
        ) from None


MAX_DEPENDENCIES_SHOWN = 20
"""The most dependencies ``show`` reads the state of (one request each)."""


def dependency_states(
    client: WorkloadClient, workload: Workload
) -> dict[str, WorkloadState | None]:
    """The state of each of ``workload``'s first :data:`MAX_DEPENDENCIES_SHOWN`
    dependencies, as ``client`` may read it (``None``: not visible to it).
    """
    from feltdb.errors import ErrorCode, WorkloadError

    states: dict[str, WorkloadState | None] = {}
    for dependency in workload.dependencies[:MAX_DEPENDENCIES_SHOWN]:
        try:
            states[dependency.workload_id] = client.get(dependency.workload_id).state
        except WorkloadError as error:
            if error.code != ErrorCode.WORKLOAD_NOT_FOUND:
                raise
            states[dependency.workload_id] = None
    return states


def _decide(
    target: Target,
    workload_id: str,
    decided: tuple[ApprovalOutcome, str | None],
    keyring: Path | None,
) -> None:
    """Decide held work as ``decided`` (the outcome, the reason) says, and print what became
    of it. With ``--db``, the decision names a grant signed with the keyring
    :mod:`feltdb.cli.keyrings` finds (``keyring``: the command's ``--keyring``).
    """
    outcome, reason = decided
    with connected(target, needs=(APPROVE,), records=True, keyring=keyring) as client:
        # The decision binds to the input as read now: if it changed since, the authority
        # refuses (WORKLOAD_APPROVAL_STALE) rather than approve what nobody reviewed.
        reviewed = _reviewed(client, workload_id)
        decision, replayed = client.decide(workload_id, outcome, reason, reviewed.input_hash)
        state = client.get(workload_id).state
    note = " (already decided)" if replayed else ""
    stdout_console().print(
        f"{decision.outcome.value} {workload_id} by {decision.decided_by}{note}: {state.value}"
    )


ReasonOption = Annotated[str | None, typer.Option(help="Why (kept with the decision).")]
RequiredReason = Annotated[str, typer.Option(help="Why (required; kept with the decision).")]


@work_app.command()
@targeted
def approve(
    workload_id: IdArgument,
    reason: ReasonOption = None,
    keyring: KeyringFileOption = None,
    *,
    target: Target,
) -> None:
    """Approve held work, bound to its current input: it becomes claimable. With --db,
    says on stderr which keyring signs the decision's grant.
    """
    _decide(target, workload_id, (ApprovalOutcome.APPROVED, reason), keyring)


@work_app.command()
@targeted
def reject(
    workload_id: IdArgument,
    reason: RequiredReason,
    keyring: KeyringFileOption = None,
    *,
    target: Target,
) -> None:
    """Reject held work, bound to its current input: it will never run. With --db, says on
    stderr which keyring signs the decision's grant.
    """
    _decide(target, workload_id, (ApprovalOutcome.REJECTED, reason), keyring)


@work_app.command()
@targeted
def cancel(workload_id: IdArgument, *, target: Target) -> None:
    """Cancel work: at once when no worker holds it, else by request to its worker."""
    with connected(target, needs=(CANCEL,)) as client:
        state = client.cancel(workload_id)
    stdout_console().print(f"cancel {workload_id}: {state.value}")


@work_app.command()
@targeted
def retry(
    workload_id: IdArgument,
    reason: Annotated[
        str,
        typer.Option(
            help="Why (recorded in its history; required, as on the dashboard: whoever reads"
            " the history later learns why the work ran again).",
            show_default=False,
        ),
    ],
    *,
    target: Target,
) -> None:
    """Re-arm failed, dead-lettered or timed-out work for one more attempt, saying why."""
    with connected(target, needs=(OPERATE,)) as client:
        workload = client.retry(workload_id, reason)
    stdout_console().print(f"retry {workload_id}: {workload.state.value}")
