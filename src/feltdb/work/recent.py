"""The workloads a unit of work committed last, so the next command on one decides without
reading it again (a claim's completion decides on the workload the claim committed).

An entry is the stored text of unfinished work as this process committed it (finished
work is not kept: no command commits on it again), keyed by its id,
with the version that commit wrote; it is decoded afresh at each recall, so nothing a
caller holds of a committed workload (its input, a checkpoint's state) is ever shared with
a later command. Nothing trusts an entry: a decision made on one commits guarded by that
version, so if anyone committed the workload since (another process, another server, an
import), the guard is lost, the entry forgotten, and the command decided again on a fresh
read (:meth:`~feltdb.work.unit.UnitOfWork.run`). A decision on an entry that commits nothing
(a refusal, a replayed answer) is decided again on a fresh read too: only a commit proves
the entry was current. Bounded: :data:`MAX_ENTRIES` workloads and :data:`MAX_BYTES` of their
stored text, the least recently used first out; a workload whose text passes
:data:`MAX_ENTRY_BYTES` is not kept.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable

from feltdb.records.codec import stored_workload
from feltdb.work.rows import LoadedWorkload

MAX_ENTRIES = 4096
"""Workloads remembered at most (a worker's claims in flight fit many times over)."""

MAX_BYTES = 64 * 1024 * 1024
"""Stored text of the workloads remembered, at most, in all."""

MAX_ENTRY_BYTES = 256 * 1024
"""A workload whose stored text is longer is read again rather than remembered."""


class RecentCommits:
    """The last committed workloads, each at the version its commit wrote. Thread-safe."""

    def __init__(
        self,
        max_entries: int = MAX_ENTRIES,
        max_bytes: int = MAX_BYTES,
        max_entry_bytes: int = MAX_ENTRY_BYTES,
    ) -> None:
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self.max_entry_bytes = max_entry_bytes
        self._entries: OrderedDict[str, tuple[str, int]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def bytes(self) -> int:
        """The stored text of the workloads remembered, in all."""
        return self._bytes

    def remember(self, key: str, text: str, version: int) -> None:
        """Keep the workload at ``key`` as committed at ``version``, whose stored text is
        ``text``; a longer one than :attr:`max_entry_bytes` is forgotten instead.
        """
        size = len(text)
        with self._lock:
            self._drop(key)
            if size > self.max_entry_bytes:
                return
            self._entries[key] = (text, version)
            self._bytes += size
            while len(self._entries) > self.max_entries or self._bytes > self.max_bytes:
                _, (dropped, _) = self._entries.popitem(last=False)
                self._bytes -= len(dropped)

    def recall(self, key: object) -> LoadedWorkload | None:
        """The workload at ``key`` as this process last committed it (decoded now from its
        stored text), if remembered.
        """
        if not isinstance(key, str):
            return None
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                return None
            self._entries.move_to_end(key)
        text, version = entry
        return LoadedWorkload.of(stored_workload(key, text), version)

    def clear(self) -> None:
        """Forget every workload."""
        with self._lock:
            self._entries.clear()
            self._bytes = 0

    def forget(self, keys: Iterable[str]) -> None:
        """Forget the workloads at ``keys`` (someone else committed them since)."""
        with self._lock:
            for key in keys:
                self._drop(key)

    def _drop(self, key: str) -> None:
        entry = self._entries.pop(key, None)
        if entry is not None:
            self._bytes -= len(entry[0])
