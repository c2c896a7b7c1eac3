"""The authority over HTTP: ``create_app(store, keyring)`` builds the FastAPI app.

This package only translates between HTTP and :class:`~feltdb.work.store.WorkloadStore`:
routes in :mod:`feltdb.server.api`, the error table in :mod:`feltdb.server.errors`, the
maintenance loop in :mod:`feltdb.server.maintenance`.
"""

from feltdb.server.app import create_app
from feltdb.server.errors import MAX_BODY_BYTES, STATUS_BY_CODE
from feltdb.server.maintenance import Maintenance

__all__ = ["MAX_BODY_BYTES", "STATUS_BY_CODE", "Maintenance", "create_app"]
