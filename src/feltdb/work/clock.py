"""The one place the authority reads the clock.

Every decision takes ``now`` as an argument (so tests and replays are deterministic); the
facade resolves a ``now`` of ``None`` here, and nowhere else.
"""

from __future__ import annotations

import time

from feltdb.fields import MAX_NOW
from feltdb.work import inputs


def resolved_now(now: int | None) -> int:
    """``now``, or the current unix second when it is ``None``. A given ``now`` is at most
    :data:`~feltdb.fields.MAX_NOW`, so nothing derived from it overflows what a record
    stores (records are not validated again on assignment).

    Raises:
        WorkloadError: ``WORKLOAD_INVALID`` for a ``now`` that is not such an integer.
    """
    if now is None:
        return int(time.time())
    return inputs.integer(now, "now", 0, MAX_NOW)
