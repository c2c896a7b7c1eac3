"""Aging: where a claim's read of ready work starts when low-priority work has waited long
enough to go first.

A selection by claim partitions reads each group's rows in claim order: priority first,
then age. With an aging period A, a workload's *effective* priority is its priority plus
one for every A seconds since it was created; the oldest row of each priority level of a
group (its *head*, one seek each, :data:`MAX_HEAD_SEEKS` at most a selection) is the one
whose effective priority is highest in its level. When the highest of all heads is below
the top level, the selection reads from that head's level on instead of the top
(:func:`aged_start`): the aged level's rows first, then the lower ones, in claim order.
The claim that reads so (its first selection; :mod:`feltdb.work.claiming`) reads from the
top again if it finds nothing there it may take.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Final

MAX_HEAD_SEEKS: Final = 64
"""The most index seeks one selection makes to find the heads of priority levels: past
that, the levels not yet found are not aged in that selection."""

Fetch = Callable[[str, int, dict[str, Any]], list[tuple[Any, ...]]]
"""Runs a named statement over one range's parameters, to a depth: the selection's."""


def aged_start(
    fetch: Fetch, groups: Sequence[tuple[str, str]], now: int, aging_s: int
) -> tuple[int, int, str] | None:
    """The position just before the head whose effective priority at ``now`` is highest
    (ties: the oldest), when it is below the groups' top priority; ``None`` when the top
    level goes first anyway (or no group has an eligible row).
    """
    heads: list[tuple[int, int, int]] = []  # (effective priority, -created_at, priority)
    seeks = 0
    for definition, claim_group in groups:
        ranged: dict[str, Any] = {"definition": definition, "claim_group": claim_group}
        name = "claimable_rows_in_group"
        while seeks < MAX_HEAD_SEEKS:
            seeks += 1
            found = fetch(name, 1, ranged)
            if not found:
                break
            priority, created_at = found[0][5], found[0][6]
            if not isinstance(priority, int) or not isinstance(created_at, int):
                break  # a row without a position: never aged
            waited = max(now - created_at, 0) // aging_s
            heads.append((priority + waited, -created_at, priority))
            name, ranged = "claimable_rows_in_group_lower_priority", {
                **ranged, "priority": priority, "created_at": created_at, "key": "",
            }  # fmt: skip
    if not heads:
        return None
    top = max(priority for _, _, priority in heads)
    _, oldest, priority = max(heads)
    if priority == top:
        return None
    # Past (created_at - 1, the greatest key): the head's own row is the first one read.
    return priority, -oldest - 1, "\U0010ffff"
