"""Clients of the authority, one protocol (:class:`WorkloadClient`) and two ways to call it:
:class:`Client`, over HTTP to ``feltdb serve``, and :class:`LocalClient`, on a
:class:`~feltdb.work.store.WorkloadStore` in process; and :class:`AsyncClient`, every call
of :class:`Client` awaited, for asyncio code.

:class:`Client`, :class:`AsyncClient`, :class:`ClientError` and :class:`LocalClient` are
imported on first use, so that neither kind of client loads the other: the HTTP clients
(``httpx``) are a tenth of a second to import, which work on a local store never needs,
and they never reach a store.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from feltdb.client.batches import CompletionItem, HeartbeatItem
from feltdb.client.protocol import AuditPage, Page, WorkloadClient
from feltdb.client.retention import PruneRequest
from feltdb.client.schedules import ScheduleSpec
from feltdb.records.summary import WorkloadSummary
from feltdb.work.claimed import ClaimedWork, LeaseRenewal

if TYPE_CHECKING:
    from feltdb.client.http import Client, ClientError
    from feltdb.client.http_async import AsyncClient
    from feltdb.client.local import LocalClient

__all__ = [
    "AsyncClient",
    "AuditPage",
    "ClaimedWork",
    "Client",
    "ClientError",
    "CompletionItem",
    "HeartbeatItem",
    "LeaseRenewal",
    "LocalClient",
    "Page",
    "PruneRequest",
    "ScheduleSpec",
    "WorkloadClient",
    "WorkloadSummary",
]

_MODULES = {
    "AsyncClient": "http_async",
    "Client": "http",
    "ClientError": "http",
    "LocalClient": "local",
}


def __getattr__(name: str) -> Any:
    if name in _MODULES:
        return getattr(importlib.import_module(f"feltdb.client.{_MODULES[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
