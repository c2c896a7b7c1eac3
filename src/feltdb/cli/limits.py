"""``feltdb limits``: what the application's concurrency limits hold now, as
``GET /v1/limits/concurrency`` answers (:func:`feltdb.work.limits_view.concurrency_keys`).
"""

from __future__ import annotations

import typer

from feltdb.auth.capabilities import READ
from feltdb.cli.targets import JsonOption, Target, connected, targeted

limits_app = typer.Typer(add_completion=False, rich_markup_mode=None)
"""Holds ``feltdb limits``; the root adds it without a name (a top-level command)."""


@limits_app.command("limits")
@targeted
def limits(json_output: JsonOption = False, *, target: Target) -> None:
    """List the application's concurrency keys (needs workload:read over all of it): each
    key's limit, how many of its slots are held, and the workloads holding them. Work
    names a key with `feltdb submit --concurrency-key KEY --concurrency-limit N`.
    """
    from feltdb.cli.render import print_json, stdout_console

    with connected(target, needs=(READ,)) as client:
        found = client.concurrency_keys()
    if json_output:
        print_json(found.to_json())
        return
    console = stdout_console()
    if not found.keys:
        console.print("no concurrency key has been claimed")
        return
    for entry in found.keys:
        limit = "?" if entry.limit is None else str(entry.limit)
        console.print(f"{entry.key}: {len(entry.holders)} of {limit} held", markup=False)
        for holder in entry.holders:
            console.print(f"  {holder}", markup=False)
    if not found.complete:
        console.print("(more keys than one answer lists: --json for the first 1,000)")
