"""The capabilities the authority checks, by name: plain strings, importing nothing (so
the command line declares its commands without importing the records or the policy).
:mod:`feltdb.auth.policy` decides who holds which.
"""

from __future__ import annotations

from typing import Final

SUBMIT: Final = "workload:execute"
"""Admit work (``POST /v1/workloads``)."""
READ: Final = "workload:read"
"""Read work."""
CLAIM: Final = "workload:claim"
"""Act as a worker: claim, start, heartbeat, checkpoint, complete, fail."""
CANCEL: Final = "workload:cancel"
"""Request cancellation."""
OPERATE: Final = "workload:operate"
"""Operator actions, e.g. retry."""
APPROVE: Final = "workload:approve"
"""Decide work awaiting approval."""
AUDIT: Final = "audit:read"
"""Read committed transactions."""
REVOKE: Final = "grant:revoke"
"""Revoke a grant of one's own tenant and application (``POST /v1/grants/{id}/revoke``)."""

SCHEDULE: Final = "schedule:manage"
"""Create, list, pause, resume and delete the application's schedules (``/v1/schedules``)."""

ALL_CAPABILITIES: Final = frozenset(
    {SUBMIT, READ, CLAIM, CANCEL, OPERATE, APPROVE, AUDIT, REVOKE, SCHEDULE}
)
"""Every capability the server checks (an administrator's grant holds them all)."""
