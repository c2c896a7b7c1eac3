"""The audit chain's verification, one at a time in a server process: for the API
(``GET /v1/audit/verify``) and the dashboard's audit page alike.

Each verification reads the whole log, so a second one asked for meanwhile is refused
``WORKLOAD_STORAGE_FAILURE`` (503) with ``details.retry_after_s``: how long the last one
took, 1 to :data:`MAX_RETRY_AFTER_S` seconds (the API's ``Retry-After``).
"""

from __future__ import annotations

import math
import threading
import time

from feltdb.errors import ErrorCode, WorkloadError
from feltdb.storage.audit_chain import ChainReport
from feltdb.work.authority import Authority

MAX_RETRY_AFTER_S = 60
"""The longest ``Retry-After`` a busy verification answers: one stuck behind a lock, or
slowed by a reader, must not tell every client to stay away for as long."""

_VERIFYING = threading.Lock()
"""Held while a verification of the audit chain runs."""
_last_verification_s = [1.0]
"""How long the last verification took."""


def verify_chain(acting: Authority, anchor: tuple[int, str] | None = None) -> ChainReport:
    """Seal and verify the audit chain, reported as the caller's application's audit
    reader may see it (:meth:`~feltdb.work.audit.AuditTrail.verify`), for a caller that
    may read the audit.

    Raises:
        WorkloadError: ``WORKLOAD_UNAUTHORIZED`` for a caller that may not read the audit;
            ``WORKLOAD_STORAGE_FAILURE`` while another verification runs (with
            ``retry_after_s``) or when the store fails; ``WORKLOAD_INVALID``.
    """
    acting.audit_reader()
    if not _VERIFYING.acquire(blocking=False):
        raise WorkloadError(
            ErrorCode.WORKLOAD_STORAGE_FAILURE,
            "a verification of the audit chain is already running; ask again when it ends",
            {"retry_after_s": min(MAX_RETRY_AFTER_S, max(1, math.ceil(_last_verification_s[0])))},
        )
    started = time.monotonic()
    try:
        scope = acting.scope
        return acting.store.audit.verify(scope.tenant_id, scope.application_id, anchor=anchor)
    finally:
        _last_verification_s[0] = time.monotonic() - started
        _VERIFYING.release()
