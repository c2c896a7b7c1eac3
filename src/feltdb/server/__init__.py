"""The authority over HTTP: ``create_app(store, keyring)`` builds the FastAPI app.

This package only translates between HTTP and :class:`~feltdb.work.store.WorkloadStore`:
routes by audience in :mod:`feltdb.server.routes` (their bodies in
:mod:`feltdb.server.bodies`, authorization rules in :mod:`feltdb.auth.policy`), the error
table in :mod:`feltdb.server.errors`, the maintenance loop in
:mod:`feltdb.server.maintenance`, metrics and long-poll wake-ups as the store's commit
observers (:mod:`feltdb.server.metrics`, :mod:`feltdb.server.wakeup`).
"""

from feltdb.server.app import create_app
from feltdb.server.errors import MAX_BODY_BYTES, STATUS_BY_CODE
from feltdb.server.maintenance import Maintenance

__all__ = ["MAX_BODY_BYTES", "STATUS_BY_CODE", "Maintenance", "create_app"]
