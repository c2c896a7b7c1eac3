"""Bounds of the runtime that several layers and the command line state, as plain numbers
that import nothing (the command line declares its options' ranges with them without
importing the authority). The bounds of a record's fields are :mod:`feltdb.fields`'.
"""

from __future__ import annotations

from typing import Final

MAX_PLANS_PER_BATCH: Final = 1024
"""The most plans one :meth:`Database.commit_many` takes (a revision numbers them in 10
bits), and so the most items one batch operation takes."""

MAX_CONCURRENCY: Final = 4096
"""The most handlers one worker runs at once (each runs on a thread of its own)."""

MAX_COMPLETION_WAIT_MS: Final = 60_000
"""The longest a finished attempt may be kept waiting for others to join its completion."""
