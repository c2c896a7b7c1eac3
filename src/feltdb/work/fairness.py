"""Fairness: a claim that finds several keys' ready work serves them in turn, so one key's
backlog of a million never starves another's ten.

A workload may name a ``fairness_key`` (a customer, an account); work naming none takes
the turn of the key ``""``. The key is part of the work's claim group
(:func:`feltdb.work.partitions.claim_group`), so a claim's walk of the groups tells the
keys apart without reading their rows. When it finds more than one, the selection takes
one candidate of each key in turn, round robin
(:meth:`~feltdb.storage.selection.Selection.in_turns`); within a key, candidates come in
claim order (priority, then age). Each claim of a tenant's
application starts one key further along than the last claim of that application in this
process (:class:`Rotation`), so successive claims of one row each serve each key in turn.
A key whose candidates are held back (a concurrency or rate limit, a capability the
worker lacks) gives its turn to the next.

What it is not: keys are served alike, whatever their backlog or their work's priorities
(a key's high-priority work waits its key's turn); and each process keeps its own
rotation, so several processes claiming at once serve the keys in turn each, not together.
Past :data:`~feltdb.storage.partitions.MAX_GROUPS_WALKED` groups a claim reads ready work in
claim order, as before fairness; and so does the rest of a claim that found a whole page of
turns it could not take (rows taken in turns have no one position to page past).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Final

from feltdb.storage.partitions import Group

__all__ = ["ROTATION", "Rotation", "in_turns"]

MAX_SCOPES_ROTATED: Final = 4096
"""The most tenants' applications a process keeps a rotation of (least recently used out:
one forgotten starts again from the first key)."""


class Rotation:
    """Where each tenant's application's next claim starts in its keys' turns (a counter
    per application, bounded).
    """

    def __init__(self) -> None:
        self._next: OrderedDict[tuple[str, str], int] = OrderedDict()
        self._lock = threading.Lock()

    def advance(self, scope: tuple[str, str]) -> int:
        """The turn of this claim of ``scope`` (tenant, application): one more than the last."""
        with self._lock:
            turn = self._next.pop(scope, 0)
            self._next[scope] = turn + 1
            while len(self._next) > MAX_SCOPES_ROTATED:
                self._next.popitem(last=False)
        return turn


ROTATION: Final = Rotation()


def in_turns(groups: Sequence[Group], key_of: Mapping[Group, str], turn: int) -> list[list[Group]]:
    """``groups`` split by their work's fairness key (``key_of``; absent: ``""``), one list
    a key, in key order rotated to start at the ``turn``'th (modulo the keys found).
    """
    by_key: dict[str, list[Group]] = {}
    for group in groups:
        by_key.setdefault(key_of.get(group, ""), []).append(group)
    keys = sorted(by_key)
    start = turn % len(keys) if keys else 0
    return [by_key[key] for key in keys[start:] + keys[:start]]
