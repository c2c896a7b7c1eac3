"""A page's cursor as the opaque text a reader is given back, and that text read again.

``WorkloadStore.page`` answers the position after a page as ``(priority, created_at,
workload_id)``; every client (the server's lists, a local client) hands it out the same
way, so a cursor is good for either kind of client.
"""

from __future__ import annotations

import base64
import binascii
import json

from feltdb.errors import ErrorCode, WorkloadError
from feltdb.records.summary import WorkloadSummary
from feltdb.records.workload import Workload
from feltdb.work.inputs import Cursor


def encode_cursor(after: Cursor | None) -> str | None:
    """The opaque ``next_cursor`` of ``after``: URL-safe base64 of its JSON, unpadded."""
    if after is None:
        return None
    text = json.dumps(list(after), separators=(",", ":"))
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


def decode_cursor(cursor: str | None) -> Cursor | None:
    """The position a cursor of :func:`encode_cursor` names (``None`` or ``""``: the start).

    Raises:
        WorkloadError: ``WORKLOAD_INVALID`` for text that is not such a cursor (its parts
            are ``WorkloadStore.page``'s to check).
    """
    if not cursor:
        return None
    try:
        value = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
    except (binascii.Error, ValueError):
        value = None
    if not isinstance(value, list):
        raise WorkloadError(
            ErrorCode.WORKLOAD_INVALID,
            "cursor: not a cursor a page of this authority answered",
            {"fields": ["cursor"]},
        )
    return tuple(value)  # WorkloadStore.page checks its parts


def cursor_of(workload: Workload | WorkloadSummary) -> Cursor:
    """The cursor that goes on after ``workload``: its place in the keyset order of
    :meth:`~feltdb.work.store.WorkloadStore.page`, ``(priority, created_at, workload_id)``.
    """
    return workload.priority, workload.created_at, workload.workload_id
