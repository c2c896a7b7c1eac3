"""What the workers view shows: :class:`WorkersSeen`, each worker the store's own records
name (:func:`feltdb.work.workers.workers_seen` reads them).

Every field is bounded: at most :data:`MAX_WORKERS` workers, each with at most
:data:`MAX_DEFINITIONS` definitions and :data:`MAX_LEASES` leases shown (the counts say
how many there were), and :data:`RATE_MINUTES` minutes of completions and failures.
"""

from __future__ import annotations

from typing import Annotated, Final

import msgspec

from feltdb.fields import Count, Instant
from feltdb.records.base import Record

MAX_WORKERS: Final = 200
"""The most workers one answer holds (those with the freshest heartbeat first)."""
MAX_DEFINITIONS: Final = 20
"""The most definitions one worker's entry names."""
MAX_LEASES: Final = 20
"""The most leases one worker's entry shows (those expiring first)."""
RATE_MINUTES: Final = 10
"""The whole minutes up to now whose completions and failures are counted."""
STALE_AFTER_SECONDS: Final = 120
"""A worker whose freshest heartbeat is older than this is stale (so is one holding an
expired lease)."""


class HeldLease(Record, frozen=True, kw_only=True):  # type: ignore[misc]
    """One lease a worker holds now: on which workload, of which definition, until when,
    and when the worker last heartbeat on it.
    """

    workload_id: str
    definition_id: str
    state: str
    expires_at: Instant
    last_heartbeat: Instant


class WorkerSeen(Record, frozen=True, kw_only=True):  # type: ignore[misc]
    """One worker (``worker_id``, as its claims name it: ``KIND:ID``) and what the store
    says of it: the definitions of the work it holds, the leases it holds (``lease_count``
    of them, at most :data:`MAX_LEASES` shown), its freshest heartbeat (``None``: it holds
    no lease), its completions and failures over the last :data:`RATE_MINUTES` minutes
    (in all, and per minute), and whether it is ``stale``.
    """

    worker_id: str
    definitions: Annotated[list[str], msgspec.Meta(max_length=MAX_DEFINITIONS)]
    leases: Annotated[list[HeldLease], msgspec.Meta(max_length=MAX_LEASES)]
    lease_count: Count
    last_heartbeat: Instant | None
    completed: Count
    failed: Count
    completed_per_minute: float
    failed_per_minute: float
    stale: bool
    stale_reason: str | None
    """Why it is stale, in words (``None``: it is not)."""


class WorkersSeen(Record, frozen=True, kw_only=True):  # type: ignore[misc]
    """The workers of one application as read at ``now``, freshest heartbeat first, and
    whether every record was read (``complete`` false: the held work or the log read
    stopped at its bound, so some workers or counts may be missing). ``counted`` false:
    the reader is narrowed to some environments or definitions, which the log's records
    do not name, so no completion or failure is counted for it (each worker's are 0).
    """

    now: Instant
    workers: Annotated[list[WorkerSeen], msgspec.Meta(max_length=MAX_WORKERS)]
    minutes: Count
    complete: bool
    counted: bool
