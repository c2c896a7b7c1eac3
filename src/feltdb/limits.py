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

DEFAULT_UNHEALTHY_AFTER_S: Final = 60.0
"""How long a worker's claim loop may go without a pass, or its claims without reaching
the authority, before its health check fails: past a claim's own bound (its long-poll and
the client's 30 s timeout), so one slow answer is not taken for an outage."""

MAX_UNHEALTHY_AFTER_S: Final = 86_400.0
"""The longest that bound may be set to (a day)."""
