"""``feltdb audit prune-log``: the log's entries up to a revision exported, then deleted;
and ``feltdb audit check-export``, the check of such an export.

Both work on the store itself (``--db``): the log is every tenant's, and a server writes
no file a caller names (:mod:`feltdb.work.log_pruning`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from feltdb.auth.capabilities import AUDIT
from feltdb.cli.audit import JsonOption, audit_group
from feltdb.cli.render import print_json
from feltdb.cli.targets import Target, connected, refusals, targeted, usage_error


@audit_group.command("prune-log")
@targeted
def prune_log(
    through: Annotated[
        str,
        typer.Option(
            metavar="REVISION",
            help="Prune the transactions up to this revision (sealed: at most the head "
            "`feltdb audit verify` prints), or `head` for all that are sealed.",
        ),
    ],
    export: Annotated[
        Path,
        typer.Option(
            metavar="FILE",
            help="A new JSON Lines file the transactions are written to, with their links, "
            "before any is deleted (never overwritten).",
        ),
    ],
    json_output: JsonOption = False,
    *,
    target: Target,
) -> None:
    """Delete the audit log's transactions up to a revision, after checking the whole
    chain, writing again every row they last wrote, and exporting them to FILE. Their
    links stay, so `feltdb audit verify` still checks the chain across them; FILE holds
    their content (`feltdb audit check-export FILE`). With --db only.
    """
    from feltdb.client.local import LocalClient

    if not target.db:
        raise usage_error("prune-log works on the store itself: give --db (the log is every "
                          "tenant's, and a server writes no file a caller names)")  # fmt: skip
    upto = None if through == "head" else _revision(through)
    with connected(target, needs=(AUDIT,)) as client:
        assert isinstance(client, LocalClient)  # --db: the store in process
        said = None if json_output else _progress
        report = client.store.audit.prune_log(
            export, upto, actor=client.acting.actor, progress=said
        )
    if json_output:
        print_json(report.to_json())
        return
    done = report.export
    typer.echo(f"pruned the log through revision {report.through}")
    typer.echo(f"  rows written again first: {report.carried:,}")
    typer.echo(f"  transactions deleted: {report.deleted:,}")
    if report.reclaimed_bytes:
        typer.echo(f"  space returned to the file system: {report.reclaimed_bytes:,} bytes")
    if done is None:
        typer.echo("  export: none (the log was already pruned that far)")
    else:
        typer.echo(f"  exported: {done.entries:,} transactions, {done.size:,} bytes")
        typer.echo(f"  sha256: {done.sha256}")
        typer.echo(f"  link: {done.last_revision}:{done.through_link}")


def _revision(text: str) -> int:
    if not text.isascii() or not text.isdigit() or int(text) < 1:
        raise usage_error(f"--through {text!r}: a revision (1 or more), or head")
    return int(text)


def _progress(line: str) -> None:
    typer.echo(line, err=True)


@audit_group.command("check-export")
@targeted
def check_export(
    export: Annotated[Path, typer.Argument(metavar="FILE", help="An export prune-log wrote.")],
    json_output: JsonOption = False,
    *,
    target: Target,
) -> None:
    """Check an export of the audit log: every transaction's digest and link recomputed
    in order from the link before its first. With --db, also that its last link is the
    store's chain's there. Exits 1 if it fails.
    """
    from feltdb.work.log_export import check_export as checked_file

    with refusals():
        if target.db:
            from feltdb.client.local import LocalClient

            with connected(target, needs=(AUDIT,)) as client:
                assert isinstance(client, LocalClient)
                summary = client.store.audit.check_export(export)
        else:
            summary = checked_file(export)
    if json_output:
        print_json({"ok": True, **summary.to_json()})
        return
    typer.echo(f"export: ok ({summary.entries:,} transactions)")
    typer.echo(f"  revisions: after {summary.after_revision} through {summary.through_revision}")
    typer.echo(f"  link: {summary.last_revision}:{summary.through_link}")
    typer.echo(f"  sha256: {summary.sha256}")
