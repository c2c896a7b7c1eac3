"""The ``feltdb`` command's tables of listed work: the workloads (``ls``, ``dead``) and the
approval inbox (``inbox``), each as wide as the console allows.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import TYPE_CHECKING

from rich.console import Console
from rich.table import Table
from rich.text import Text

from feltdb.cli.render import relative, state_text, when, why_it_ended

if TYPE_CHECKING:
    from feltdb.records.summary import WorkloadSummary

WIDE = 120
"""From this many columns on, a workload table shows every column."""
MEDIUM = 96
"""Below :data:`WIDE`, ``created`` is left out; below this, ``priority`` and ``attempts``."""
LEFT_OUT_BELOW = (("priority", MEDIUM), ("attempts", MEDIUM), ("created", WIDE))
"""Each column a narrow workload table leaves out, and from how many columns it is shown."""


def workload_table(
    console: Console,
    workloads: Iterable[WorkloadSummary],
    title: str,
    *,
    reasons: bool = False,
    order: str | None = None,
) -> None:
    """A table of workloads: id, definition, state, priority, attempts, created (and, with
    ``reasons``, why each ended), with the columns a console this wide can hold: an id is
    never shortened (it is what ``feltdb show`` takes), a header never blank; ``order``,
    when given, is said below it.
    """
    width = console.width
    roomy, wide = width >= MEDIUM, width >= WIDE
    # Dead letters are all in one state; at a narrow width their why needs the room most.
    stated, defined = not reasons, not reasons or roomy
    left_out = [name for name, shown in LEFT_OUT_BELOW if width < shown and not reasons]
    if left_out:
        widen = f"{', '.join(left_out)}: from {WIDE} columns, or --json"
        order = f"{order}; {widen}" if order else widen
    table = Table(title=title, title_justify="left", caption=order, caption_justify="left")
    table.add_column("id", no_wrap=True, min_width=len("id"))
    if defined:
        table.add_column("definition", min_width=len("definition"), overflow="fold")
    if stated:
        table.add_column("state", no_wrap=True, min_width=len("state"))
    if roomy:
        table.add_column("priority", justify="right", min_width=len("priority"))
        table.add_column("attempts", justify="right", min_width=len("attempts"))
    if wide:
        table.add_column("created", no_wrap=True, min_width=len("created"))
    if reasons:
        table.add_column("why", min_width=len("why"), overflow="fold")
    count = 0
    for w in workloads:
        count += 1
        definition = f"{w.definition_id}@{w.definition_revision}"
        state = state_text(w.state)
        if w.waits_for is not None:
            state.append(" (waiting)")
        row: list[str | Text] = [w.workload_id]
        row += [definition] if defined else []
        row += [state] if stated else []
        if roomy:
            row += [str(w.priority), str(w.attempt_count)]
        if wide:
            row.append(when(w.created_at))
        if reasons:
            row.append(why_it_ended(w) or "-")
        table.add_row(*row)
    if count == 0:
        console.print(f"{title}: none")
        return
    console.print(table)


def inbox_table(console: Console, held: Iterable[WorkloadSummary], title: str) -> None:
    """The work awaiting a decision: id, who asked, when its approval expires, and the
    start of its input (``feltdb show ID`` prints all of it), as wide as the console.
    """
    now = time.time()
    table = Table(title=title, title_justify="left", caption=ORDER_OF_INBOX)
    table.add_column("id", no_wrap=True, min_width=len("id"))
    table.add_column("asked by", overflow="fold", min_width=len("asked by"))
    table.add_column("expires", no_wrap=True, min_width=len("expires"))
    table.add_column("input", no_wrap=True, overflow="ellipsis", ratio=1, min_width=5)
    count = 0
    for w in held:
        count += 1
        deadline = w.approval_deadline
        expires = "never" if deadline is None else relative(deadline, now)
        table.add_row(w.workload_id, str(w.requested_by), expires, w.input_preview)
    if count == 0:
        console.print(f"{title}: none")
        return
    console.print(table)


ORDER_OF_INBOX = "oldest first within each priority; approve or reject with feltdb approve ID"
"""What the inbox table says below it."""
