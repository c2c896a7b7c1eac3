"""``feltdb workflow``: submit a workflow from a JSON file, show its run, cancel it.

The file is the body of ``POST /v1/workflows``: ``{"key": …, "nodes": [{"name": …,
"after": [NAME or NAME:STATE, …], "submission": {…}}, …]}``, each submission as
``feltdb submit`` would send it (``definition_id`` and ``input`` at least).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from feltdb.auth.capabilities import CANCEL, READ, SUBMIT
from feltdb.cli.keyrings import KeyringFileOption
from feltdb.cli.targets import JsonOption, Target, connected, targeted, usage_error

if TYPE_CHECKING:  # what a command runs is imported when it runs, not for --help
    from feltdb.records.workflow import WorkflowRun

workflow_app = typer.Typer(
    help="Workflows: workloads submitted together, with dependencies between them.",
    no_args_is_help=True,
    rich_markup_mode=None,
)

WorkflowIdArgument = Annotated[
    str, typer.Argument(metavar="WORKFLOW_ID", help="The run's id (submit prints it).")
]

MAX_FILE_BYTES = 1024 * 1024
"""The largest workflow file read: the server's request body bound."""


def _read(path: Path) -> dict[str, Any]:
    """The workflow in the JSON file ``path``.

    Raises:
        typer.Exit: (2, after saying why) a file that cannot be read, is too large, or
            does not hold a JSON object with ``key`` and ``nodes``.
    """
    try:
        with path.open("rb") as file:
            data = file.read(MAX_FILE_BYTES + 1)
    except OSError as error:
        raise usage_error(f"cannot read {path}: {error.strerror or error}") from None
    if len(data) > MAX_FILE_BYTES:
        raise usage_error(f"{path} is over {MAX_FILE_BYTES:,} bytes: split the workflow")
    try:
        document = json.loads(data)
    except ValueError as error:
        raise usage_error(f"{path} is not JSON: {error}") from None
    if not isinstance(document, dict) or not isinstance(document.get("nodes"), list):
        raise usage_error(f'{path}: a workflow is an object with "key" and "nodes" (a list)')
    return document


@workflow_app.command("submit")
@targeted
def submit(
    file: Annotated[Path, typer.Argument(metavar="FILE", help="The workflow, as JSON.")],
    key: Annotated[
        str | None, typer.Option(help="The workflow's key (default: the file's \"key\").")
    ] = None,
    json_output: JsonOption = False,
    keyring: KeyringFileOption = None,
    *,
    target: Target,
) -> None:
    """Submit every node of a workflow, or none: a workflow that cannot run (a cycle, a
    name given twice or unknown, a refused node) is refused naming the nodes. The same
    key and nodes again is a replay (needs workload:execute).
    """
    document = _read(file)
    chosen = key if key is not None else document.get("key")
    if not isinstance(chosen, str):
        raise usage_error(f'{file} has no "key": give --key')
    with connected(target, create=True, needs=(SUBMIT,), records=True, keyring=keyring) as client:
        run, created = client.submit_workflow(chosen, document["nodes"])
    _print(run, json_output, "submitted" if created else "already submitted (a replay)")


@workflow_app.command("show")
@targeted
def show(
    workflow_id: WorkflowIdArgument,
    json_output: JsonOption = False,
    *,
    target: Target,
) -> None:
    """Show a workflow's run: each node's state and what it runs after, and the run's
    state (RUNNING, SUCCEEDED, FAILED or CANCELLED; needs workload:read).
    """
    with connected(target, needs=(READ,)) as client:
        run = client.workflow(workflow_id)
    _print(run, json_output, None)


@workflow_app.command("cancel")
@targeted
def cancel(
    workflow_id: WorkflowIdArgument,
    json_output: JsonOption = False,
    *,
    target: Target,
) -> None:
    """Cancel every node of a run not yet at rest (held ones by request to their worker;
    needs workload:read and workload:cancel).
    """
    with connected(target, needs=(READ, CANCEL)) as client:
        run = client.cancel_workflow(workflow_id)
    _print(run, json_output, "cancelled what had not come to rest")


def _print(run: WorkflowRun, json_output: bool, said: str | None) -> None:
    """``run`` as JSON, or as a table that fits 80 columns under a line saying ``said``."""
    from rich.markup import escape
    from rich.table import Table

    from feltdb.cli.render import print_json, stdout_console

    if json_output:
        print_json(run.to_json())
        return
    console = stdout_console()
    if said is not None:
        console.print(f"workflow {run.workflow_id}: {said}", markup=False)
    # Names and keys are the submitter's text, never markup.
    table = Table(title=f"{escape(run.key)}: {run.state.value}", title_justify="left")
    table.add_column("node", overflow="fold")
    table.add_column("state", no_wrap=True)
    table.add_column("after", overflow="fold")
    table.add_column("workload", no_wrap=True)
    for node in run.nodes:
        state = node.state.value if node.state is not None else "not admitted"
        after = ", ".join(node.after) or "-"
        table.add_row(escape(node.name), state, escape(after), node.workload_id)
    console.print(table)
