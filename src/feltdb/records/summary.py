"""What a list shows of one workload: :class:`WorkloadSummary`.

A list (``WorkloadStore.page``, ``GET /v1/workloads``, the approval inbox, the dead
letters, ``feltdb ls``, the dashboard's pages) answers summaries, never whole workloads: a
workload's input, checkpoints, result and history can each be megabytes, and a page of
them would be as large as the work it lists. A summary holds the workload's identity and
standing, counts in place of collections, the last event (why it stands where it does) and
a preview of its input; read one workload (``get``) for the rest.

Each field is bounded by what it summarizes, and none is larger than the part of the
stored record it comes from, so a page of summaries is never larger than the stored records
it was read from (a page reads at most ``feltdb.work.listing.MAX_PAGE_CHARS`` of them). A
summary is a few KiB: ids of at most 256 characters, the preview, the last failure and the
last event's evidence of at most 4,096 each; and the approval policy, whose list of
approvers (at most 1,024 subjects, up to about 270 KiB) is the one part that can be larger.
"""

from __future__ import annotations

from typing import Final

from feltdb.auth.subjects import Subject
from feltdb.fields import Count, Instant, Priority
from feltdb.records.base import Record
from feltdb.records.workload import WorkloadApproval, WorkloadDependency, WorkloadEvent
from feltdb.work.states import WorkloadState

INPUT_PREVIEW_CHARS: Final = 500
"""The most characters of a workload's input (its canonical JSON) a summary shows."""


class WorkloadSummary(Record, frozen=True, kw_only=True):  # type: ignore[misc]
    """One workload as a list shows it: what it is, where it stands and why, without its
    input, checkpoints, result or history (``input_preview`` shows the input's first
    :data:`INPUT_PREVIEW_CHARS` characters; ``input_chars`` says how long it is).
    """

    workload_id: str
    tenant_id: str
    application_id: str
    environment: str
    definition_id: str
    definition_revision: str
    trigger: str
    requested_by: Subject
    priority: Priority
    idempotency_key: str
    created_at: Instant
    updated_at: Instant
    state: WorkloadState
    attempt_count: Count
    max_attempts: Count
    """The retry policy's ``max_attempts``."""
    retry_count: Count
    next_attempt_at: Instant | None
    last_failure: str | None
    worker_id: str | None
    """Who holds the current claim (``None``: no one)."""
    lease_expires_at: Instant | None
    """When the current claim's lease ends, unless renewed."""
    input_hash: str
    input_chars: Count
    """The length of the input's canonical JSON."""
    input_preview: str
    """The input's canonical JSON, cut to :data:`INPUT_PREVIEW_CHARS` characters."""
    dependency_count: Count
    waits_for: WorkloadDependency | None = None
    """Of ``READY`` work, the first dependency not yet in the state it requires: no worker
    takes it until it is (``None``: none, or not ``READY``)."""
    checkpoint_count: Count
    result_id: str | None
    approval: WorkloadApproval | None
    """Its approval policy and decision, if it requires one."""
    approval_deadline: Instant | None
    """When work awaiting approval is timed out undecided (``None``: no deadline, or not
    awaiting approval)."""
    last_event: WorkloadEvent | None
    """The last committed transition (``None`` only for a record without history)."""
    ended_because: str | None = None
    """Of ended work, why, in one sentence (``feltdb.work.explanations.ended_because``)."""
    last_effect: str | None
    """What the last attempt did to the world, as its worker said: ``none``, ``unknown``
    (it may have acted), or ``None`` when no attempt was made."""
